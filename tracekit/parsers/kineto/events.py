"""Decoded Kineto events -> one events table (shared by the one- and many-process paths)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from tracekit.errors import TraceError
from tracekit.parsers.kineto.collect import EventColumns, render_warnings
from tracekit.parsers.kineto.decode import Text, decode, raw_timestamps
from tracekit.parsers.slices import Slice, slice_text, subdivide

# Events are decoded and their values collected this many bytes of JSON at a time: the
# decoded objects are still in cache when read, and the memory they free is reused by the
# next piece. The values become Arrow columns once per batch, each call's cost paid once.
PIECE_BYTES = 2 << 20
BATCH_BYTES = 8 << 20


@dataclass
class SliceResult:
    """The events table of a slice (or of the whole trace), with what reading it repaired,
    the unknown categories and the warnings."""

    table: pa.Table
    repairs: Counter[tuple[str, str]]
    unknown: Counter[str]
    warnings: list[str]


def read_events(
    events: list[Any], data: Text, rank: int, include_python: bool, rank_in_args: bool
) -> EventColumns:
    """The kept values of ``events``, collected; ``data`` (their JSON text) is not kept."""
    columns = EventColumns(rank, include_python, rank_in_args=rank_in_args)
    columns.add(events, lambda: raw_timestamps(data))
    return columns


def to_table(columns: EventColumns) -> pa.Table:
    """The timeline table of the events collected in ``columns`` (and not yet taken)."""
    batch = columns.take_batch()
    table = batch.table()
    columns.repairs.update(batch.repairs)
    return table


class TableBuilder:
    """Decodes pieces of JSON text one after another into one timeline table.

    Each piece's events are freed as soon as their values are collected: small pieces keep
    the decoded objects in cache and the memory they free is reused by the next piece. The
    values become Arrow columns once per :data:`BATCH_BYTES` of text, so that the
    pieces do not each pay the conversions' fixed cost.
    """

    def __init__(self, options: dict[str, Any]) -> None:
        self.columns = EventColumns(**options)
        self.tables: list[pa.Table] = []
        self.warnings: list[str] = []
        self._batched = 0  # bytes of text collected since the last table

    def add(self, text: Text) -> None:
        """Decode one JSON array of events; raises :class:`TraceError` when it is not valid
        JSON. ``text`` is not kept."""
        events = decode(Path("<slice>"), text, self.warnings).traceEvents or []
        self.columns.add(events, lambda: raw_timestamps(text))
        del events
        self._batched += len(text)
        if self._batched >= BATCH_BYTES:
            self.tables.append(to_table(self.columns))
            self._batched = 0

    def result(self) -> SliceResult:
        """The table of every piece added, with the repairs, unknown categories and warnings."""
        if self.columns.rows or not self.tables:
            self.tables.append(to_table(self.columns))
        warnings = list(dict.fromkeys(self.warnings))
        return SliceResult(
            _concat(self.tables), self.columns.repairs, self.columns.unknown, warnings
        )


def with_rank(rows: pa.Table, rank: int) -> pa.Table:
    """``rows`` with every row's rank set to ``rank``."""
    index = rows.schema.get_field_index("rank")
    column = pa.array(np.full(rows.num_rows, rank, dtype=np.int32))
    return rows.set_column(index, rows.schema.field(index), column)


def piece_table(data: bytes | bytearray, piece: Slice, **options: Any) -> SliceResult:
    """The timeline table of the events in ``piece`` of ``data``, decoded a few MB at a time
    (:data:`PIECE_BYTES`); raises :class:`TraceError` when they are not valid JSON."""
    parts = subdivide(data, piece, PIECE_BYTES)
    builder = TableBuilder(options)
    try:
        for part in parts:
            builder.add(slice_text(data, part))
    except TraceError:
        if len(parts) == 1:
            raise
        # A cut that looked like "}, {" inside a string: decode the piece in one go.
        builder = TableBuilder(options)
        builder.add(slice_text(data, piece))
    return builder.result()


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
    table = _concat([r.table for r in results])
    return SliceResult(table, repairs, unknown, warnings)


def _concat(tables: list[pa.Table]) -> pa.Table:
    """The tables with rows, one after another with one dictionary per column; the first
    table when none has rows."""
    full = [table for table in tables if table.num_rows]
    if len(full) > 1:
        return pa.concat_tables(full).unify_dictionaries()
    return full[0] if full else tables[0]


def warning_lines(result: SliceResult) -> list[str]:
    """The warnings of a merged result, repairs and unknown categories included."""
    return result.warnings + render_warnings(result.repairs, result.unknown)
