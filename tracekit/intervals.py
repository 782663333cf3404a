"""Vectorized interval algebra over polars frames: merge, union length, gaps.

Intervals are half-open ``[ts, ts + dur)`` in integer ns. Everything is sort + cumulative
max, O(n log n), with no Python loop per interval.
"""

from __future__ import annotations

import weakref
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
    frame = frame.collect()
    if frame.height == 0:
        return _remember(frame, keys)
    if (frame["end"] < frame["start"]).any():
        raise IntervalOverflowError(
            "an interval ends before it starts (timestamp + duration past 2**63 ns, or a"
            " negative duration); the trace's timestamps look corrupt"
        )
    origin = int(frame["start"].min())  # type: ignore[arg-type]
    span = int(frame["end"].max()) - origin + 1  # type: ignore[arg-type]
    # Sorted stably (polars' unstable multi-column sort is up to 5x slower on presorted runs),
    # by one integer where the keys allow: the group's number lifted above the others' times
    number = _group_number(frame, keys, span)
    if number is not None:
        frame = frame.with_columns(_group=number)
        frame = frame.sort(pl.col("_group") * span + pl.col("start") - origin, maintain_order=True)
    else:
        frame = frame.sort([*keys, "start"], maintain_order=True)
        first = pl.int_range(pl.len()) == 0
        changed = pl.any_horizontal(
            first, *[pl.col(k).ne_missing(pl.col(k).shift(1)) for k in keys]
        )
        frame = frame.with_columns(_group=(changed.cum_sum() - 1).cast(pl.Int64))
        if span * (int(frame["_group"].max()) + 1) >= 2**62:  # type: ignore[arg-type]
            raise IntervalOverflowError(
                f"timestamps span {span - 1:,} ns, too far apart for int64 interval arithmetic;"
                " the trace's timestamps look corrupt"
            )
    # One running maximum over all groups: lift each group by `group * span` so that the
    # maximum never carries from one group into the next.
    lift = pl.col("_group") * span - origin
    reach = (pl.col("end") + lift).cum_max()
    frame = frame.with_columns(
        _new=reach.shift(1).is_null() | (pl.col("start") + lift > reach.shift(1)),
        _reach=reach - lift,
    )
    # A merged interval starts at a `_new` row and ends at the reach of its last row.
    is_last = pl.col("_new").shift(-1).fill_null(True)
    ends = frame.filter(is_last)["_reach"].alias("end")
    return _remember(frame.filter(pl.col("_new")).select(*keys, "start").with_columns(ends), keys)


_PACKABLE = (pl.Int8, pl.Int16, pl.Int32, pl.Int64, pl.UInt8, pl.UInt16, pl.UInt32)


def _group_number(frame: pl.DataFrame, keys: list[str], span: int) -> pl.Expr | None:
    """An Int64 numbering each row's group of ``keys`` in the keys' sort order (nulls first),
    their values packed rather than ranked; None when a key is not an integer column or a
    number times ``span`` could pass 2**62."""
    if not keys:
        return pl.lit(0, pl.Int64) if span < 2**62 else None
    if not all(frame.schema[k] in _PACKABLE for k in keys):
        return None
    bounds = frame.select(
        *(pl.col(k).min().alias(f"lo{i}") for i, k in enumerate(keys)),
        *(pl.col(k).max().alias(f"hi{i}") for i, k in enumerate(keys)),
    ).row(0)
    number, total = pl.lit(0, pl.Int64), 1
    for key, low, high in zip(keys, bounds[: len(keys)], bounds[len(keys) :]):
        if low is None:  # all null
            continue
        code = (pl.col(key).cast(pl.Int64) - (int(low) - 1)).fill_null(0)  # 0: null
        width = int(high) - int(low) + 2
        number, total = number * width + code, total * width
    return number if total * span < 2**62 else None


