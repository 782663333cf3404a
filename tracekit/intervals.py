"""Vectorized interval algebra over polars frames: merge, union length, gaps.

Intervals are half-open ``[ts, ts + dur)`` in integer ns. Everything is sort + cumulative
max, O(n log n), with no Python loop per interval.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from tracekit.errors import TraceError


class IntervalOverflowError(TraceError, OverflowError):
    """Timestamps too far apart (or too large) for int64 interval arithmetic."""


def merge(df: pl.DataFrame | pl.LazyFrame, keys: Sequence[str] = ()) -> pl.DataFrame:
    """Merge overlapping or touching intervals per group of ``keys``.

    Input needs ``ts`` and ``dur``; output has ``*keys, start, end``, sorted. Raises
    :class:`IntervalOverflowError` (a :class:`TraceError`) when the timestamps do not fit the
    int64 arithmetic, which only corrupt timestamps (near 2**63 ns, ~292 years) cause.
    """
    keys = list(keys)
    frame = df.lazy().select(*keys, start=pl.col("ts"), end=pl.col("ts") + pl.col("dur"))
    frame = frame.sort([*keys, "start"]).collect()
    if frame.height == 0:
        return frame
    if (frame["end"] < frame["start"]).any():
        raise IntervalOverflowError(
            "an interval ends before it starts (timestamp + duration past 2**63 ns, or a"
            " negative duration); the trace's timestamps look corrupt"
        )
    # One running maximum over all groups: lift each group by `group * span` so that the
    # maximum never carries from one group into the next.
    origin = frame["start"].min()
    span = frame["end"].max() - origin + 1
    group = pl.lit(0, pl.Int64)
    if keys:
        first = pl.int_range(pl.len()) == 0
        changed = pl.any_horizontal(
            first, *[pl.col(k).ne_missing(pl.col(k).shift(1)) for k in keys]
        )
        group = changed.cum_sum() - 1
    frame = frame.with_columns(_group=group.cast(pl.Int64))
    groups = int(frame["_group"].max()) + 1
    if span * groups >= 2**62:
        raise IntervalOverflowError(
            f"timestamps span {span - 1:,} ns, too far apart for int64 interval arithmetic;"
            " the trace's timestamps look corrupt"
        )
    lift = pl.col("_group") * span - origin
    reach = (pl.col("end") + lift).cum_max()
    frame = frame.with_columns(
        _new=reach.shift(1).is_null() | (pl.col("start") + lift > reach.shift(1)),
        _reach=reach - lift,
    )
    # A merged interval starts at a `_new` row and ends at the reach of its last row.
    is_last = pl.col("_new").shift(-1).fill_null(True)
    ends = frame.filter(is_last)["_reach"].alias("end")
    return frame.filter(pl.col("_new")).select(*keys, "start").with_columns(ends)


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
