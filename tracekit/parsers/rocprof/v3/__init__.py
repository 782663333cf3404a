"""rocprofv3 (rocprofiler-sdk) CSV and JSON output.

- CSV (:mod:`.csv_trace`): a folder or any one ``*_kernel_trace.csv`` /
  ``*_hip_api_trace.csv`` …; siblings are found by their shared file-name prefix (see
  :mod:`.files` for the folder rule); agents from ``*_agent_info.csv`` (:mod:`.agents`).
- JSON (:mod:`.json_trace`): ``*_results.json`` (or ``.json.gz``), buffer records
  (:mod:`.json_records`) resolved through ``strings``, ``kernel_symbols`` and ``agents``.

rocprofiler-sdk timestamps are CLOCK_BOOTTIME ns: ts is relative to the earliest row,
``meta["clock"]`` is ``{"domain": "CLOCK_BOOTTIME", "zero_ns": <boot-clock ns at ts 0>}`` and
``origin_ns`` stays None (no epoch is given). Both readers reach the events table through
:func:`tracekit.parsers.rocprof.table.events_table` (``assemble``, then ts 0 at the first event).
"""

from __future__ import annotations

from tracekit.parsers.base import Parser
from tracekit.parsers.rocprof.v3 import csv_trace, json_trace

ROCPROFV3_CSV = Parser(
    "rocprofv3-csv",
    "AMD rocprofv3 CSV set (folder or *_kernel_trace.csv and its siblings)",
    csv_trace.sniff,
    csv_trace.parse,
)
ROCPROFV3_JSON = Parser(
    "rocprofv3-json",
    "AMD rocprofv3 JSON output (*_results.json, .json.gz)",
    json_trace.sniff,
    json_trace.parse,
)
