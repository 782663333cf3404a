"""Values as parsers read them -> Arrow columns, with one set of rules for every parser:
integers (:func:`ints`, :func:`as_int`), floats, texts, µs -> ns (:func:`to_ns`); typed
conversion in C, with a per-value path only for odd values. And :func:`column_or_null`: a
frame's column, or a typed null where the frame lacks it; :func:`shared_text`: a text column
of few distinct values with each stored once."""

from __future__ import annotations

import keyword
from collections.abc import Callable
from decimal import Decimal, InvalidOperation
from operator import itemgetter
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

EXACT_FLOAT_US = 2.0**43  # below this a float µs value still resolves single ns
MAX_US = (2**63 - 1) // 1000  # the largest µs value whose ns fit in int64
_NONE = type(None)


def take(items: list[Any], idx: np.ndarray) -> list[Any]:
    """``items`` at positions ``idx``, gathered in C."""
    if len(idx) == 1:
        return [items[int(idx[0])]]
    return list(itemgetter(*idx.tolist())(items)) if len(idx) else []


_READERS: dict[str, Callable[[list[Any]], list[Any]]] = {}


def field_values(name: str) -> Callable[[list[Any]], list[Any]]:
    """A function returning ``[item.<name> for item in items]``.

    The list comprehension is compiled once per field name, so that CPython 3.11+ specialises
    its attribute load for the items' type: on msgspec structs about twice as fast as
    ``list(map(operator.attrgetter(name), items))``, whose generic lookup it cannot specialise.
    """
    reader = _READERS.get(name)
    if reader is None:
        if not name.isidentifier() or keyword.iskeyword(name):
            raise ValueError(f"not a field name: {name!r}")
        reader = eval(f"lambda items: [item.{name} for item in items]")
        _READERS[name] = reader
    return reader


def _as_float(value: Any) -> float | None:
    try:
        return None if value is None else float(value)
    except (TypeError, ValueError):
        return None


def floats(values: list[Any]) -> pa.Array:
    """Floats where the values are numbers (or numeric text); null elsewhere."""
    try:
        return pa.array(values, pa.float64())
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return pa.array([_as_float(v) for v in values], pa.float64())


def texts(values: Any) -> pa.Array:
    """Strings; values of other types as their ``str``; null stays null."""
    try:
        return pa.array(values, pa.string())
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return pa.array([None if v is None else str(v) for v in values], pa.string())


def ints(values: list[Any], typed: bool = False) -> pa.Array:
    """Integers where the values are integers (or integral text); null elsewhere.
    ``typed``: the values come from the typed decoder (see :func:`typed_ints`)."""
    if values and values[0] is None and values.count(None) == len(values):
        return pa.nulls(len(values), pa.int64())  # e.g. no host op has a correlation id
    ints = typed_ints(values) if typed else _only_ints(values)
    if ints is not None:
        return ints
    # Text, floats and bools (pyarrow would truncate 1.5 to 1 and read True as 1): typically
    # a few odd values among many integers.
    odd = [i for i, kind in enumerate(map(type, values)) if kind is not int and kind is not _NONE]
    if odd:
        values = values.copy()
        for i in odd:
            values[i] = as_int(values[i])
    try:
        return pa.array(values, pa.int64())
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):  # an int beyond 64 bits
        return pa.array([as_int(v) for v in values], pa.int64())


def _only_ints(values: list[Any]) -> pa.Array | None:
    """An int64 array of ``values`` when every one is an int (or None), else None.

    polars converts in one pass and rejects floats and text, but reads a bool as 0 or 1: so
    only the values that came out 0 or 1 are looked at again (ids are rarely either).
    """
    try:
        series = pl.Series(values, dtype=pl.Int64)
    except (TypeError, OverflowError, pl.exceptions.PolarsError):
        return None
    zero_or_one = series.is_between(0, 1).arg_true().to_numpy()
    if len(zero_or_one) and bool in set(map(type, take(values, zero_or_one))):
        return None
    return series.to_arrow()


