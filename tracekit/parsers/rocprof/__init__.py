"""The AMD rocprof family: every output shape of ROCm's profilers, one sub-package per producer.

- :mod:`.v3`: rocprofv3 (rocprofiler-sdk) CSV sets and ``*_results.json``.
- :mod:`.rocpd`: rocprofiler-sdk rocpd SQLite databases (schema 3).
- :mod:`.legacy`: rocprof v1/v2 ``results.db`` / ``results.json`` / ``results.csv`` and their
  folders.
- :mod:`.rpd`: rocmProfileData ``.rpd`` SQLite (plain or gzipped) and its ``rpd2tracing.py``
  Chrome-trace JSON.

Shared by them: :mod:`.table` (rows -> the events table, ts 0 = the first event), :mod:`.meta`
(metadata skeleton, device entries), :mod:`.args` (args JSON built column-wise), :mod:`.sdk`
(what rocprofiler-sdk outputs share), :mod:`.sqlite_tables` (which AMD SQLite a file is),
:mod:`.csv_header` and :mod:`.stats` (the profilers' own ``*stats.csv`` as vendor summaries).
"""

from __future__ import annotations

from tracekit.parsers.rocprof.legacy import PARSERS as LEGACY_PARSERS
from tracekit.parsers.rocprof.rocpd import ROCPD
from tracekit.parsers.rocprof.rpd import RPD, RPD_JSON
from tracekit.parsers.rocprof.v3 import ROCPROFV3_CSV, ROCPROFV3_JSON

__all__ = ["LEGACY_PARSERS", "ROCPD", "ROCPROFV3_CSV", "ROCPROFV3_JSON", "RPD", "RPD_JSON"]
