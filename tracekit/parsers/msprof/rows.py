"""The common row frame every Ascend reader produces, and compact ``args`` JSON built by polars.

Readers return polars frames with the columns of :data:`ROW_SCHEMA` (times still absolute
ns); :func:`to_table` concatenates them and hands them to the timeline schema.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import polars as pl
import pyarrow as pa

from tracekit.timeline import build_table

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


def _json_strings(values: pl.Series) -> pl.Series:
    """Each string as a JSON string literal (null stays null). Distinct values are encoded
    once by ``json.dumps`` and gathered; mostly distinct columns go through polars' encoder."""
    values = values.cast(pl.String)
    distinct = values.drop_nulls().unique()
    if len(distinct) > max(10_000, len(values) // 4):
        frame = pl.DataFrame({"v": values})
        encoded = pl.struct(pl.col("v")).struct.json_encode()
        return frame.select(encoded.str.slice(5, encoded.str.len_chars() - 6)).to_series()
    mapping = {value: json.dumps(value, ensure_ascii=False) for value in distinct.to_list()}
    return values.replace_strict(mapping, default=None, return_dtype=pl.String)


def args_json(frame: pl.DataFrame, fields: Sequence[Field]) -> pl.Series:
    """One compact JSON object per row of ``frame`` from ``fields`` (evaluated on it); null
    values are left out and a row with no value at all gets a null ``args``."""
    if not fields or not frame.height:
        return pl.Series("args", [None] * frame.height, pl.String)
    names = [f"_{i}" for i in range(len(fields))]
    values = frame.with_columns(
        [expr.alias(name) for name, (_, expr, _) in zip(names, fields)]
    ).select(names)
    texts: dict[str, pl.Series] = {}
    for i, (key, _, kind) in enumerate(fields):
        column = values[f"_{i}"]
        if column.null_count() == len(column):
            continue
        if kind == "text":
            column = _json_strings(column)
        elif kind == "float":
            number = column.cast(pl.Float64)
            column = number.cast(pl.String).zip_with(
                number.is_finite().fill_null(False), pl.Series([None], dtype=pl.String)
            )
        else:
            column = column.cast(pl.String)
        texts[key] = column
    if not texts:
        return pl.Series("args", [None] * frame.height, pl.String)
    pieces = [
        pl.when(pl.col(f"_{i}").is_not_null()).then(
            pl.concat_str(pl.lit(f"{json.dumps(key)}:"), pl.col(f"_{i}"))
        )
        for i, key in enumerate(texts)
    ]
    table = pl.DataFrame({f"_{i}": column for i, column in enumerate(texts.values())})
    body = pl.concat_str(pieces, separator=",", ignore_nulls=True)
    return table.select(
        pl.when(body != "").then(pl.concat_str(pl.lit("{"), body, pl.lit("}"))).alias("args")
    ).to_series()


def with_args(frame: pl.DataFrame, out: pl.DataFrame, fields: Sequence[Field]) -> pl.DataFrame:
    """``out`` (rows of ``frame``, same order) with the ``args`` of ``fields`` on ``frame``."""
    return out.with_columns(args_json(frame, fields))


def not_sentinel(expr: pl.Expr) -> pl.Expr:
    """Null where an id is missing or 4294967295 (uint32 "none")."""
    return pl.when(expr != NO_ID).then(expr)


def conform(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` with exactly the columns of :data:`ROW_SCHEMA`, in order and type."""
    exprs = [
        (pl.col(c) if c in frame.columns else pl.lit(None)).cast(t).alias(c)
        for c, t in ROW_SCHEMA.items()
    ]
    return frame.select(exprs)


def to_table(frames: list[pl.DataFrame], origin: int) -> pa.Table:
    """The rows of ``frames`` with ts relative to ``origin``, in the timeline schema."""
    frames = [conform(f) for f in frames if f.height]
    frame = pl.concat(frames, how="vertical") if frames else pl.DataFrame(schema=ROW_SCHEMA)
    frame = frame.with_columns(pl.col("ts") - origin)
    table = frame.to_arrow()
    return build_table({name: table.column(name) for name in table.column_names}, frame.height)


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
