"""Vectorized interval algebra over polars frames: merge, union length, gaps.

Intervals are half-open ``[ts, ts + dur)`` in integer ns. Everything is sort + cumulative
max, O(n log n), with no Python loop per interval.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl


def merge(df: pl.DataFrame | pl.LazyFrame, keys: Sequence[str] = ()) -> pl.DataFrame:
    """Merge overlapping or touching intervals per group of ``keys``.

    Input needs ``ts`` and ``dur``; output has ``*keys, start, end``, sorted.
    """
    keys = list(keys)
    lf = df.lazy().select(*keys, start=pl.col("ts"), end=pl.col("ts") + pl.col("dur"))
    lf = lf.sort([*keys, "start"])
    reach = pl.col("end").cum_max().shift(1)
    if keys:
        reach = reach.over(keys)
    lf = lf.with_columns(_new=reach.is_null() | (pl.col("start") > reach))
    lf = lf.with_columns(_seg=pl.col("_new").cum_sum())
    merged = lf.group_by([*keys, "_seg"]).agg(pl.col("start").min(), pl.col("end").max())
    return merged.drop("_seg").sort([*keys, "start"]).collect()


def union_length(df: pl.DataFrame | pl.LazyFrame, keys: Sequence[str] = ()) -> pl.DataFrame:
    """Total covered ns per group of ``keys`` (column ``busy``)."""
    merged = merge(df, keys)
    busy = (pl.col("end") - pl.col("start")).sum().alias("busy")
    if not keys:
        return merged.select(busy)
    return merged.group_by(list(keys)).agg(busy).sort(list(keys))


def gaps(df: pl.DataFrame | pl.LazyFrame, keys: Sequence[str] = ()) -> pl.DataFrame:
    """Idle intervals between merged busy intervals per group (``*keys, start, end``)."""
    keys = list(keys)
    merged = merge(df, keys)
    prev_end = pl.col("end").shift(1)
    if keys:
        prev_end = prev_end.over(keys)
    out = merged.with_columns(gap_start=prev_end).filter(pl.col("gap_start").is_not_null())
    return out.select(*keys, start=pl.col("gap_start"), end=pl.col("start"))
