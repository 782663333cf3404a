"""Period finding: decode steps of a trace with no markers and no graph launches.

A decode step runs the same kernels in much the same order every time: ``L`` layer blocks,
then the final norm, the LM head and sampling. On the busiest device the kernel names (all
streams, in time order) therefore recur with the step's period, and one period is one step.
Layer blocks recur too, with a shorter period; but only a step holds every kernel name of the
decode, the once-per-step ones (embedding, LM head, sampling) included.

1. Candidate periods: for every kernel name seen at least twice, the median distance (in
   kernels) between its occurrences, when most distances are within 10 % of it (so MoE steps
   that run a few more kernels than others still count).
2. The period is the smallest candidate whose segments (from one occurrence of its name to
   the next) each hold nearly every recurring kernel name at much the same place: at least
   90 % of the names that recur a period apart or more run in three quarters of the segments,
   within a tenth of a segment of their usual place. A layer's segments miss the
   once-per-step names; two steps' segments hold them too, but are not the smallest; a
   prefill's own kernels, all within one step, do not count; random names fill long
   segments, but not in order.
3. Where in each period a step starts, and the steps before the first period:
   :mod:`tracekit.steps.period_starts`.

Everything per kernel is numpy or polars; Python loops run over candidates and anchors.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from tracekit.steps.model import OPEN_END, RANGE_SCHEMA, closed, kind_is, numbered
from tracekit.steps.period_starts import step_starts
from tracekit.steps.placement import work_rows

MIN_PERIODS = 2  # a period must repeat at least this often ...
MIN_PERIOD = 4  # ... and hold at least this many kernels
REGULAR = 0.6  # share of a name's distances near its median for the name to count
SPREAD = 0.10  # "near": within this share of the median (at least 2 kernels)
COVER = 0.9  # share of recurring names that a step period's segments hold ...
MOST = 0.75  # ... each in at least this share of the segments ...
PLACE = 0.1  # ... at much the same place: within this share of the segment's length
MAX_CANDIDATES = 48
PRE_LABEL = "before the first period"
POST_LABEL = "after the last period"  # a last period cut short by the end of the trace
NOT_STEPS = (PRE_LABEL, POST_LABEL)  # windows of the period method that are not decode steps


@dataclass
class Period:
    """The period found on one rank: boundaries (row positions in ``lane``), and why."""

    rank: int
    lane: pl.DataFrame  # ts, dur, name, corr, category, code, idle: the busiest device
    period: int
    cover: float  # share of the recurring kernel names that most periods hold
    boundary_name: str
    how: str
    starts: np.ndarray  # positions in lane where a step starts (the pre window excluded)
    regular: float  # share of steps whose kernel count is the period (within tolerance)
    cut: bool = False  # the last period is cut short by the end of the trace


def _tolerance(period: np.ndarray | float) -> np.ndarray | float:
    return np.maximum(2, SPREAD * np.asarray(period))


def candidates(codes: np.ndarray) -> pl.DataFrame:
    """Per name code seen at least :data:`MIN_PERIODS` times: ``code, count, med`` (median
    distance between its occurrences) and ``regular`` (share of distances within tolerance
    of the median)."""
    order = np.argsort(codes, kind="stable")
    by_code = codes[order]
    same = by_code[1:] == by_code[:-1]
    frame = pl.DataFrame({"code": by_code[1:][same], "d": np.diff(order)[same]})
    med = pl.col("d").median()
    return (
        frame.group_by("code")
        .agg(
            count=pl.len() + 1,
            med=med.round(0).cast(pl.Int64),
            regular=((pl.col("d") - med).abs() <= pl.max_horizontal(2.0, med * SPREAD)).mean(),
        )
        .filter((pl.col("count") >= MIN_PERIODS) & (pl.col("med") >= MIN_PERIOD))
    )


def name_cover(codes: np.ndarray, anchors: np.ndarray, spread: np.ndarray) -> float:
    """How well the segments between anchors look like one step each: the share of the names
    that recur a period apart or more (``spread``: per code, its last position minus its
    first) that run in most segments (:data:`MOST` of them) at much the same place in each
    (their first run within :data:`PLACE` of the segment's length of their usual place);
    with two segments, the share of their names that both hold there. Segments run from one
    anchor to the next; the rest after the last anchor (maybe cut short by the end of the
    trace) counts only when there are fewer than two others. Random names fill long segments
    too, but not in the same order."""
    end = int(anchors[-1]) if anchors.size >= 3 else codes.size
    first = int(anchors[0])
    positions = np.arange(first, end)
    span = codes[first:end].astype(np.int64)
    segment = np.searchsorted(anchors, positions, side="right") - 1
    segments = int(segment.max()) + 1 if segment.size else 0
    if segments < 2:
        return 0.0
    bounds = np.append(anchors[:segments], end)
    place = (positions - bounds[segment]) / np.maximum(np.diff(bounds)[segment], 1)
    width = spread.size
    _, at = np.unique(segment.astype(np.int64) * width + span, return_index=True)
    runs = pl.DataFrame({"code": span[at], "place": place[at]})
    per = runs.group_by("code").agg(
        n=pl.len(), off=(pl.col("place") - pl.col("place").median()).abs().median()
    )
    steady = per.filter(pl.col("off") <= PLACE)
    if segments == 2:  # two periods: they hold the same names at the same places
        return steady.filter(pl.col("n") == 2).height / max(per.height, 1)
    period = int(np.median(np.diff(anchors)))
    recurring = np.count_nonzero(spread >= period)  # not a prefill's kernels, in one step
    wide = spread[steady["code"].to_numpy()] >= period
    common = np.count_nonzero((steady["n"].to_numpy() >= np.ceil(MOST * segments)) & wide)
    return common / recurring if recurring >= 2 else 0.0


def spreads(codes: np.ndarray) -> np.ndarray:
    """Per name code, the distance from its first occurrence to its last."""
    width = int(codes.max()) + 1
    positions = np.arange(codes.size)
    first = np.full(width, codes.size)
    last = np.full(width, -1)
    np.minimum.at(first, codes, positions)
    np.maximum.at(last, codes, positions)
    return np.maximum(last - first, 0)


def best_period(codes: np.ndarray, names: pl.DataFrame) -> tuple[int, float] | None:
    """The step period of a code sequence and its name cover, or None: the smallest candidate
    whose segments hold nearly every recurring name (:func:`name_cover`)."""
    regular = names.filter(  # names that recur through most of the sequence, not in a burst
        (pl.col("regular") >= REGULAR)
        & (pl.col("med") * MIN_PERIODS <= codes.size)
        & (pl.col("med") * pl.col("count") * 2 >= codes.size)
    )
    if not regular.height:
        return None
    anchors = (  # per candidate period, the most regular and frequent name at it
        regular.sort(["regular", "count", "code"], descending=[True, True, False])
        .unique(subset="med", keep="first")
        .sort("med", "code")
        .head(MAX_CANDIDATES)
    )
    spread = spreads(codes)
    for period, code in anchors.select("med", "code").iter_rows():
        cover = name_cover(codes, np.flatnonzero(codes == code), spread)
        if cover >= COVER:
            return int(period), cover
    return None


def _lane(rows: pl.DataFrame) -> pl.DataFrame:
    """The work rows of one rank's busiest device, all streams in time order, with name codes
    and the device idle time before each row."""
    device = rows.group_by("device").len().sort(["len", "device"], descending=[True, False])
    lane = rows.filter(pl.col("device") == device["device"][0])
    lane = lane.sort("ts", "stream", maintain_order=True)
    reach = (pl.col("ts") + pl.col("dur")).cum_max().shift(1)
    lane = lane.with_columns(idle=(pl.col("ts") - reach).clip(0).fill_null(0))
    if "category" not in lane.columns:
        lane = lane.with_columns(category=pl.lit(None, pl.String))
    return lane.with_columns(code=pl.col("name").cast(pl.String).fill_null("").rank("dense"))


def find_period(rows: pl.DataFrame, rank: int) -> Period | None:
    """The period of one rank's work rows (``ts, dur, name, device, stream, corr,
    category``), or None when the kernels do not repeat."""
    if rows.height < 2 * MIN_PERIODS:
        return None
    lane = _lane(rows)
    codes = lane["code"].to_numpy()
    names = candidates(codes)
    found = best_period(codes, names)
    if found is None:
        return None
    period, cover = found
    once = names.filter(
        (pl.col("regular") >= REGULAR) & ((pl.col("med") - period).abs() <= _tolerance(period))
    )
    if not once.height:
        return None
    starts, how = step_starts(lane, once, period)
    if starts.size < 2:
        return None
    counts = np.diff(np.append(starts, codes.size))
    regular = float(np.mean(np.abs(counts[:-1] - period) <= _tolerance(period)))
    cut = bool(period - counts[-1] > _tolerance(period))  # the trace ends inside a step
    name = lane["name"].cast(pl.String)[int(starts[0])]
    return Period(rank, lane, period, cover, str(name), how, starts, regular, cut)


def by_period(df: pl.DataFrame) -> tuple[pl.DataFrame, bool, list[Period]]:
    """Step ranges from the period of every rank's kernels: ``(ranges, by_device_time,
    periods)``; empty ranges when no rank repeats. Ranges are host launch times when every
    boundary kernel has a launch call, else device times."""
    work = work_rows(df).with_columns(pl.col("rank").fill_null(0).cast(pl.Int32))
    periods = []
    for (rank,), rows in work.group_by("rank", maintain_order=True):
        found = find_period(rows, int(rank))
        if found is not None:
            periods.append(found)
    if not periods:
        return pl.DataFrame(schema=RANGE_SCHEMA), True, []
    launches = (
        df.filter(kind_is("api") & pl.col("corr").is_not_null())
        .select(pl.col("rank").fill_null(0).cast(pl.Int32), "corr", launch=pl.col("ts"))
        .unique(subset=["rank", "corr"], keep="first")
    )
    frames, host_times = [], True
    for p in periods:
        bounds = (
            p.lane[p.starts.tolist()]
            .select("ts", "corr", "name")
            .with_columns(rank=pl.lit(p.rank, pl.Int32))
        )
        bounds = bounds.join(launches, on=["rank", "corr"], how="left", maintain_order="left")
        host_times = host_times and bounds["launch"].null_count() == 0
        frames.append((p, bounds))
    out = []
    for p, bounds in frames:
        start = bounds["launch"] if host_times else bounds["ts"]
        head = int(p.starts[0])
        labels = [f"period {i}" for i in range(len(start))]
        if p.cut:
            labels[-1] = POST_LABEL
        ranges = pl.DataFrame({"rank": p.rank, "start": start, "label": labels}).with_columns(
            end=pl.col("start").shift(-1).fill_null(pl.lit(OPEN_END, pl.Int64))
        )
        if head > 0:  # the load / warm-up / prefill window before the first period
            pre_start = _first_ts(df, p.rank)
            pre = pl.DataFrame(
                {
                    "rank": [p.rank],
                    "start": [pre_start],
                    "label": [PRE_LABEL],
                    "end": [ranges["start"][0]],
                }
            )
            ranges = pl.concat([pre.cast(ranges.schema), ranges])
        out.append(ranges.with_columns(pl.col("rank").cast(pl.Int32)))
    return closed(numbered(pl.concat(out)), df), not host_times, periods


def _first_ts(df: pl.DataFrame, rank: int) -> int:
    """The first timestamp of any row of ``rank`` (host or device)."""
    return int(df.filter(pl.col("rank").fill_null(0) == rank)["ts"].min())
