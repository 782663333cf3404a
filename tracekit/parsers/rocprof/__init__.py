"""The AMD rocprof family: every output shape of ROCm's profilers, one parser each.

- rocprofv3 CSV (:mod:`.v3_csv`): a folder or any one ``*_kernel_trace.csv`` /
  ``*_hip_api_trace.csv`` …; siblings are found by their shared file-name prefix (see
  :mod:`.files` for the folder rule).
- rocprofv3 JSON (:mod:`.v3_json`): ``*_results.json`` (or ``.json.gz``), buffer records
  resolved through ``strings``, ``kernel_symbols`` and ``agents``.
- rocpd SQLite, schema 3 (:mod:`.rocpd`, :mod:`.rocpd_tables`, :mod:`.rocpd_info`).
- legacy rocprof v1/v2 (:mod:`.legacy` and ``legacy_*``): ``results.db``, ``results.json``,
  ``results.csv`` and their folders; their ``*stats.csv`` files as vendor summaries
  (:mod:`.stats`, also for rocprofv3 ``--stats``).
- rocmProfileData ``.rpd`` SQLite, schema v1-v3, plain or gzipped (:mod:`.rpd`,
  :mod:`.rpd_read`, :mod:`.rpd_rows`), and its ``rpd2tracing.py`` Chrome-trace JSON
  (:mod:`.rpd_json`).

Shared helpers: :mod:`.common` (durations, time origin, metadata, API row kinds) and
:mod:`.args` (args JSON built column-wise). rocprofiler-sdk timestamps are CLOCK_BOOTTIME
ns: ts is relative to the earliest row, ``meta["clock"]`` is ``{"domain": "CLOCK_BOOTTIME",
"zero_ns": <boot-clock ns at ts 0>}`` and ``origin_ns`` stays None (no epoch is given).
"""

from __future__ import annotations

from tracekit.load import Probe
from tracekit.parsers import Parser
from tracekit.parsers.rocprof import v3_csv, v3_json
from tracekit.parsers.rocprof.files import sniff_csv_path
from tracekit.parsers.rocprof.legacy import PARSERS as LEGACY_PARSERS
from tracekit.parsers.rocprof.rocpd import ROCPD
from tracekit.parsers.rocprof.rpd import RPD
from tracekit.parsers.rocprof.rpd_json import RPD_JSON

JSON_KEY = b'"rocprofiler-sdk-tool"'
__all__ = ["LEGACY_PARSERS", "ROCPD", "ROCPROFV3_CSV", "ROCPROFV3_JSON", "RPD", "RPD_JSON"]


def sniff_csv(probe: Probe) -> bool:
    """A rocprofv3 CSV file (by its header), or a folder holding one."""
    return sniff_csv_path(probe.path, probe.head)


def sniff_json(probe: Probe) -> bool:
    """A JSON object whose first key is ``rocprofiler-sdk-tool`` (plain or gzip)."""
    if not probe.path.is_file():
        return False
    text = probe.text_head[: 1 << 14].lstrip(b"\xef\xbb\xbf \t\r\n")
    return text.startswith(b"{") and text[1:].lstrip().startswith(JSON_KEY)


ROCPROFV3_CSV = Parser(
    "rocprofv3-csv",
    "AMD rocprofv3 CSV set (folder or *_kernel_trace.csv and its siblings)",
    sniff_csv,
    v3_csv.parse,
)
ROCPROFV3_JSON = Parser(
    "rocprofv3-json",
    "AMD rocprofv3 JSON output (*_results.json, .json.gz)",
    sniff_json,
    v3_json.parse,
)
