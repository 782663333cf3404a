"""Helpers shared by the AMD parsers of this family (rocpd, legacy rocprof v1/v2).

Compact args JSON built column-wise with polars, duration clamping with counted warnings,
and the move of a ROCm clock onto ts 0 = the first event.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

INT, STR, INTS = "int", "str", "ints"
_FEW_TEXTS = 50_000  # below this many distinct texts, escape each once in Python
_DEDUP_ROWS = 100_000  # from this many rows on, render repeated args combinations once


@dataclass(frozen=True)
class Field:
    """One args key: ``kind`` is :data:`INT`, :data:`STR` or :data:`INTS` (a list of
    integer expressions written as an array). A ``required`` field is always written
    (``null`` when missing); an optional one is left out of rows where it is null."""

    key: str
    expr: Any
    kind: str = INT
    required: bool = False


def json_args(df: pl.DataFrame, *fields: Field) -> pa.Array:
    """A compact JSON object per row of ``df``; null where a row has nothing to say.

    Required fields go through one ``pl.format`` — once per distinct combination of their
    values when rows repeat a lot (kernel launch shapes do); optional ones are skipped
    altogether when no row has them, else appended per row.
    """
    required = [f for f in fields if f.required]
    optional = [f for f in fields if not f.required]
    present: tuple[Any, ...] = ()
    if optional and df.height:
        checks = [_first(f).is_not_null().any().alias(str(i)) for i, f in enumerate(optional)]
        present = df.select(checks).row(0)
    optional = [f for f, has in zip(optional, present) if has]
    pieces: list[pl.Expr] = []
    if required:
        pieces.append(pl.lit(_required_text(df, required)))
    for f in optional:
        value = _array(f) if f.kind == INTS else _values(df, f, null=None)[0]
        pieces.append(pl.concat_str([pl.lit(f',"{f.key}":'), value]).fill_null(""))
    if not pieces:
        return pa.nulls(df.height, pa.string())
    if required:
        out = df.select(pl.concat_str([*pieces, pl.lit("}")])).to_series()
    else:
        body = df.select(pl.concat_str(pieces)).to_series()
        out = pl.select(
            pl.when(body != "").then(pl.concat_str([pl.lit("{"), body.str.slice(1), pl.lit("}")]))
        ).to_series()
    return out.to_arrow()


def _required_text(df: pl.DataFrame, required: list[Field]) -> pl.Series:
    """``{"key":value,...`` (no closing brace) of the required fields, per row."""
    raw = [e for f in required for e in (f.expr if f.kind == INTS else [f.expr])]
    keys = df.select(e.alias(f"_k{i}") for i, e in enumerate(raw))
    local, i = [], 0
    for f in required:
        width = len(f.expr) if f.kind == INTS else 1
        cols = [pl.col(f"_k{j}") for j in range(i, i + width)]
        local.append(Field(f.key, cols if f.kind == INTS else cols[0], f.kind, True))
        i += width
    template = "{{" + ",".join(f'"{f.key}":{_slots(f)}' for f in local)

    def render(frame: pl.DataFrame) -> pl.Series:
        values = [v for f in local for v in _values(frame, f, null="null")]
        return frame.select(pl.format(template, *values)).to_series()

    if df.height >= _DEDUP_ROWS:
        hashes = keys.select(pl.struct(pl.all()).hash()).to_series()
        distinct = keys.with_columns(_h=hashes).unique(subset="_h", keep="first")
        if distinct.height * 8 <= df.height and distinct.height == keys.n_unique():
            text = render(distinct)  # no hash collision: as many hashes as distinct rows
            return hashes.replace_strict(distinct["_h"], text, return_dtype=pl.String)
    return render(keys)


def _first(f: Field) -> pl.Expr:
    return f.expr[0] if f.kind == INTS else f.expr


def _slots(f: Field) -> str:
    return "[" + ",".join("{}" for _ in f.expr) + "]" if f.kind == INTS else "{}"


def _values(df: pl.DataFrame, f: Field, null: str | None) -> list[pl.Expr]:
    if f.kind == INTS:
        return [_int_text(e, null) for e in f.expr]
    if f.kind == STR:
        return [_json_text(df, f.expr, null)]
    return [_int_text(f.expr, null)]


def _array(f: Field) -> pl.Expr:
    parts: list[pl.Expr] = []
    for i, item in enumerate(f.expr):
        parts += [pl.lit("," if i else "["), _int_text(item, "null")]
    return pl.concat_str([*parts, pl.lit("]")])


def _int_text(expr: pl.Expr, null: str | None) -> pl.Expr:
    text = expr.cast(pl.Int64).cast(pl.String)
    return text if null is None else text.fill_null(null)


def _json_text(df: pl.DataFrame, expr: pl.Expr, null: str | None) -> pl.Expr:
    """``expr`` as a JSON string literal; few distinct texts are escaped once each."""
    distinct = df.select(expr.cast(pl.String).unique()).to_series()
    if len(distinct) <= _FEW_TEXTS:
        texts = [t for t in distinct.to_list() if t is not None]
        encoded = pl.Series([json.dumps(t, ensure_ascii=False) for t in texts], dtype=pl.String)
        value = expr.cast(pl.String).replace_strict(
            pl.Series(texts, dtype=pl.String), encoded, default=None, return_dtype=pl.String
        )
    else:
        raw = pl.struct(expr.cast(pl.String).alias("v")).struct.json_encode()
        value = pl.when(expr.is_not_null()).then(
            raw.str.strip_prefix('{"v":').str.strip_suffix("}")
        )
    return value if null is None else value.fill_null(null)


def clamp(start: Any, end: Any, label: str, warnings: list[str]) -> pa.Array:
    """``end - start`` as int64, negative spans read as 0 with a counted warning."""
    s = _int64(start)
    e = _int64(end)
    dur = e - s
    negative = int((dur < 0).sum())
    if negative:
        warnings.append(f"{negative} {label} rows end before they start; read as 0 ns")
    return pa.array(np.maximum(dur, 0))


def rebase(table: pa.Table, meta: dict[str, Any], domain: str) -> pa.Table:
    """Shift ts so that 0 is the first event; record the clock and its zero in ``meta``.

    ``origin_ns`` stays None: ROCm clocks (CLOCK_BOOTTIME, the HSA system clock) are not
    an epoch. ``meta["clock"]`` says which clock ts counts on and its value at ts 0.
    """
    if not table.num_rows:
        meta["clock"] = {"domain": domain, "zero_ns": None}
        return table
    first = pc.min(table.column("ts")).as_py()
    meta["clock"] = {"domain": domain, "zero_ns": first}
    return table.set_column(0, "ts", pc.subtract(table.column("ts"), first))


def _int64(values: Any) -> np.ndarray:
    if isinstance(values, pl.Series):
        return values.cast(pl.Int64).fill_null(0).to_numpy()
    if isinstance(values, np.ndarray):
        return values.astype(np.int64, copy=False)
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks() if values.num_chunks else pa.array([], pa.int64())
    return values.cast(pa.int64()).fill_null(0).to_numpy(zero_copy_only=False)
