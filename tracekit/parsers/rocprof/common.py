"""Pieces shared by the rocprofv3 CSV and JSON readers: kinds of API rows, durations,
args JSON built column-wise, the time origin and the metadata skeleton."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from tracekit.parsers.assemble import Part
from tracekit.parsers.names import NamePool
from tracekit.timeline import empty_meta

CLOCK = "CLOCK_BOOTTIME"
_PATTERN_MIN_ROWS = 20_000  # below this, writing every row's args is as quick
PRODUCER = "rocprofv3 (rocprofiler-sdk)"

# Marker domains whose rows are user annotations (the Function column holds the message)
MARKER_DOMAINS = ("MARKER_CORE_API", "MARKER_CORE_RANGE_API")
# roctx calls that are bookkeeping, not annotations, when they appear under a marker domain
ROCTX_CALLS = ("roctxRangePop", "roctxRangeStop", "roctxGetThreadId", "roctxProfilerPause",
               "roctxProfilerResume", "roctxNameOsThread", "roctxNameHsaAgent",
               "roctxNameHipDevice", "roctxNameHipStream")  # fmt: skip


API_KINDS = ("api", "range", "marker")  # the codes api_kinds returns: 0, 1, 2


def api_kinds(domain: pl.Series, name: pl.Series, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Per row a code into :data:`API_KINDS`: ``api``, ``range`` (a marker-domain row with a
    duration) or ``marker`` (start == end). String or Categorical columns."""
    codes = np.zeros(len(domain), dtype=np.int8)
    in_domain = domain.is_in(MARKER_DOMAINS).fill_null(False)
    if not in_domain.any():
        return codes
    marker = (in_domain & ~name.is_in(ROCTX_CALLS).fill_null(False)).to_numpy()
    codes[marker] = np.where(start[marker] == end[marker], 2, 1)
    return codes


def durations(start: np.ndarray, end: pl.Series, label: str, warnings: list[str]) -> np.ndarray:
    """``end - start`` in ns; a missing end reads as 0, a negative one is clamped to 0."""
    missing = end.is_null().to_numpy()
    stop = end.fill_null(0).to_numpy()
    dur = np.where(missing, 0, stop - start)
    negative = int((dur < 0).sum())
    if missing.any():
        warnings.append(f"{int(missing.sum())} {label} rows without an end; read as 0 ns")
    if negative:
        warnings.append(f"{negative} {label} rows end before they start; clamped to 0 ns")
    return np.maximum(dur, 0)


def json_text(values: pl.Series) -> pl.Series:
    """Each value as a JSON string literal (``null`` for null or empty), via unique values."""
    uniques = values.unique().drop_nulls().to_list()
    mapping = {u: json.dumps(u) if u != "" else "null" for u in uniques}
    return values.replace_strict(mapping, default="null", return_dtype=pl.String)


def domain_args(domain: pl.Series) -> pl.Series:
    """``{"domain": …}`` per row, written once per distinct domain."""
    uniques = domain.unique().drop_nulls().to_list()
    mapping = {u: json.dumps({"domain": u}, separators=(",", ":")) for u in uniques}
    return domain.replace_strict(mapping, default='{"domain":null}', return_dtype=pl.String)


Fields = Sequence[tuple[str, str | Sequence[str]]]


def args_expr(fields: Fields, opening: str = "{", closing: str = "}") -> pl.Expr:
    """A compact JSON object per row: ``fields`` maps keys to one column or a list of columns.

    Integer columns are written as numbers; string columns must already be JSON text (see
    :func:`json_text`). Null values become ``null``. One ``concat_str``, no per-row Python.
    ``opening``/``closing`` let a caller write an object in pieces.
    """
    parts: list[pl.Expr] = []
    text = opening
    for i, (key, cols) in enumerate(fields):
        text += ("," if i else "") + json.dumps(key) + ":"
        group = [cols] if isinstance(cols, str) else list(cols)
        if not isinstance(cols, str):
            text += "["
        for j, col in enumerate(group):
            if j:
                text += ","
            parts.append(pl.lit(text))
            parts.append(pl.col(col).cast(pl.String).fill_null("null"))
            text = ""
        if not isinstance(cols, str):
            text += "]"
    parts.append(pl.lit(text + closing))
    return pl.concat_str(parts).alias("args")


def _columns(fields: Fields) -> list[str]:
    return list(dict.fromkeys(c for _, cs in fields for c in ([cs] if isinstance(cs, str) else cs)))


