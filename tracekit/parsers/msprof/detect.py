"""Which paths are Ascend profiler output: :func:`sniff` (an output folder, a timeline JSON, an
op_summary / kernel_details / task_time CSV) and :func:`sniff_db` (an msprof / torch_npu SQLite
export, or torch_npu's derived ``analysis.db``)."""

from __future__ import annotations

from pathlib import Path

from tracekit.parsers.io import GZIP_MAGIC
from tracekit.parsers.msprof import layout
from tracekit.parsers.msprof.csv_tables import csv_role, read_header
from tracekit.parsers.probe import Probe

DB_MARKERS = (
    "STRING_IDS",
    "CANN_API",
    "COMMUNICATION_OP",
    "PYTORCH_API",
    "NPU_INFO",
    "TASK",
    "COMPUTE_TASK_INFO",
    "SESSION_TIME_INFO",
)
ANALYSIS_TABLES = (
    "StepTraceTime",
    "CommAnalyzerTime",
    "CommAnalyzerBandwidth",
    "CommAnalyzerMatrix",
)


def _dir_is_ascend(path: Path, depth: int = 4) -> bool:
    name = path.name
    if name in (layout.OUTPUT, layout.MS_OUTPUT) or name.startswith("PROF_"):
        return True
    if name.endswith(("_ascend_pt", "_ascend_ms")) or (path / layout.OUTPUT).is_dir():
        return True
    try:
        children = sorted(path.iterdir())
    except OSError:
        return False
    for child in children:
        if child.is_file():
            if layout.TIMELINE_JSON.match(child.name) and layout.json_is_ascend(child, 1 << 16):
                return True
            if child.suffix == ".csv" and csv_role(read_header(child)) in ("op", "task_time"):
                return True
    if layout.ms1x(path):
        return True
    return depth > 0 and any(_dir_is_ascend(c, depth - 1) for c in children if c.is_dir())


def sniff(probe: Probe) -> bool:
    """An Ascend output folder, timeline JSON or op_summary / kernel_details / task_time CSV."""
    path = probe.path
    if path.is_dir():
        return _dir_is_ascend(path)
    if probe.is_sqlite:
        return False
    if path.name.lower().endswith(".csv"):
        return csv_role(read_header(path)) in ("op", "task_time")
    head = probe.head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if head[:1] not in (b"[", b"{") and not probe.head.startswith(GZIP_MAGIC):
        return False
    if b'"schemaVersion"' in probe.text_head[: 1 << 16]:  # a PyTorch-profiler (Kineto) trace
        return False
    return layout.json_is_ascend(path)


def sniff_db(probe: Probe) -> bool:
    """An msprof / torch_npu SQLite export (``STRING_IDS`` with Ascend tables), or the
    derived ``analysis.db`` of torch_npu (claimed to say what it is)."""
    tables = probe.tables
    if "STRING_IDS" in tables and any(t in tables for t in DB_MARKERS[1:]):
        return True
    return (
        bool(tables)
        and all(t in tables or t.startswith(("sqlite_", "status_info")) for t in tables)
        and any(t in tables for t in ANALYSIS_TABLES)
    )


def sniff_db_trace(path: Path) -> bool:
    """True for an Ascend db with event tables (not only msprof-analyze statistics)."""
    tables = Probe(path).tables
    return "STRING_IDS" in tables
