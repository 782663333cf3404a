"""Which paths are msServiceProfiler outputs: ``chrome_tracing.json`` (a bare event list, or
an object with ``traceEvents`` in early versions), ``profiler.db``, ``batch.csv`` /
``request.csv``, or the folder ``ms_service_profiler.parse`` wrote them to."""

from __future__ import annotations

from pathlib import Path

from tracekit.parsers.probe import Probe

SNIFF_BYTES = 1 << 16
# names and args only msServiceProfiler writes (ms_service_profiler/exporters/exporter_trace.py:
# span names from MindIE's and the vLLM/SGLang hooks' Profiler spans, args it adds per span)
_JSON_MARKERS = (b'"BatchSchedule"', b'"batchFrameworkProcessing"', b'"modelExec"',
                 b'"httpReq"', b'"ReqState"', b'"start_datetime"', b'"res_list"',
                 b'"batchType"', b'"Device Block"')  # fmt: skip
# profiler.db: the parse step's tables (exporters/exporter_*.py, write_result_to_db)
_DB_TABLES = frozenset({"batch", "request"})
_DB_COMPANIONS = frozenset({"batch_exec", "batch_req", "request_status", "first_token_latency",
                            "req_latency", "decode_gen_speed", "data_table"})  # fmt: skip
TRACE_FILE, DB_FILE, BATCH_FILE, REQUEST_FILE = (
    "chrome_tracing.json",
    "profiler.db",
    "batch.csv",
    "request.csv",
)
_BATCH_HEADER = (b"res_list", b"batch_type")
_REQUEST_HEADER = (b"http_rid", b"recv_token_size")


def _json_head(path: Path, head: bytes) -> bytes:
    if len(head) < 4096:
        return head
    with path.open("rb") as fh:
        return fh.read(SNIFF_BYTES)


def is_trace_json(path: Path, head: bytes) -> bool:
    """A Chrome-trace JSON whose first 64 KiB hold msServiceProfiler's span names or args."""
    first = head[:256].lstrip()[:1]
    if first not in (b"[", b"{"):
        return False
    text = _json_head(path, head)
    return any(marker in text for marker in _JSON_MARKERS)


def is_service_db(tables: frozenset[str]) -> bool:
    """A ``profiler.db``: its batch or request table beside one of the parse step's others."""
    return bool(tables & _DB_TABLES) and bool(tables & _DB_COMPANIONS)


def csv_kind(head: bytes) -> str | None:
    """``batch`` or ``request`` for the header line of ``batch.csv`` / ``request.csv``."""
    line = head.split(b"\n", 1)[0]
    if all(word in line for word in _BATCH_HEADER):
        return "batch"
    if all(word in line for word in _REQUEST_HEADER):
        return "request"
    return None


def folder_inputs(folder: Path) -> dict[str, Path]:
    """The outputs of one parse run in ``folder``: ``trace``, ``db``, ``batch``, ``request``."""
    found = {}
    for key, name in (("trace", TRACE_FILE), ("db", DB_FILE), ("batch", BATCH_FILE),
                      ("request", REQUEST_FILE)):  # fmt: skip
        path = folder / name
        if path.is_file() and path.stat().st_size:
            found[key] = path
    return found


def sniff(probe: Probe) -> bool:
    """An msServiceProfiler output file, or a folder holding one."""
    path = probe.path
    if path.is_dir():
        found = folder_inputs(path)
        if "trace" in found:
            return is_trace_json(found["trace"], Probe(found["trace"]).head)
        if "db" in found:
            return is_service_db(Probe(found["db"]).tables)
        return "batch" in found and csv_kind(Probe(found["batch"]).head) == "batch"
    if probe.is_sqlite:
        return is_service_db(probe.tables)
    if path.suffix.lower() == ".csv":
        return csv_kind(probe.head) is not None
    return is_trace_json(path, probe.head)
