"""Ascend time values -> integer ns, vectorised.

Three spellings reach the parser:

* µs text with three decimals, often with a trailing TAB or wrapped in quotes
  (``"1736408883704643.212\\t"``; CSV columns and the ``ts`` of trace_view / msprof JSON);
* JSON numbers: floats of device-monotonic µs in the older per-device timelines
  (``56635864386.8``), float durations (``840.07675``);
* integer ns in the SQLite exports (``PYTORCH_API`` stores them as TEXT).

Text is split at the decimal point, never passed through a float, so epoch values keep their ns.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from tracekit.parsers.convert import to_ns

NA_TEXT = ("N/A", "NA", "", "None", "null", "nan")
_STRIP = " \t\r\n\"'"


def us_text_ns(values: pl.Expr) -> pl.Expr:
    """Expression: µs text (``"123.456\\t"``, ``"7"``, ``"-0.5"``) -> Int64 ns, null when not
    a plain decimal. Rounded half up at the fourth decimal."""
    text = values.cast(pl.String).str.strip_chars(_STRIP)
    negative = text.str.starts_with("-")
    body = text.str.strip_chars_start("-+")
    parts = body.str.split_exact(".", 1)
    whole = parts.struct.field("field_0")
    frac = parts.struct.field("field_1").fill_null("")
    digits = pl.concat_str([frac, pl.lit("0000")]).str.slice(0, 4)
    ok = whole.str.contains(r"^[0-9]+$") & frac.str.contains(r"^[0-9]*$")
    magnitude = (
        whole.cast(pl.Int64, strict=False) * 1000
        + digits.str.slice(0, 3).cast(pl.Int64, strict=False)
        + (digits.str.slice(3, 1) >= "5").cast(pl.Int64)
    )
    return pl.when(ok).then(pl.when(negative).then(-magnitude).otherwise(magnitude))


def json_us_ns(values: list[Any]) -> tuple[np.ndarray, np.ndarray]:
    """µs values decoded from JSON (text, int or float) -> (int64 ns, valid mask)."""
    if not values:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=bool)
    fast = _three_decimals_ns(values)
    return fast if fast is not None else to_ns(values)


_THREE_DECIMALS = r"^[0-9]{1,16}\.[0-9]{3}[ \t\r\n]*$"


def _three_decimals_ns(values: list[Any]) -> tuple[np.ndarray, np.ndarray] | None:
    """The common spelling, every value µs text with exactly three decimals (maybe a trailing
    TAB), read in C by dropping the point; None when any value is spelled otherwise."""
    if type(values[0]) is not str:
        return None
    try:
        text = pa.array(values, pa.string())
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return None
    ns = three_decimals_ns(text)
    return None if ns is None else (ns, np.ones(len(ns), dtype=bool))


def three_decimals_ns(text: pa.Array) -> np.ndarray | None:
    """µs text that all has exactly three decimals (maybe trailing blanks) -> int64 ns, read
    by dropping the point; None when a value is null or spelled otherwise."""
    if text.null_count or not pc.all(pc.match_substring_regex(text, _THREE_DECIMALS)).as_py():
        return None
    digits = pc.replace_substring(pc.utf8_rtrim(text, " \t\r\n"), ".", "", max_replacements=1)
    try:
        return pc.cast(digits, pa.int64()).to_numpy(zero_copy_only=False)
    except pa.ArrowInvalid:  # beyond int64 ns
        return None


def us_column_ns(values: pl.Series) -> pl.Series:
    """A text column of µs -> Int64 ns (:func:`us_text_ns`), by :func:`three_decimals_ns`
    when every value has that spelling (timestamps: nearly every value distinct)."""
    ns = three_decimals_ns(values.cast(pl.String).to_arrow()) if len(values) else None
    if ns is not None:
        return pl.Series(values.name, ns)
    return (
        pl.DataFrame({"v": values}).select(us_text_ns(pl.col("v"))).to_series().alias(values.name)
    )


def by_value(values: pl.Series, convert: Callable[[str], pl.Expr]) -> pl.Series:
    """``convert(name)`` (an expression on a column of that name) applied to ``values``: once
    per distinct value and gathered back when values repeat, as table columns mostly do."""
    encoded = pc.dictionary_encode(values.to_arrow())
    if isinstance(encoded, pa.ChunkedArray):
        encoded = encoded.combine_chunks()
    name = values.name
    if len(encoded.dictionary) * 2 > len(values):
        return pl.DataFrame({name: values}).select(convert(name)).to_series()
    distinct = pl.DataFrame({name: pl.Series(encoded.dictionary).cast(values.dtype)})
    return distinct.select(convert(name)).to_series().gather(pl.Series(encoded.indices))


def clean_text(column: str) -> pl.Expr:
    """A text column with TABs/blanks and the extra quotes around shapes removed; N/A -> null."""
    text = pl.col(column).cast(pl.String).str.strip_chars(_STRIP)
    return pl.when(text.is_in(NA_TEXT)).then(None).otherwise(text).alias(column)


def int_text(column: str) -> pl.Expr:
    """Integer text (``"2"``, ``"N/A"``, ``"2.0"``) -> Int64 (null when not an integer)."""
    text = pl.col(column).cast(pl.String).str.strip_chars(_STRIP)
    direct = text.cast(pl.Int64, strict=False)
    as_float = text.cast(pl.Float64, strict=False)
    whole = pl.when(as_float == as_float.floor()).then(as_float.cast(pl.Int64, strict=False))
    return pl.when(direct.is_not_null()).then(direct).otherwise(whole).alias(column)


SMALL_US = 2.0**43 / 1000  # below this a float µs value times 1000 still rounds to exact ns


def us_small_ns(column: str) -> pl.Expr:
    """A duration in µs text -> Int64 ns through a float (exact below :data:`SMALL_US`: the
    three decimals round back to their ns); larger values take the text path."""
    text = pl.col(column).cast(pl.String).str.strip_chars(_STRIP)
    number = text.cast(pl.Float64, strict=False)
    fast = (number * 1000).round().cast(pl.Int64, strict=False)
    return pl.when(number.abs() < SMALL_US).then(fast).otherwise(us_text_ns(text)).alias(column)


def float_text(column: str) -> pl.Expr:
    """Decimal text -> Float64 (null for N/A)."""
    text = pl.col(column).cast(pl.String).str.strip_chars(_STRIP)
    return text.cast(pl.Float64, strict=False).alias(column)
