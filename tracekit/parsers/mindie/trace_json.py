"""``chrome_tracing.json`` -> one frame of its events, decoded with a typed msgspec decoder.

msServiceProfiler writes (ms_service_profiler/exporters/exporter_trace.py): one ``X`` event
per span (``I`` when its duration is 0) with ``ts``/``dur`` in µs since the epoch (the
collection's ns divided by 1000: floats with fractions of a µs), ``pid`` the process, ``tid`` the
lane (``"{domain}({thread id})"``, or the domain alone for Request / KVCache lanes, or the
span name in early versions) and ``args`` the span's attributes; ``C`` counters (KV cache
blocks, queue sizes, CPU / NPU usage), ``s``/``t``/``f`` flows joining one request's spans,
and ``M`` sort metadata. Newer versions write a bare list, early ones ``{"traceEvents": […]}``;
msprof and torch profiler exports collected beside it may be merged into the same list.
"""

from __future__ import annotations

import msgspec
import polars as pl

from tracekit.parsers.convert import field_values, to_ns

_EMPTY = msgspec.Raw(b"{}")
SEPARATOR = b"\x00"  # cannot occur in JSON text outside a string escape


class Event(msgspec.Struct, gc=False):
    """The fields of a trace event that tracekit keeps."""

    name: str | None = None
    ph: str = ""
    ts: int | float | str | None = None
    dur: int | float | str | None = None
    pid: int | str | None = None
    tid: int | str | None = None
    args: msgspec.Raw = _EMPTY


class Wrapped(msgspec.Struct, gc=False):
    """The early form: an object holding the list."""

    traceEvents: list[Event] = []


_LIST = msgspec.json.Decoder(list[Event])
_WRAPPED = msgspec.json.Decoder(Wrapped)


def decode(data: bytes | memoryview) -> list[Event]:
    """The events of the file's bytes (a list, or an object with ``traceEvents``)."""
    start = bytes(data[:256]).lstrip()[:1]
    return _WRAPPED.decode(data).traceEvents if start == b"{" else _LIST.decode(data)


def _raw_texts(values: list[msgspec.Raw]) -> pl.Series:
    """The raw JSON texts of ``values`` as a string column, joined and split once in C."""
    if not values:
        return pl.Series([], dtype=pl.String)
    joined = SEPARATOR.join(values).decode("utf-8", "replace")
    return pl.Series([joined], dtype=pl.String).str.split("\x00").explode()


def _mixed(values: list[int | str | None]) -> tuple[pl.Series, pl.Series]:
    """An int-or-text column as (ints, texts): each null where the value is of the other kind."""
    texts = pl.Series([v if isinstance(v, str) else None for v in values], dtype=pl.String)
    ints = pl.Series([v if isinstance(v, int) else None for v in values], dtype=pl.Int64)
    return ints, texts


def events_frame(events: list[Event]) -> pl.DataFrame:
    """One row per event: ph, name, ts / dur (ns since the epoch), pid, pid_text, tid, lane
    (the tid when it is text) and args (raw JSON text)."""
    # the tool writes Python floats (json.dumps: the shortest text that reads back as the
    # same double), so the double, not its text, holds the µs it had: read as floats
    ts, ts_ok = to_ns(field_values("ts")(events))
    dur, dur_ok = to_ns(field_values("dur")(events))
    pid, pid_text = _mixed(field_values("pid")(events))
    tid, lane = _mixed(field_values("tid")(events))
    return pl.DataFrame(
        {
            "ph": pl.Series(field_values("ph")(events), dtype=pl.String),
            "name": pl.Series(field_values("name")(events), dtype=pl.String),
            "ts": pl.Series(ts, dtype=pl.Int64),
            "ts_ok": pl.Series(ts_ok, dtype=pl.Boolean),
            "dur": pl.Series(dur, dtype=pl.Int64),
            "dur_ok": pl.Series(dur_ok, dtype=pl.Boolean),
            "pid": pid,
            "pid_text": pid_text,
            "tid": tid,
            "lane": lane,
            "args": _raw_texts(field_values("args")(events)),
        }
    )
