"""The one route from rows to the events table for every AMD reader of this package: spans
in ns (:func:`durations`), frames of a fixed shape (:func:`conform`), and
:func:`events_table`, which assembles the parts (:func:`tracekit.parsers.assemble.assemble`)
and moves the ROCm clock onto ts 0 = the first event (:func:`rebase`)."""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from tracekit.parsers.assemble import Part, assemble
from tracekit.parsers.convert import int64s
from tracekit.parsers.name_pool import NamePool


def durations(start: Any, end: Any, label: str, warnings: list[str]) -> np.ndarray:
    """``end - start`` in ns (int64); a missing end reads as 0, a negative span is clamped to
    0, and both are counted in ``warnings``. Numpy, polars or Arrow columns."""
    begin = int64s(start, 0)
    stop = int64s(end, np.iinfo(np.int64).min)
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


def rebase(table: pa.Table, meta: dict[str, Any], domain: str) -> pa.Table:
    """Shift ts so that 0 is the first event; record the clock and its zero in ``meta``.

    ``origin_ns`` stays None: ROCm clocks (CLOCK_BOOTTIME, the HSA system clock,
    CLOCK_MONOTONIC) are not an epoch. ``meta["clock"]`` is ``{"domain": …, "zero_ns":
    <clock value at ts 0>}``.
    """
    meta["origin_ns"] = None
    if not table.num_rows:
        meta["clock"] = {"domain": domain, "zero_ns": None}
        return table
    first = pc.min(table.column("ts")).as_py()
    meta["clock"] = {"domain": domain, "zero_ns": first}
    return table.set_column(0, "ts", pc.subtract(table.column("ts"), first))


def events_table(parts: list[Part], pool: NamePool, meta: dict[str, Any], domain: str) -> pa.Table:
    """The events table of ``parts``, ts 0 at the first event of clock ``domain``."""
    return rebase(assemble(parts, pool), meta, domain)


def used_devices(table: pa.Table) -> list[int]:
    """The device numbers the rows use (host rows' -1 left out), sorted."""
    return sorted(set(table.column("device").drop_null().unique().to_pylist()) - {-1})
