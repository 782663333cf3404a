"""Helpers shared by every AMD reader of this package (rocprofv3 CSV/JSON, rocpd, legacy
rocprof): kinds of API rows, durations clamped with counted warnings, name pooling, the
move of a ROCm clock onto ts 0 = the first event, and the metadata skeleton."""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from tracekit.parsers.names import NamePool
from tracekit.timeline import empty_meta

CLOCK = "CLOCK_BOOTTIME"
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


def durations(start: Any, end: Any, label: str, warnings: list[str]) -> np.ndarray:
    """``end - start`` in ns (int64); a missing end reads as 0, a negative span is clamped to
    0, and both are counted in ``warnings``. Numpy, polars or Arrow columns."""
    begin = _int64(start, 0)
    stop = _int64(end, np.iinfo(np.int64).min)
    missing = stop == np.iinfo(np.int64).min
    dur = np.where(missing, begin, stop) - begin
    if lost := int(missing.sum()):
        warnings.append(f"{lost} {label} rows without an end; read as 0 ns")
    if negative := int((dur < 0).sum()):
        warnings.append(f"{negative} {label} rows end before they start; read as 0 ns")
    return np.maximum(dur, 0)


def conform(df: pl.DataFrame | None, columns: dict[str, Any]) -> pl.DataFrame:
    """``df`` with exactly ``columns`` (missing ones null), cast to their types."""
    if df is None:
        return pl.DataFrame(schema=columns)
    return df.select(
        (pl.col(c) if c in df.columns else pl.lit(None)).cast(t, strict=False).alias(c)
        for c, t in columns.items()
    )


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


def rebase(table: pa.Table, meta: dict[str, Any], domain: str = CLOCK) -> pa.Table:
    """Shift ts so that 0 is the first event; record the clock and its zero in ``meta``.

    ``origin_ns`` stays None: ROCm clocks (CLOCK_BOOTTIME, the HSA system clock) are not
    an epoch. ``meta["clock"]`` is ``{"domain": …, "zero_ns": <clock value at ts 0>}``.
    """
    meta["origin_ns"] = None
    if not table.num_rows:
        meta["clock"] = {"domain": domain, "zero_ns": None}
        return table
    first = pc.min(table.column("ts")).as_py()
    meta["clock"] = {"domain": domain, "zero_ns": first}
    return table.set_column(0, "ts", pc.subtract(table.column("ts"), first))


def base_meta(fmt: str, source: str, producer: dict[str, Any]) -> dict[str, Any]:
    """Metadata skeleton of a rocprofiler-sdk output (``producer`` adds to its entry)."""
    meta = empty_meta()
    meta["format"] = fmt
    meta["source"] = source
    meta["producer"] = {"name": PRODUCER, "version": None, **producer}
    return meta


def _int64(values: Any, fill: int) -> np.ndarray:
    """A column as int64 numpy, nulls replaced by ``fill``."""
    if isinstance(values, np.ndarray):
        return values.astype(np.int64, copy=False)
    if isinstance(values, pl.Series):
        return values.cast(pl.Int64).fill_null(fill).to_numpy()
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks() if values.num_chunks else pa.array([], pa.int64())
    return values.cast(pa.int64()).fill_null(fill).to_numpy(zero_copy_only=False)
