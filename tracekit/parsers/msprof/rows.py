"""The common row frame every Ascend reader produces, and compact ``args`` JSON built by polars.

Readers return polars frames with the columns of :data:`ROW_SCHEMA` (times still absolute
ns); :func:`to_table` concatenates them and hands them to the timeline schema.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from tracekit.parsers.convert import column_or_null
from tracekit.timeline import WORK_KINDS, build_table

ROW_SCHEMA: dict[str, pl.DataType] = {
    "ts": pl.Int64(),
    "dur": pl.Int64(),
    "kind": pl.String(),
    "name": pl.String(),
    "device": pl.Int32(),
    "stream": pl.Int64(),
    "rank": pl.Int32(),
    "pid": pl.Int64(),
    "tid": pl.Int64(),
    "corr": pl.Int64(),
    "engine": pl.String(),
    "args": pl.String(),
}
NO_ID = 4294967295  # "no model / stream / rank" in every Ascend export (uint32 max)

# one args field: (key, expression, "int" | "float" | "text" | "raw")
Field = tuple[str, pl.Expr, str]


def _json_strings(distinct: pl.Series, rows: int) -> pl.Series:
    """Distinct strings of a column of ``rows`` rows as JSON string literals: by ``json.dumps``,
    or by polars' encoder when they are many (over 10 000 and over a quarter of the rows)."""
    if len(distinct) > max(10_000, rows // 4):
        frame = pl.DataFrame({"v": distinct})
        encoded = pl.struct(pl.col("v")).struct.json_encode()
        return frame.select(encoded.str.slice(5, encoded.str.len_chars() - 6)).to_series()
    texts = [json.dumps(v, ensure_ascii=False) for v in distinct.to_list()]
    return pl.Series(texts, dtype=pl.String)


def args_json(frame: pl.DataFrame, fields: Sequence[Field]) -> pl.Series:
    """One compact JSON object per row of ``frame`` from ``fields`` (evaluated on it); null
    values are left out and a row with no value at all gets a null ``args``.

    Each field is encoded once per distinct value; runs of few-valued fields are joined once
    per distinct combination (:class:`_Joined`)."""
    if not fields or not frame.height:
        return pl.Series("args", [None] * frame.height, pl.String)
    names = [f"_{i}" for i in range(len(fields))]
    values = frame.with_columns(
        [expr.alias(name) for name, (_, expr, _) in zip(names, fields)]
    ).select(names)
    joined = _Joined(frame.height)
    for i, (key, _, kind) in enumerate(fields):
        column = values[f"_{i}"]
        if column.null_count() == len(column):
            continue
        if kind == "float":
            number = column.cast(pl.Float64)
            column = number.cast(pl.String).zip_with(
                number.is_finite().fill_null(False), pl.Series([None], dtype=pl.String)
            )
            kind = "int"  # already text: written unquoted
        elif kind == "text":
            column = column.cast(pl.String)
        joined.add(_pieces(key, column, kind))
    groups = joined.groups
    if not groups:
        return pl.Series("args", [None] * frame.height, pl.String)
    if len(groups) == 1:  # one text per distinct combination: wrapped before it is gathered
        codes, texts = groups[0]
        return _wrap(pl.Series("_0", texts), pl.all()).gather(codes)
    columns = [pl.Series(f"_{k}", texts).gather(codes) for k, (codes, texts) in enumerate(groups)]
    return _wrap(pl.DataFrame(columns), pl.concat_str(pl.all()))


def _wrap(pieces: pl.DataFrame | pl.Series, body: pl.Expr) -> pl.Series:
    """``{...}`` around the joined pieces (each starting with a comma); null when none."""
    text = pl.concat_str(pl.lit("{"), body.str.slice(1), pl.lit("}"))
    frame = pieces.to_frame() if isinstance(pieces, pl.Series) else pieces
    return frame.select(pl.when(body != "").then(text).alias("args")).to_series()


_NONE = pa.scalar("", pa.large_string())


def _pieces(key: str, column: pl.Series, kind: str) -> tuple[np.ndarray, pa.Array]:
    """A column as (code per row, ``,"key":value`` per code): its distinct values encoded, and
    "" last (the code of null)."""
    encoded = pc.dictionary_encode(column.to_arrow())
    distinct = pl.Series(encoded.dictionary)
    distinct = _json_strings(distinct, len(column)) if kind == "text" else distinct.cast(pl.String)
    prefix = pa.scalar(f",{json.dumps(key)}:", pa.large_string())
    texts = pc.binary_join_element_wise(prefix, distinct.to_arrow().cast(pa.large_string()), _NONE)
    codes = encoded.indices.fill_null(len(texts)).to_numpy(zero_copy_only=False)
    texts = pa.concat_arrays([texts.fill_null(_NONE), pa.array([""], pa.large_string())])
    return codes.astype(np.int64), texts


class _Joined:
    """The pieces of every row, in order, as (code per row, texts) groups to gather and
    concatenate. Runs of few-valued pieces are joined as they come, once per distinct
    combination of their values (polars shares the bytes of gathered texts, so the row text
    is written once), so that one code per row and group is held, not one per piece."""

    def __init__(self, rows: int) -> None:
        self.rows = rows
        self.few = max(rows // 16, 1)
        self.groups: list[tuple[np.ndarray, pa.Array]] = []
        self.open = False  # the last group takes further few-valued pieces

    def add(self, piece: tuple[np.ndarray, pa.Array]) -> None:
        """Append one piece (see :func:`_pieces`)."""
        few = len(piece[1]) <= self.few
        if few and self.open and len(self.groups[-1][1]) * len(piece[1]) < 2**62:
            self.groups[-1] = _combine([self.groups[-1], piece], self.rows)
        else:
            self.groups.append(piece)
            self.open = few


def _combine(group: list[tuple[np.ndarray, pa.Array]], n: int) -> tuple[np.ndarray, pa.Array]:
    """(code per row, text per distinct combination) of a run of few-valued pieces."""
    combos, inverse = combinations([(codes, len(texts)) for codes, texts in group], n)
    parts = []
    for _, texts in reversed(group):
        parts.append(texts.take(pa.array(combos % len(texts))))
        combos = combos // len(texts)
    return inverse, pc.binary_join_element_wise(*reversed(parts), _NONE)


def combinations(columns: list[tuple[np.ndarray, int]], n: int) -> tuple[np.ndarray, np.ndarray]:
    """(key of each distinct combination, per row the index of its combination) of ``n`` rows
    of code columns, each given as (codes, how many codes)."""
    width = int(np.prod([count for _, count in columns], dtype=object))
    key = np.zeros(n, dtype=np.int64)
    for codes, count in columns:
        key = key * count + codes
    if width <= 4 * n:  # a table of every possible combination: no sort
        seen = np.zeros(width, dtype=bool)
        seen[key] = True
        return np.nonzero(seen)[0], (np.cumsum(seen) - 1)[key]
    combos, inverse = np.unique(key, return_inverse=True)
    return combos, inverse.reshape(-1)


def per_distinct_row(
    frame: pl.DataFrame, fn: Callable[[pl.DataFrame], pl.DataFrame]
) -> pl.DataFrame:
    """``fn`` (rows -> as many rows) evaluated once per distinct row of ``frame`` and gathered
    back to every row: for lookups on a few repeated keys."""
    columns = []
    for name in frame.columns:
        encoded = pc.dictionary_encode(frame[name].to_arrow())
        if isinstance(encoded, pa.ChunkedArray):
            encoded = encoded.combine_chunks()
        count = len(encoded.dictionary) + 1  # the last code: null
        codes = encoded.indices.fill_null(count - 1).to_numpy(zero_copy_only=False)
        columns.append((codes.astype(np.int64), count))
    combos, inverse = combinations(columns, frame.height)
    first = np.zeros(len(combos), dtype=np.int64)
    first[inverse] = np.arange(frame.height)  # any row of each combination: they are equal
    return fn(frame[first]).select(pl.all().gather(inverse))


HALVES_FROM = 200_000  # rows


def in_halves(fn: Callable[..., pl.DataFrame], frame: pl.DataFrame, *args: Any) -> pl.DataFrame:
    """``fn(frame, *args)`` for a row-wise ``fn``: on each half of a large frame in two threads
    (polars and Arrow release the GIL), the halves put back together."""
    if frame.height < HALVES_FROM:
        return fn(frame, *args)
    half = frame.height // 2
    with ThreadPoolExecutor(max_workers=2) as pool:
        first = pool.submit(fn, frame.slice(0, half), *args)
        second = pool.submit(fn, frame.slice(half), *args)
        return pl.concat([first.result(), second.result()], how="vertical")


def with_args(frame: pl.DataFrame, out: pl.DataFrame, fields: Sequence[Field]) -> pl.DataFrame:
    """``out`` (rows of ``frame``, same order) with the ``args`` of ``fields`` on ``frame``."""
    return out.with_columns(args_json(frame, fields))


def not_sentinel(expr: pl.Expr) -> pl.Expr:
    """Null where an id is missing or 4294967295 (uint32 "none")."""
    return pl.when(expr != NO_ID).then(expr)


def conform(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` with exactly the columns of :data:`ROW_SCHEMA`, in order and type."""
    return frame.select(column_or_null(frame, c, t, cast=True) for c, t in ROW_SCHEMA.items())


DICTIONARY = ("kind", "name", "engine")


def to_table(frames: list[pl.DataFrame], origin: int) -> pa.Table:
    """The rows of ``frames`` with ts relative to ``origin``, in the timeline schema.

    ``frames`` is emptied: each column's rows are let go as soon as they are converted, so
    the rows are not held twice (the frames and the table) while the table is built."""
    parts = [conform(f) for f in frames if f.height]
    frames.clear()
    frame = pl.concat(parts, how="vertical") if parts else pl.DataFrame(schema=ROW_SCHEMA)
    del parts
    height = frame.height
    # column by column, each in one chunk: a frame-wide step would first re-cut every column
    # into the chunks of another (1.2 GiB more at 10M rows; so does ``drop``), and one chunk
    # here spares the timeline a copy after reading (polars joins text chunks without
    # copying the text)
    source = {name: frame.get_column(name) for name in ROW_SCHEMA}
    del frame
    order = _work_first(source["kind"])
    columns = {}
    for name in ROW_SCHEMA:
        column = source.pop(name)
        if name == "ts":
            column = column - origin
        elif name in DICTIONARY:  # as categories: Arrow gets them encoded, not 10M strings
            column = column.cast(pl.Categorical)
        if order is None:
            column = column.rechunk()
        else:  # polars gathers a view column of several chunks by writing its texts out
            column = column.rechunk() if column.n_chunks() > 1 and name == "args" else column
            column = column.gather(order)
        # args as polars holds it, a string view: rows of one text share its bytes
        newest = pl.CompatLevel.newest() if name == "args" else None
        columns[name] = column.to_arrow(compat_level=newest)
        del column
    return build_table(columns, height)


def _work_first(kinds: pl.Series) -> pl.Series | None:
    """Row order putting the device work rows (:data:`WORK_KINDS`) before the others, each in
    their order; None when they are one run already. The analysis then takes them as a slice
    of the timeline instead of a copy (the sync tasks among the kernels split them)."""
    work = kinds.is_in(WORK_KINDS).fill_null(False)
    where = work.arg_true()
    if not where.len() or int(where[-1]) - int(where[0]) + 1 == where.len():
        return None
    return pl.concat([where, (~work).arg_true()])


@dataclass
class Loaded:
    """What one source (rank) gave: row frames and its part of the metadata."""

    frames: list[pl.DataFrame] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)
    rank: int | None = None
    device: int | None = None
    devices: dict[int, dict[str, Any]] = field(default_factory=dict)
    chips: dict[int, str] = field(default_factory=dict)
    monotonic: bool = False
