"""Decoded Kineto events -> one events table (shared by the one- and many-process paths)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa

from tracekit.errors import TraceError
from tracekit.parsers.assemble import assemble
from tracekit.parsers.kineto import chunks
from tracekit.parsers.kineto.chunks import Slice, SliceResult
from tracekit.parsers.kineto.decode import decode, raw_timestamps
from tracekit.parsers.kineto.rows import EventColumns, render_warnings
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


def one_table(text: bytes | bytearray, options: dict[str, Any]) -> SliceResult:
    """The timeline table of a JSON array of events, decoded in one go."""
    warnings: list[str] = []
    events = decode(Path("<slice>"), text, warnings).traceEvents or []
    columns = read_events(events, text, **options)
    del events
    return SliceResult(to_table(columns), columns.repairs, columns.unknown, warnings)


def piece_table(data: bytes | bytearray, piece: Slice, **options: Any) -> SliceResult:
    """The timeline table of the events in ``piece`` of ``data``, decoded a few MB at a time
    (:data:`chunks.PIECE_BYTES`); raises :class:`TraceError` when they are not valid JSON."""
    parts = chunks.subdivide(data, piece, chunks.PIECE_BYTES)
    try:
        results = [one_table(chunks.slice_text(data, part), options) for part in parts]
    except TraceError:
        if len(parts) == 1:
            raise
        # A cut that looked like "}, {" inside a string: decode the piece in one go.
        results = [one_table(chunks.slice_text(data, piece), options)]
    return merge(results)


def merge(results: list[SliceResult]) -> SliceResult:
    """One result of several slices' results: tables concatenated, repairs and unknown
    categories summed, warnings once each."""
    if len(results) == 1:
        return results[0]
    repairs: Counter[tuple[str, str]] = Counter()
    unknown: Counter[str] = Counter()
    warnings: list[str] = []
    for result in results:
        repairs.update(result.repairs)
        unknown.update(result.unknown)
        warnings.extend(w for w in result.warnings if w not in warnings)
    tables = [r.table for r in results if r.table.num_rows]
    table = pa.concat_tables(tables).unify_dictionaries() if tables else results[0].table
    return SliceResult(table, repairs, unknown, warnings)


def warning_lines(result: SliceResult) -> list[str]:
    """The warnings of a merged result, repairs and unknown categories included."""
    return result.warnings + render_warnings(result.repairs, result.unknown)
