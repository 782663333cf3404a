"""MindIE / vLLM-Ascend service profiles written by msServiceProfiler's parse step
(``ms_service_profiler.parse``, Ascend msit / msserviceprofiler): ``chrome_tracing.json``,
``profiler.db``, ``batch.csv`` / ``request.csv``, or their output folder. Host-only service
spans: requests (``httpReq`` … ``httpRes``), batching (``BatchSchedule`` /
``batchFrameworkProcessing``) and engine iterations (``modelExec``) with their batch.

Modules: :mod:`.detect` (which paths), :mod:`.trace_json` (typed decoder of the trace),
:mod:`.rows` (events -> rows), :mod:`.tables` (the CSVs and db tables), :mod:`.read`.
"""

from __future__ import annotations

from tracekit.parsers.base import Parser
from tracekit.parsers.mindie.detect import sniff
from tracekit.parsers.mindie.read import FORMAT, parse

MINDIE = Parser(
    "mindie",
    "MindIE msServiceProfiler (chrome_tracing.json, profiler.db, batch.csv, output folder)",
    sniff,
    parse,
)

__all__ = ["FORMAT", "MINDIE", "parse", "sniff"]
