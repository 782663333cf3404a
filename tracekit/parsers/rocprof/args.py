"""The ``args`` JSON of the AMD readers, built column-wise with polars: one compact object per
row, no Python per row.

A :class:`Field` names one key. Required fields are written in every row (``null`` when the
value is missing) and, since trace rows repeat a handful of launch shapes, rendered once per
distinct row pattern and gathered; optional fields are left out of the rows where they are
null (and skipped altogether when no row has them).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field

import polars as pl
import pyarrow as pa

INT, STR = "int", "str"
_PATTERN_MIN_ROWS = 20_000  # below this, writing every row's args is as quick
_FEW_TEXTS = 50_000  # below this many distinct texts, escape each once in Python

Column = str | pl.Expr


@dataclass(frozen=True)
class Field:
    """One args key. ``expr`` is a column name or expression, or a tuple of integer ones
    written as a JSON array; ``kind`` is :data:`INT` (written as a number) or :data:`STR`
    (a JSON string). A ``required`` field is always written, ``null`` when missing; an
    optional one is left out of rows where it is null. With ``lookup``, ``expr`` holds
    string-table ids and the text is looked up once per distinct id (ids not in the table
    read as null), so rows repeat integer keys, not strings."""

    key: str
    expr: Column | tuple[Column, ...]
    kind: str = INT
    required: bool = False
    lookup: pl.DataFrame | None = field(default=None, compare=False)  # (id, text) table

    def __post_init__(self) -> None:
        if self.lookup is not None and self.kind != STR:
            raise ValueError("a lookup field is a STR field")

    @property
    def array(self) -> bool:
        return isinstance(self.expr, tuple)

    def exprs(self) -> list[pl.Expr]:
        items = self.expr if isinstance(self.expr, tuple) else (self.expr,)
        return [pl.col(e) if isinstance(e, str) else e for e in items]


def json_args(df: pl.DataFrame, *fields: Field, split: int | None = None) -> pa.Array:
    """A compact JSON object per row of ``df``; null where a row has nothing to say.

    With ``split``, the required fields before and after that index are two pieces that are
    each rendered per pattern or per row (e.g. kernel registers repeat while grid sizes may
    not); without it the required fields go as one piece.
    """
    required = [f for f in fields if f.required]
    optional = [f for f in fields if not f.required]
    if optional and df.height:
        checks = [f.exprs()[0].is_not_null().any().alias(str(i)) for i, f in enumerate(optional)]
        present = df.select(checks).row(0)
        optional = [f for f, has in zip(optional, present) if has]
    else:
        optional = []
    closing = "" if optional else "}"
    if required:
        head = _required_text(df, required, split, closing)
        if not optional:
            return head.to_arrow()
    pieces: list[pl.Expr] = []
    for f in optional:
        pieces.append(pl.concat_str([pl.lit(f',"{f.key}":'), _value(df, f, None)]).fill_null(""))
    if not pieces:
        return pa.nulls(df.height, pa.string())
    if required:
        out = df.select(pl.concat_str([pl.lit(head), *pieces, pl.lit("}")])).to_series()
    else:
        body = df.select(pl.concat_str(pieces)).to_series()
        out = pl.select(
            pl.when(body != "").then(pl.concat_str([pl.lit("{"), body.str.slice(1), pl.lit("}")]))
        ).to_series()
    return out.to_arrow()


def json_text(
    df: pl.DataFrame, expr: pl.Expr, null: str | None, lookup: pl.DataFrame | None = None
) -> pl.Expr:
    """``expr`` as a JSON string literal (``null`` for null); few distinct texts are escaped
    once each in Python, many through polars' JSON encoder. With ``lookup`` (``id``, text
    columns), ``expr`` holds ids and each distinct id's text is escaped once."""
    if lookup is not None:
        keys = df.select(expr.unique()).to_series()
        found = lookup.filter(pl.col(lookup.columns[0]).is_in(keys.implode()))
        texts = found.to_series(1).to_list()
        encoded = [None if t is None else json.dumps(t, ensure_ascii=False) for t in texts]
        value = expr.replace_strict(
            found.to_series(0),
            pl.Series(encoded, dtype=pl.String),
            default=None,
            return_dtype=pl.String,
        )
        return value if null is None else value.fill_null(null)
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


def blank_as_null(column: str) -> pl.Expr:
    """A text column with empty strings read as missing (CSV quoting styles differ there)."""
    return pl.when(pl.col(column) != "").then(pl.col(column))


