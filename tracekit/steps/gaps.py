"""Idle-gap splitting: device bursts separated by long idle gaps, each a step.

Only right where the bursts are real (a benchmark that sleeps between requests, one step per
burst): at least :data:`MIN_BURSTS` bursts on a rank, most of them (:data:`ALIKE`) holding
about the same number of device rows (within :data:`ROWS_SPREAD` of the median, which is at
least :data:`MIN_ROWS`). Uploads, set-up kernels and a cut export make bursts of every size:
those are no steps. The finder warns when the split leaves one window holding most of the
device time.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from tracekit.intervals import merge
from tracekit.steps.model import WORK_KINDS, empty_ranges, kind_is, numbered
from tracekit.steps.placement import step_at

MIN_GAP_NS = 20_000  # the smallest idle gap the gaps method takes for a step boundary
MIN_BURSTS = 3
MIN_ROWS = 2
ROWS_SPREAD = 0.25
ALIKE = 0.6


def cut_size(gaps: np.ndarray, floor: int) -> int:
    """The idle gap from which on a gap separates steps: Otsu's split of the log sizes of the
    gaps of at least ``floor`` ns into a between-step and a within-step class, so that one
    outlier (a warm-up kernel long before the loop) does not hide the regular step gaps."""
    big = np.sort(gaps[gaps >= floor]).astype(np.float64)
    if big.size < 3:
        return floor
    logs = np.log(big)
    n, split = logs.size, np.arange(1, logs.size)
    below = np.cumsum(logs)[:-1]
    low, high = below / split, (logs.sum() - below) / (n - split)
    score = (split / n) * (1 - split / n) * (high - low) ** 2
    best = int(np.argmax(score))
    if high[best] - low[best] < np.log(2):  # one class: every gap above the floor is a cut
        return floor
    return int(big[best + 1])


def by_gaps(df: pl.DataFrame, min_gap_ns: int = MIN_GAP_NS) -> pl.DataFrame:
    """Device-time ranges of the bursts of every rank; empty unless the bursts are real."""
    work = df.filter(kind_is(*WORK_KINDS))
    if work.height == 0:
        return empty_ranges()
    busy = merge(work.with_columns(pl.col("rank").fill_null(0).cast(pl.Int32)), ["rank"])
    gap = pl.col("start") - pl.col("end").shift(1).over("rank")
    busy = busy.with_columns(gap=gap)
    cuts = pl.DataFrame(
        [
            (rank, cut_size(group["gap"].drop_nulls().to_numpy(), min_gap_ns))
            for (rank,), group in busy.group_by("rank")
        ],
        schema={"rank": pl.Int32, "cut": pl.Int64},
        orient="row",
    )
    bursts = busy.join(cuts, on="rank").with_columns(
        new=pl.col("gap").is_null() | (pl.col("gap") >= pl.col("cut"))
    )
    bursts = bursts.with_columns(burst=pl.col("new").cum_sum().over("rank"))
    ranges = bursts.group_by("rank", "burst").agg(
        start=pl.col("start").min(), end=pl.col("end").max()
    )
    per_rank = ranges.group_by("rank").len()["len"].max()
    if per_rank < MIN_BURSTS or not _alike(work, ranges.with_columns(step=pl.col("burst"))):
        return empty_ranges()
    ranges = ranges.sort("rank", "start").with_columns(
        end=pl.col("start").shift(-1).over("rank").fill_null(pl.col("end")),
        label=pl.format("burst {}", pl.col("burst")),
    )
    return numbered(ranges)


def _alike(work: pl.DataFrame, bursts: pl.DataFrame) -> bool:
    """Whether the bursts of some rank (``rank, step, start``) hold about the same number of
    device rows."""
    starts = work.select(pl.col("rank").fill_null(0).cast(pl.Int32), "ts")
    held = starts.select("rank", burst=step_at(starts, "ts", bursts, ["rank"], ends=False))
    rows = held.drop_nulls("burst").group_by("rank", "burst").agg(n=pl.len())
    med = pl.col("n").median().over("rank")
    near = ((pl.col("n") - med).abs() <= ROWS_SPREAD * med).mean().over("rank")
    per = rows.with_columns(med=med, near=near, count=pl.len().over("rank"))
    good = per.filter(
        (pl.col("count") >= MIN_BURSTS) & (pl.col("med") >= MIN_ROWS) & (pl.col("near") >= ALIKE)
    )
    return good.height > 0
