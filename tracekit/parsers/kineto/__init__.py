"""PyTorch profiler (Kineto) Chrome traces from CUDA (CUPTI) and ROCm (roctracer,
rocprofiler-sdk): ``.json``, ``.json.gz``, ``*.pt.trace.json(.gz)``, an object with
``traceEvents`` or a bare event list, or a folder of per-rank files read as one timeline.

Modules: :mod:`.detect` (which paths are Kineto traces), :mod:`.read` (a file or a folder ->
Timeline), :mod:`.stream` (decoded while it is read), :mod:`.decode` (typed msgspec decoder;
:mod:`.escapes` repairs text it rejects), :mod:`.collect` (decoded events -> kept values, by
category), :mod:`.batch` (kept values -> Arrow columns and the events table),
:mod:`.events` (pieces and slices -> one table), :mod:`.worker` (a worker process's entry).
"""

from __future__ import annotations

from tracekit.parsers.base import Parser
from tracekit.parsers.kineto.detect import is_rank_folder, sniff
from tracekit.parsers.kineto.read import parse

KINETO = Parser(
    "kineto", "PyTorch profiler / Kineto trace (.json, .json.gz, folder of ranks)", sniff, parse
)

__all__ = ["KINETO", "is_rank_folder", "parse", "sniff"]