def _value(df: pl.DataFrame, f: Field, null: str | None) -> pl.Expr:
    """The JSON text of one field's value (an array for a tuple of expressions)."""
    if f.kind == STR:
        return json_text(df, f.exprs()[0], null, f.lookup)
    if not f.array:
        return _int_text(f.exprs()[0], null)
    parts: list[pl.Expr] = []
    for i, e in enumerate(f.exprs()):
        parts += [pl.lit("," if i else "["), _int_text(e, "null")]
    return pl.concat_str([*parts, pl.lit("]")])


def _int_text(expr: pl.Expr, null: str | None) -> pl.Expr:
    text = expr.cast(pl.Int64).cast(pl.String)
    return text if null is None else text.fill_null(null)


def _local(df: pl.DataFrame, fields: Sequence[Field]) -> tuple[pl.DataFrame, list[Field]]:
    """The fields' values as plain columns ``_k0``, ``_k1`` … and fields that name them."""
    exprs = [e for f in fields for e in f.exprs()]
    values = df.select(e.alias(f"_k{i}") for i, e in enumerate(exprs))
    local, i = [], 0
    for f in fields:
        names = tuple(f"_k{j}" for j in range(i, i + len(f.exprs())))
        local.append(Field(f.key, names if f.array else names[0], f.kind, True, f.lookup))
        i += len(names)
    return values, local


def _render(frame: pl.DataFrame, fields: Sequence[Field], opening: str, closing: str) -> pl.Series:
    """Every row's text of ``fields``: ``opening`` + ``"key":value`` pairs + ``closing``."""
    parts: list[pl.Expr] = []
    for i, f in enumerate(fields):
        key = ("," if i else opening) + json.dumps(f.key) + ":"
        parts += [pl.lit(key), _value(frame, f, "null")]
    parts.append(pl.lit(closing))
    return frame.select(pl.concat_str(parts).alias("args")).to_series()


def _required_text(
    df: pl.DataFrame, fields: list[Field], split: int | None, closing: str
) -> pl.Series:
    values, local = _local(df, fields)
    if df.height < _PATTERN_MIN_ROWS:
        return _render(values, local, "{", closing)
    if split is None or not 0 < split < len(local) or _repetitive(values):
        return _piece(values, local, "{", closing)
    first = sum(len(f.exprs()) for f in local[:split])
    head = _piece(values.select(values.columns[:first]), local[:split], "{", "")
    tail = _piece(values.select(values.columns[first:]), local[split:], ",", closing)
    return pl.select(pl.concat_str([head, tail])).to_series().alias("args")


def _repetitive(values: pl.DataFrame) -> bool:
    """Whether the first rows repeat (few distinct value patterns)."""
    sample = values.head(_PATTERN_MIN_ROWS)
    return _hashes(sample).n_unique() * 4 <= sample.height


def _piece(values: pl.DataFrame, fields: list[Field], opening: str, closing: str) -> pl.Series:
    """The text of ``fields``, rendered once per distinct value (one column), once per
    distinct row pattern (rows repeat), or row by row."""
    if values.width == 1:
        distinct = values.unique()
        if distinct.height * 4 <= values.height:
            text = _render(distinct, fields, opening, closing)
            column = values.columns[0]
            return values[column].replace_strict(distinct[column], text, return_dtype=pl.String)
    elif _repetitive(values):
        text = _by_pattern(values, fields, opening, closing)
        if text is not None:
            return text
    return _render(values, fields, opening, closing)


def _hashes(values: pl.DataFrame) -> pl.Series:
    """One 64-bit hash per row; equal rows hash alike."""
    return values.hash_rows().alias("h")


def _by_pattern(
    values: pl.DataFrame, fields: list[Field], opening: str, closing: str
) -> pl.Series | None:
    """Texts written once per distinct row and gathered; None when rows are mostly distinct
    or two patterns share a hash (verified column by column)."""
    keys = _hashes(values).to_frame()
    firsts = keys.with_row_index("i").group_by("h").agg(pl.col("i").first())
    if firsts.height * 4 > values.height:
        return None
    firsts = firsts.with_row_index("code")
    codes = keys.join(firsts.select("h", "code"), on="h", how="left", maintain_order="left")
    code = codes["code"]
    reps = values[firsts["i"]]
    if not values.equals(reps[code]):  # a hash collision: two patterns share a key
        return None
    return _render(reps, fields, opening, closing)[code]