def _repetitive(frame: pl.DataFrame, fields: Fields) -> bool:
    """Whether the first rows repeat (few distinct value patterns) in these fields."""
    sample = frame.select(_columns(fields)).head(_PATTERN_MIN_ROWS)
    return pattern_keys(sample)["h"].n_unique() * 4 <= sample.height


def _by_pattern(frame: pl.DataFrame, expr: pl.Expr, cols: list[str]) -> pl.Series | None:
    """``expr`` written once per distinct row of ``cols`` and gathered; None when the rows
    are mostly distinct or two patterns share a hash (verified column by column)."""
    values = frame.select(cols)
    keys = pattern_keys(values)
    firsts = keys.with_row_index("i").group_by("h").agg(pl.col("i").first())
    if firsts.height * 4 > frame.height:
        return None
    firsts = firsts.with_row_index("code")
    codes = keys.join(firsts.select("h", "code"), on="h", how="left", maintain_order="left")
    codes_s = codes["code"]
    reps = values[firsts["i"]]
    if not values.equals(reps[codes_s]):  # a hash collision: two patterns share a key
        return None
    return reps.select(expr).to_series()[codes_s]


def _piece(frame: pl.DataFrame, fields: Fields, opening: str, closing: str) -> pl.Series:
    expr = args_expr(fields, opening, closing)
    if _repetitive(frame, fields):
        text = _by_pattern(frame, expr, _columns(fields))
        if text is not None:
            return text
    return frame.select(expr).to_series()


def args_json(frame: pl.DataFrame, fields: Fields, split: int | None = None) -> pl.Series:
    """:func:`args_expr` evaluated on a frame, once per distinct row pattern where rows repeat.

    Rows of a trace repeat a handful of (grid, block, registers …) patterns, so the JSON is
    written for one representative row per pattern (grouped by a hash of the columns) and
    gathered. With ``split``, the fields before and after it are two pieces that each go
    this way or row by row (e.g. kernel registers repeat while grid sizes may not).
    """
    if frame.height < _PATTERN_MIN_ROWS:
        return frame.select(args_expr(fields)).to_series()
    if split is None or _repetitive(frame, fields):
        return _piece(frame, fields, "{", "}")
    head = _piece(frame, fields[:split], "{", "")
    tail = _piece(frame, fields[split:], ",", "}")
    return pl.select(pl.concat_str([head, tail])).to_series().alias("args")


def pattern_keys(values: pl.DataFrame) -> pl.DataFrame:
    """One 64-bit hash per row (column ``h``); equal rows get equal keys."""
    return values.select(pl.struct(values.columns).hash().alias("h"))


def pool_names(pool: NamePool, values: pl.Series) -> np.ndarray:
    """Pool indices of a String or Categorical column (hashing each distinct name once)."""
    if values.dtype != pl.Categorical:
        values = values.cast(pl.Categorical)
    arr = values.to_arrow()
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    codes = pool.from_strings(arr.dictionary.cast(pa.string()))
    if not len(codes):
        return np.full(len(arr), -1, dtype=np.int64)
    indices = arr.indices.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
    return np.where(arr.indices.is_null().to_numpy(zero_copy_only=False), -1, codes[indices])


def rebase(parts: list[Part]) -> int | None:
    """Shift every part's ts so that the earliest row is at 0; return the shift (ns)."""
    starts = [int(np.min(p.ts)) for p in parts if len(p)]
    if not starts:
        return None
    origin = min(starts)
    for part in parts:
        part.ts = np.asarray(part.ts, dtype=np.int64) - origin
    return origin


def base_meta(fmt: str, source: str, producer: dict[str, Any]) -> dict[str, Any]:
    """Metadata skeleton: rocprofiler times are CLOCK_BOOTTIME ns, so no epoch origin."""
    meta = empty_meta()
    meta["format"] = fmt
    meta["source"] = source
    meta["producer"] = {"name": PRODUCER, "version": None, **producer}
    return meta


def finish_meta(meta: dict[str, Any], origin: int | None) -> None:
    """Record the clock ts counts on and its value at ts 0 (the trace gives no epoch), in the
    shape the other ROCm readers use: ``{"domain": "CLOCK_BOOTTIME", "zero_ns": …}``."""
    meta["clock"] = {"domain": CLOCK, "zero_ns": origin}
    meta["origin_ns"] = None
