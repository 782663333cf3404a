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


def _value(expr: pl.Expr, kind: str) -> pl.Expr:
    if kind == "text":  # let polars escape the string: encode {"v": x} and cut the value out
        encoded = pl.struct(expr.cast(pl.String).alias("v")).struct.json_encode()
        return encoded.str.slice(5, encoded.str.len_chars() - 6)
    if kind == "float":
        value = expr.cast(pl.Float64)
        return pl.when(value.is_finite()).then(value.cast(pl.String))
    return expr.cast(pl.String)


def args_expr(fields: Sequence[Field]) -> pl.Expr:
    """One compact JSON object per row from ``fields``; null values are left out and a row
    with no value at all gets a null ``args``."""
    if not fields:
        return pl.lit(None, pl.String).alias("args")
    pieces = []
    for key, expr, kind in fields:
        value = _value(expr, kind)
        pieces.append(
            pl.when(expr.is_not_null()).then(pl.concat_str(pl.lit(f"{json.dumps(key)}:"), value))
        )
    body = pl.concat_str(pieces, separator=",", ignore_nulls=True)
    return pl.when(body != "").then(pl.concat_str(pl.lit("{"), body, pl.lit("}"))).alias("args")


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