def as_int(value: Any) -> int | None:
    """An int from an int, an integral float or decimal/hex text (``"stream 7"`` too); None
    for anything else (bools included) and for ints beyond 64 bits."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if -(2**63) <= value < 2**63 else None
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        text = value.strip().removeprefix("stream ").strip()
        try:
            return int(text, 16) if text.lower().startswith("0x") else int(text)
        except ValueError:
            return None
    return None


def column_or_null(
    frame: pl.DataFrame, name: str, dtype: Any = None, cast: bool = False
) -> pl.Expr:
    """Column ``name`` of ``frame`` (cast to ``dtype`` with ``cast``), or, where the frame has no
    such column, a null of ``dtype`` under that name."""
    if name not in frame.columns:
        return pl.lit(None, dtype).alias(name)
    return pl.col(name).cast(dtype) if cast else pl.col(name)


def typed_ints(values: list[Any]) -> pa.Array | None:
    """An int64 array of ``values`` when every one is an int (or None), else None.

    Only for values from the typed decoder, which never yields bools: polars would read
    ``True`` as 1. It converts Python ints about three times faster than pyarrow.
    """
    try:
        return pl.Series(values, dtype=pl.Int64).to_arrow()
    except (TypeError, OverflowError, pl.exceptions.PolarsError):
        return None


def to_ns(values: list[Any], raw: Any = None, typed: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Convert µs values (int, float, numeric text) to int64 ns; also return a valid mask.

    Floats too large to resolve ns (epoch µs with fractions) are re-read from their JSON
    text via ``raw()``, a callable returning the raw text of every value. ``typed``: the
    values come from the typed decoder (see :func:`typed_ints`).
    """
    ints = typed_ints(values) if typed else None
    if ints is not None:
        return _int_us_to_ns(ints)
    try:
        arr = pa.array(values)
        if pa.types.is_integer(arr.type) or pa.types.is_null(arr.type):
            return _int_us_to_ns(arr.cast(pa.int64()))
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):  # e.g. beyond 64 bits
        return _text_to_ns([None if v is None else str(v) for v in values])
    if not pa.types.is_floating(arr.type):
        return _text_to_ns([None if v is None else str(v) for v in values])
    floats = arr.to_numpy(zero_copy_only=False)
    valid = ~np.isnan(floats) & (np.abs(floats) < MAX_US)  # float(MAX_US) rounds up
    clean = np.where(valid, floats, 0.0)
    whole = np.floor(clean)
    ns = whole.astype(np.int64) * 1000 + np.rint((clean - whole) * 1000).astype(np.int64)
    # A float this large may already have lost the ns digits that its text carried.
    coarse = valid & (np.abs(clean) >= EXACT_FLOAT_US)
    if coarse.any() and raw is not None:
        texts = raw()
        idx = np.nonzero(coarse)[0]
        exact, ok = _text_to_ns([texts[i] for i in idx])
        ns[idx] = np.where(ok, exact, ns[idx])
    return ns, valid


def _int_us_to_ns(us: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """int64 µs -> (ns, valid): null, and values whose ns would not fit in int64, are
    invalid."""
    values = us.fill_null(0).to_numpy(zero_copy_only=False)
    valid = us.is_valid().to_numpy(zero_copy_only=False) & (values >= -MAX_US) & (values <= MAX_US)
    return np.where(valid, values, 0) * 1000, valid


def _text_to_ns(texts: list[Any]) -> tuple[np.ndarray, np.ndarray]:
    """Decimal µs text -> int64 ns, vectorised; exponent forms go through ``Decimal``."""
    strings = [t.decode("ascii", "replace") if isinstance(t, bytes) else t for t in texts]
    series = pl.Series(strings, dtype=pl.String).str.strip_chars().str.strip_chars('"')
    parts = series.str.split_exact(".", 1)
    whole_text = parts.struct.field("field_0")
    frac_text = parts.struct.field("field_1").fill_null("")
    whole = whole_text.cast(pl.Int64, strict=False)
    whole = pl.when(whole.is_between(-MAX_US, MAX_US)).then(whole)  # null where ns overflow
    digits = (frac_text + "0000").str.slice(0, 4)
    frac = digits.str.slice(0, 3).cast(pl.Int64, strict=False)
    round_up = (digits.str.slice(3, 1) >= "5").cast(pl.Int64)
    magnitude = whole.abs() * 1000 + frac + round_up
    ns = pl.when(series.str.starts_with("-")).then(-magnitude).otherwise(magnitude)
    frame = pl.DataFrame({"ns": pl.select(ns).to_series(), "text": series})
    ok = frame["ns"].is_not_null() & frac_text.str.contains(r"^[0-9]*$")
    out = frame["ns"].fill_null(0).to_numpy().copy()
    valid = ok.to_numpy().copy()
    for i in np.nonzero(~valid & series.is_not_null().to_numpy())[0]:
        try:  # exponent notation such as 1.7e15, rare enough for a per-value path
            ns_value = int((Decimal(series[int(i)]) * 1000).to_integral_value())
        except (InvalidOperation, ValueError, OverflowError):  # OverflowError: "inf"
            continue
        if abs(ns_value) <= MAX_US * 1000:
            out[i], valid[i] = ns_value, True
    return out, valid


def int64s(values: Any, fill: int = 0) -> np.ndarray:
    """An integer column (numpy, polars Series, Arrow array or chunked array) as int64 numpy,
    nulls replaced by ``fill``."""
    if isinstance(values, np.ndarray):
        return values.astype(np.int64, copy=False)
    if isinstance(values, pl.Series):
        return values.cast(pl.Int64).fill_null(fill).to_numpy()
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks() if values.num_chunks else pa.array([], pa.int64())
    return values.cast(pa.int64()).fill_null(fill).to_numpy(zero_copy_only=False)


def shared_text(values: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """``values`` (text) as a string view whose rows of one text share its bytes, when few
    texts repeat (under a quarter of the rows distinct); as they are otherwise. Device args
    repeat a few launch configurations millions of times: 384 MB -> 160 MB at 10M rows."""
    chunks = values.chunks if isinstance(values, pa.ChunkedArray) else [values]
    encoded = [pc.dictionary_encode(chunk) for chunk in chunks]
    if sum(len(e.dictionary) for e in encoded) * 4 > max(len(values), 1):
        return values
    views = []
    for chunk in encoded:  # polars gathers views of the distinct texts, not their bytes
        gathered = pl.Series(chunk.dictionary.cast(pa.large_string())).gather(
            pl.Series(chunk.indices)
        )
        views.append(gathered.to_arrow(compat_level=pl.CompatLevel.newest()))
    return pa.chunked_array(views, pa.string_view())