def sort_key(frame: pl.DataFrame, keys: Sequence[str], at: str) -> pl.Expr | list[str]:
    """What sorts ``frame`` by ``keys`` (nulls first), then by the integer column ``at``: one
    Int64 (the group's number lifted above the other groups' values of ``at``) where the
    keys pack, else the column names. Sort stably with it; one integer sorts several times
    faster than the columns."""
    keys = list(keys)
    if not frame.height or frame[at].null_count():
        return [*keys, at]
    origin = int(frame[at].min())  # type: ignore[arg-type]
    span = int(frame[at].max()) - origin + 1  # type: ignore[arg-type]
    number = _group_number(frame, keys, span)
    return [*keys, at] if number is None else number * span + pl.col(at) - origin


# merge() and _combine() outputs, by id while they live: taken as merged without a check
# (and, against a frame changed in place, their height and columns)
_MERGED: dict[int, tuple[weakref.ref, tuple[str, ...], int, tuple[str, ...]]] = {}


def _remember(frame: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    name = id(frame)
    forget = weakref.ref(frame, lambda _, name=name: _MERGED.pop(name, None))
    _MERGED[name] = (forget, tuple(keys), frame.height, tuple(frame.columns))
    return frame


def _is_remembered(frame: pl.DataFrame, keys: list[str]) -> bool:
    known = _MERGED.get(id(frame))
    mark = (tuple(keys), frame.height, tuple(frame.columns))
    return known is not None and known[0]() is frame and known[1:] == mark


def union_length(df: pl.DataFrame | pl.LazyFrame, keys: Sequence[str] = ()) -> pl.DataFrame:
    """Total covered ns per group of ``keys`` (column ``busy``)."""
    merged = merge(df, keys)
    busy = (pl.col("end") - pl.col("start")).sum().alias("busy")
    if not keys:
        return merged.select(busy)
    return merged.group_by(list(keys)).agg(busy).sort(list(keys))


def same_group(keys: Sequence[str], step: int) -> pl.Expr:
    """True where the row ``step`` rows away (1: the previous) is in the same group of
    ``keys`` (rows sorted by the keys first)."""
    return pl.all_horizontal(pl.col(k).eq_missing(pl.col(k).shift(step)) for k in keys)


def _merged(df: pl.DataFrame | pl.LazyFrame, keys: list[str]) -> pl.DataFrame:
    """``df`` merged, or as it is when it already is :func:`merge` output (``start, end``
    and no ``ts``): the metrics merge each set once and combine it several ways."""
    if not (isinstance(df, pl.DataFrame) and "ts" not in df.columns and "start" in df.columns):
        return merge(df, keys)
    if _is_remembered(df, keys):
        return df
    # taken as merged: sorted, disjoint and not touching within each group, or refused
    apart = pl.col("end") < pl.col("start").shift(-1)
    if keys:
        apart = apart | ~same_group(keys, -1)
    if not df.select((pl.col("start") <= pl.col("end")).all() & apart.fill_null(True).all()).item():
        raise ValueError("intervals with start and end must be merge() output (sorted, disjoint)")
    return df


def gaps(df: pl.DataFrame | pl.LazyFrame, keys: Sequence[str] = ()) -> pl.DataFrame:
    """Idle intervals between merged busy intervals per group (``*keys, start, end``).

    ``df`` has ``ts`` and ``dur``, or is :func:`merge` output."""
    keys = list(keys)
    merged = _merged(df, keys)
    prev_end = pl.col("end").shift(1)
    if keys:  # merged is sorted by the keys: the previous row's end when it is in the group
        prev_end = pl.when(same_group(keys, 1)).then(prev_end)
    out = merged.with_columns(gap_start=prev_end).filter(pl.col("gap_start").is_not_null())
    return out.select(*keys, start=pl.col("gap_start"), end=pl.col("start"))


def _segments(a: pl.DataFrame, b: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    """Elementary segments ``[start, end)`` per key with flags ``in_a`` / ``in_b``, the
    covered ones only (``in_a | in_b``).

    ``a`` and ``b`` are merged interval sets (``*keys, start, end``); a sweep over their
    boundaries (+1 at a start, -1 at an end) gives the coverage of each segment. Every group's
    boundaries sum to 0, so one running sum over all groups (sorted by key) serves them all;
    a row's segment ends at the next boundary, and the last one of a group, whose coverage is
    0, is dropped with the uncovered ones.
    """

    def edges(frame: pl.DataFrame, in_a: int, in_b: int) -> list[pl.DataFrame]:
        return [
            frame.select(
                *keys,
                pos=pl.col(col),
                da=pl.lit(sign * in_a, pl.Int8),
                db=pl.lit(sign * in_b, pl.Int8),
            )
            for col, sign in (("start", 1), ("end", -1))
        ]

    by_pos = pl.concat([*edges(a, 1, 0), *edges(b, 0, 1)])
    by_pos = by_pos.sort(sort_key(by_pos, keys, "pos"), maintain_order=True)  # see merge
    return by_pos.select(
        *keys,
        "pos",
        end=pl.col("pos").shift(-1),
        in_a=pl.col("da").cum_sum() > 0,
        in_b=pl.col("db").cum_sum() > 0,
    ).filter((pl.col("in_a") | pl.col("in_b")) & (pl.col("end") > pl.col("pos")))


def _combine(
    a: pl.DataFrame | pl.LazyFrame,
    b: pl.DataFrame | pl.LazyFrame,
    keys: Sequence[str],
    keep: pl.Expr,
) -> pl.DataFrame:
    keys = list(keys)
    segments = _segments(_merged(a, keys), _merged(b, keys), keys).filter(keep)
    # sorted and disjoint already: only touching segments are joined
    touching = (pl.col("pos") == pl.col("end").shift(1)).fill_null(False)
    if keys:
        touching = touching & same_group(keys, 1)
    runs = segments.with_columns(_new=~touching)
    ends = runs.filter(pl.col("_new").shift(-1).fill_null(True))["end"]
    return _remember(runs.filter("_new").select(*keys, start="pos").with_columns(ends), keys)


def intersect(
    a: pl.DataFrame | pl.LazyFrame, b: pl.DataFrame | pl.LazyFrame, keys: Sequence[str] = ()
) -> pl.DataFrame:
    """Where both interval sets are covered, per group (``*keys, start, end``, merged).

    Inputs have ``ts`` and ``dur`` (and the key columns), or are :func:`merge` output."""
    return _combine(a, b, keys, pl.col("in_a") & pl.col("in_b"))


def subtract(
    a: pl.DataFrame | pl.LazyFrame, b: pl.DataFrame | pl.LazyFrame, keys: Sequence[str] = ()
) -> pl.DataFrame:
    """Where ``a`` is covered and ``b`` is not, per group (``*keys, start, end``, merged)."""
    return _combine(a, b, keys, pl.col("in_a") & ~pl.col("in_b"))


def lengths(intervals: pl.DataFrame, keys: Sequence[str] = (), name: str = "ns") -> pl.DataFrame:
    """Summed ``end - start`` per group of ``keys`` of merged intervals (column ``name``)."""
    total = (pl.col("end") - pl.col("start")).sum().alias(name)
    if not keys:
        return intervals.select(total)
    return intervals.group_by(list(keys)).agg(total)


def covered(intervals: pl.DataFrame, merged: pl.DataFrame, keys: Sequence[str]) -> pl.Series:
    """Per interval of ``intervals`` (``*keys, start, end``), in its order: the ns of it that
    ``merged`` (disjoint ``*keys, start, end`` intervals, as :func:`merge` returns them)
    covers. The covered length up to a time t is the summed length of the merged intervals
    before the last one starting at or before t, plus that one's part before t: two as-of
    joins, O(n log n), no loop per interval."""
    keys = list(keys)
    span = pl.col("end") - pl.col("start")
    prefixed = (
        merged.sort(*keys, "start")
        .with_columns(_prefix=span.cum_sum().over(keys) - span)
        .rename({"start": "_cs", "end": "_ce"})
    )
    probe = intervals.select(*keys, "start", "end").with_row_index("_i")

    def until(at: str) -> pl.Series:
        found = probe.sort(at).join_asof(
            prefixed.sort("_cs"),
            left_on=at,
            right_on="_cs",
            by=keys or None,
            strategy="backward",
            check_sortedness=False,
        )
        upto = pl.col("_prefix") + pl.min_horizontal(
            pl.max_horizontal(pl.col(at) - pl.col("_cs"), 0), pl.col("_ce") - pl.col("_cs")
        )
        return found.sort("_i").select(upto.fill_null(0))["_prefix"]

    return until("end") - until("start")
