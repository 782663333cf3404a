"""rocmProfileData's ``rpd2tracing.py`` output: a Chrome trace written by hand from an ``.rpd``.

Its quirks, as ``tools/rpd2tracing.py`` writes them: ``{"traceEvents": [ {}`` (since Jul 2024;
a bare ``[ {}`` array before), the first event an empty ``{}``, one event per line; ``pid``,
``tid``, ``ts``, ``dur`` and ``id`` are JSON *strings*, ``ts``/``dur`` in µs (fractional since
Nov 2024, e.g. ``"8306017670485.923"``; whole µs before, the ns digits lost); no ``cat``
except on the ``api_op`` flows; GPU ops on pid = gpuId, tid = queueId, the op type in
``args.desc``; roctx ranges are X events (``i`` for marks) named by their message, with the
same text as ``desc``; names are not JSON-escaped, so a line that does not decode is skipped
(counted in a warning). Counter events (``C``: idle, queue depth, SMI clocks) are not rows.

Rows (:mod:`.json_rows`) match what :mod:`.database` reads from the ``.rpd`` itself, except
that the call -> op link comes from the ``api_op`` flows (``corr`` = the smallest flow id of
the call) and the launch arguments are not in the file. ts 0 = the first event on the
tracer's ``CLOCK_MONOTONIC`` (µs text converted to ns without floats).
"""

from __future__ import annotations

import re
from operator import attrgetter
from pathlib import Path

import msgspec
import polars as pl

from tracekit.errors import TraceError
from tracekit.parsers.base import Progress
from tracekit.parsers.io import read_bytes
from tracekit.parsers.name_pool import NamePool
from tracekit.parsers.probe import Probe
from tracekit.parsers.rocprof.meta import device, skeleton
from tracekit.parsers.rocprof.rpd.json_rows import build_parts
from tracekit.parsers.rocprof.rpd.rows import CLOCK
from tracekit.parsers.rocprof.table import events_table
from tracekit.timeline import Timeline

PRODUCER = "rocmProfileData rpd2tracing.py"
_START = re.compile(rb'^\s*(?:\{\s*"traceEvents"\s*:\s*)?\[\s*\{\s*\}\s*,')
_MARKS = (
    re.compile(rb'"args"\s*:\s*\{\s*"desc"\s*:'),
    re.compile(rb'"ph"\s*:\s*"M"\s*,\s*"pid"\s*:\s*"\d+"'),
    re.compile(rb'"cat"\s*:\s*"api_op"'),
)
# event field -> column (``label`` is a metadata event's ``args.name``: process names)
_CLOSED = re.compile(rb"\]\s*(?:\}\s*)?$")  # the end of a complete file: ``]`` or ``] }``
_FIELDS = {
    "ph": "ph",
    "pid": "pid",
    "tid": "tid",
    "name": "name",
    "ts": "ts",
    "dur": "dur",
    "id": "id",
    "args.desc": "desc",
    "args.name": "label",
    "args.kernels": "kernels",
}


class _Args(msgspec.Struct, gc=False):
    desc: str | None = None
    name: str | None = None
    kernels: str | int | None = None


class _Event(msgspec.Struct, gc=False):
    ph: str | None = None
    pid: str | int | None = None
    tid: str | int | None = None
    name: str | None = None
    ts: str | int | float | None = None
    dur: str | int | float | None = None
    id: str | int | None = None
    args: _Args = msgspec.field(default_factory=_Args)


class _Trace(msgspec.Struct, gc=False):
    traceEvents: list[_Event] | None = None


_DECODE = msgspec.json.Decoder(_Trace | list[_Event]).decode
_DECODE_EVENT = msgspec.json.Decoder(_Event).decode


def sniff(probe: Probe) -> bool:
    """``[ {}`` (optionally inside ``{"traceEvents": …}``) and rpd2tracing's string pids."""
    if not probe.path.is_file():
        return False
    text = probe.text_head[: 1 << 16]
    return bool(_START.match(text)) and any(m.search(text) for m in _MARKS)


def decode(path: Path, data: bytes, warnings: list[str]) -> list[_Event]:
    """The file's events; a complete file that is not valid JSON (names are written
    unescaped) is read line by line, skipping the lines that do not decode; a file cut short
    is refused."""
    try:
        trace = _DECODE(data)
        return trace if isinstance(trace, list) else (trace.traceEvents or [])
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        if not _CLOSED.search(data[-64:]):
            raise TraceError(
                f"{path}: JSON ends before its closing ']' ({exc}); the file is truncated,"
                " copy or convert it again"
            ) from exc
    events, bad = [], 0
    for line in data.splitlines():
        text = line.strip().lstrip(b",").strip()
        if not text.startswith(b"{") or text == b"{}" or b'"traceEvents"' in text[:32]:
            continue  # brackets, the empty first event, the wrapper's opening line
        try:
            events.append(_DECODE_EVENT(text))
        except (msgspec.DecodeError, msgspec.ValidationError):
            bad += 1
    if not events:
        raise TraceError(
            f"{path}: not valid JSON and no event line decodes; the file is truncated or is"
            " not rpd2tracing output"
        )
    if bad:
        warnings.append(f"{bad} lines that are not valid JSON (unescaped names?) skipped")
    return events


def columns(events: list[_Event]) -> pl.DataFrame:
    """The kept fields of every event as text columns (C loops, no Python per event)."""
    return pl.DataFrame(
        {
            column: pl.Series(list(map(attrgetter(field), events)), dtype=pl.String, strict=False)
            for field, column in _FIELDS.items()
        }
    )


def parse(path: Path, progress: Progress | None = None) -> Timeline:
    """Read an ``rpd2tracing.py`` JSON file (plain or gzip) into a :class:`Timeline`."""
    note = progress or (lambda _msg: None)
    note("decoding JSON")
    warnings: list[str] = []
    decoded = decode(path, read_bytes(path), warnings)
    frame = columns(decoded)
    del decoded
    note("rpd2tracing rows")
    pool = NamePool()
    parts, info = build_parts(frame, pool, warnings)
    if not any(len(p) for p in parts):
        raise TraceError(f"{path}: rpd2tracing JSON holds no GPU ops, API calls or ranges")
    meta = skeleton("rpd2tracing-json", path.name, PRODUCER, time_unit=info["time_unit"])
    meta["warnings"] = warnings
    table = events_table(parts, pool, meta, CLOCK)
    meta["devices"] = [device(g) for g in info["gpus"]]
    return Timeline(table, meta)
