"""Decoded Kineto events -> one events table (shared by the one- and many-process paths)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa

from tracekit.parsers.assemble import assemble
from tracekit.parsers.kineto.decode import decode, raw_timestamps
from tracekit.parsers.kineto.rows import EventColumns
from tracekit.parsers.names import NamePool


def build(events: list[Any], data: bytes, rank: int, include_python: bool,
          rank_in_args: bool) -> tuple[pa.Table, EventColumns]:  # fmt: skip
    """The timeline table of ``events``; ``data`` is their JSON text (for exact timestamps)."""
    columns = EventColumns(
        events, rank, include_python, lambda: raw_timestamps(data), rank_in_args=rank_in_args
    )
    pool = NamePool()
    return assemble(columns.parts(pool), pool), columns


def events_table(data: bytes, *, rank: int, include_python: bool,
                 rank_in_args: bool) -> tuple[pa.Table, EventColumns, list[str]]:  # fmt: skip
    """Decode a JSON array of events (one slice of a trace) into a timeline table."""
    warnings: list[str] = []
    trace = decode(Path("<slice>"), data, warnings)
    table, columns = build(trace.traceEvents or [], data, rank, include_python, rank_in_args)
    return table, columns, warnings
