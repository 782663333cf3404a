"""Decoded Kineto events -> one events table (shared by the one- and many-process paths)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa

from tracekit.parsers.assemble import assemble
from tracekit.parsers.kineto.decode import decode, raw_timestamps
from tracekit.parsers.kineto.rows import EventColumns
from tracekit.parsers.names import NamePool


def read_events(events: list[Any], data: bytes | bytearray, rank: int, include_python: bool,
                rank_in_args: bool) -> EventColumns:  # fmt: skip
    """Column readers for ``events``; ``data`` (their JSON text) is not kept afterwards."""
    return EventColumns(
        events, rank, include_python, lambda: raw_timestamps(data), rank_in_args=rank_in_args
    )


def to_table(columns: EventColumns) -> pa.Table:
    """The timeline table of the events behind ``columns``."""
    pool = NamePool()
    return assemble(columns.parts(pool), pool)


def events_table(data: bytes | bytearray, *, rank: int, include_python: bool,
                 rank_in_args: bool) -> tuple[pa.Table, EventColumns, list[str]]:  # fmt: skip
    """Decode a JSON array of events (one slice of a trace) into a timeline table."""
    warnings: list[str] = []
    events = decode(Path("<slice>"), data, warnings).traceEvents or []
    columns = read_events(events, data, rank, include_python, rank_in_args)
    del data, events
    return to_table(columns), columns, warnings
