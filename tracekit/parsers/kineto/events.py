"""Decoded Kineto events -> one events table (shared by the one- and many-process paths)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa

from tracekit.parsers.assemble import assemble
from tracekit.parsers.kineto.decode import EXACT_FLOAT_US, decode, raw_timestamps
from tracekit.parsers.kineto.rows import EventColumns
from tracekit.parsers.names import NamePool


def exact_timestamps(events: list[Any], data: bytes) -> Callable[[], list[bytes | None]]:
    """What the readers call for the JSON text of every ``ts``.

    The text is only needed for floats too large to hold ns; it is taken now when some
    event has one, so that the caller can drop ``data`` right after.
    """
    if not any(type(t) is float and abs(t) >= EXACT_FLOAT_US for t in (e.ts for e in events)):
        return lambda: []
    texts = raw_timestamps(data)
    return lambda: texts


def build(events: list[Any], raw_ts: Callable[[], list[bytes | None]], rank: int,
          include_python: bool, rank_in_args: bool) -> tuple[pa.Table, EventColumns]:  # fmt: skip
    """The timeline table of ``events``; ``raw_ts`` gives their ``ts`` texts when needed."""
    columns = EventColumns(events, rank, include_python, raw_ts, rank_in_args=rank_in_args)
    pool = NamePool()
    return assemble(columns.parts(pool), pool), columns


def events_table(data: bytes, *, rank: int, include_python: bool,
                 rank_in_args: bool) -> tuple[pa.Table, EventColumns, list[str]]:  # fmt: skip
    """Decode a JSON array of events (one slice of a trace) into a timeline table."""
    warnings: list[str] = []
    events = decode(Path("<slice>"), data, warnings).traceEvents or []
    raw_ts = exact_timestamps(events, data)
    del data
    table, columns = build(events, raw_ts, rank, include_python, rank_in_args)
    return table, columns, warnings
