"""Period finding: decode steps of a trace with no markers and no graph launches.

A decode step runs the same kernels in the same order every time: ``L`` layer blocks, then
the final norm, the LM head and sampling. On the busiest device the sequence of kernel names
(all streams, in time order) is therefore periodic, and one period is one step. Layer blocks
repeat too (with a shorter period), but only the step period also lines up the kernels that
run once per step, so it matches the sequence best; a multiple of the period matches as well
as the period and is not taken.

1. Candidate periods: for every kernel name seen at least three times, the median distance
   (in kernels) between its occurrences, when most distances are that median.
2. The period is the candidate whose shifted sequence matches the sequence best
   (``mean(seq[i] == seq[i + P])``), reduced to a divisor that matches as well.
3. Names whose occurrences are one period apart run once per step; they anchor the step
   start, which lies a fixed number of rows away from one of them: where the device was idle
   longest before a row (the host's scheduling and sampling between steps); when there is no
   idle time (tokens launched back to back), right after the sampling kernels, else right
   after the longest once-per-step kernel (the LM head). A copy of the sampled tokens back to
   the host stays with the step that sampled them.
4. Every occurrence of the anchor, shifted by that offset, starts a step; so does every
   earlier place where the run of kernels that opens each step opens one (a prefill step).
   Kernels before the first step (load, warm-up) are one window of their own; a segment
   shorter than half a period is not a step and joins the one before it.

Everything per kernel is numpy or polars; Python loops run over candidates and anchors.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from tracekit.steps.model import (
    OPEN_END,
    RANGE_SCHEMA,
    WORK_KINDS,
    closed,
    is_host,
    kind_is,
    numbered,
)

MIN_PERIODS = 3  # a period must repeat at least this often ...
MIN_PERIOD = 4  # ... and hold at least this many kernels
MIN_MATCH = 0.5  # the best shifted sequence must match at least this share of kernels
REGULAR = 0.6  # share of a name's distances equal to its median for the name to count
DIVISOR_SLACK = 0.02  # a divisor of the best period is taken when it matches within this
MAX_CANDIDATES = 48
IDLE_FACTOR = 3.0  # a boundary's idle gap must be this many times the usual one ...
MIN_IDLE_NS = 5_000  # ... and at least this long
MAX_SIGNATURE = 8  # the run of kernels that opens every step is at most this long
# backward and optimizer kernels: a training step, not a decode step
TRAINING = (
    r"(?i)backward|_bwd|bwd_|Grad(Input|Weight|GammaBeta)|grad_(input|weight)"
    r"|multi_tensor_apply|adam|sgd"
)
DEVICE_TO_HOST = r"DtoH|Device -> (Pinned|Pageable|Host)|DeviceToHost|DEVICE_TO_HOST|D2H"
MAX_REACH = 64  # a step starts at most this many rows from a once-per-step kernel
PRE_LABEL = "before the first period"


@dataclass
class Period:
    """The period found on one rank: boundaries (row positions in ``lane``), and why."""

    rank: int
    lane: pl.DataFrame  # ts, dur, name, corr, category, code, idle: the busiest device
    period: int
    match: float
    boundary_name: str
    how: str
    starts: np.ndarray  # positions in lane where a step starts (the pre window excluded)
    regular: float  # share of steps whose kernel count is the period (within tolerance)

    @property
    def looks_like_decode(self) -> bool:
        """Whether the steps run attention kernels and no backward or optimizer kernels: an
        LLM's forward, not a training loop or some other repeated work."""
        attention = (self.lane["category"].cast(pl.String) == "attention").any()
        names = self.lane["name"].cast(pl.String)
        return bool(attention and not names.str.contains(TRAINING).any())


def _tolerance(period: np.ndarray | float) -> np.ndarray | float:
    return np.maximum(2, 0.05 * np.asarray(period))


def candidates(codes: np.ndarray) -> pl.DataFrame:
    """Per name code seen >= 3 times: ``code, count, med`` (median distance between its
    occurrences) and ``regular`` (share of distances within tolerance of the median)."""
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
            regular=((pl.col("d") - med).abs() <= pl.max_horizontal(2.0, med * 0.05)).mean(),
        )
        .filter((pl.col("count") >= MIN_PERIODS) & (pl.col("med") >= MIN_PERIOD))
    )


def match_share(codes: np.ndarray, period: int) -> float:
    """Share of positions whose name equals the name ``period`` kernels later."""
    if period <= 0 or period >= codes.size:
        return 0.0
    return float(np.count_nonzero(codes[period:] == codes[:-period]) / (codes.size - period))


def best_period(codes: np.ndarray, names: pl.DataFrame) -> tuple[int, float] | None:
    """The step period of a code sequence and how well it matches, or None."""
    regular = names.filter(
        (pl.col("regular") >= REGULAR) & (pl.col("med") * MIN_PERIODS <= codes.size)
    )
    if not regular.height:
        return None
    support = regular.group_by("med").agg(n=pl.len()).sort(["n", "med"], descending=True)
    periods = support["med"].head(MAX_CANDIDATES).to_numpy()
    scores = {int(p): match_share(codes, int(p)) for p in periods}
    top = max(scores.values())
    if top < MIN_MATCH:
        return None
    best = min(p for p, s in scores.items() if s == top)
    for p in sorted(scores):  # the smallest divisor of the best that matches as well
        k = round(best / p)
        divides = p < best and k >= 2 and abs(best - k * p) <= _tolerance(best)
        if divides and scores[p] >= top - DIVISOR_SLACK:
            return p, scores[p]
    return best, top


def _lane(rows: pl.DataFrame) -> pl.DataFrame:
    """The work rows of one rank's busiest device, all streams in time order, with name codes
    and the device idle time before each row."""
    device = rows.group_by("device").len().sort(["len", "device"], descending=[True, False])
    lane = rows.filter(pl.col("device") == device["device"][0]).sort("ts", "stream")
    reach = (pl.col("ts") + pl.col("dur")).cum_max().shift(1)
    lane = lane.with_columns(idle=(pl.col("ts") - reach).clip(0).fill_null(0))
    if "category" not in lane.columns:
        lane = lane.with_columns(category=pl.lit(None, pl.String))
    return lane.with_columns(code=pl.col("name").cast(pl.String).fill_null("").rank("dense"))


def _positions(codes: np.ndarray, code: int) -> np.ndarray:
    return np.flatnonzero(codes == code)


def _around(positions: np.ndarray, reach: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Row positions at every offset in ``[-reach, reach]`` of each position (rows x offsets)
    and which of them lie inside the sequence."""
    offsets = np.arange(-reach, reach + 1)
    at = positions[:, None] + offsets[None, :]
    return np.clip(at, 0, n - 1), (at >= 0) & (at < n)


def _best_offset(score: np.ndarray, valid: np.ndarray) -> tuple[int, float]:
    """The offset column with the highest median score over the valid rows."""
    masked = np.where(valid, score, np.nan)
    with np.errstate(all="ignore"):
        medians = np.nanmedian(masked, axis=0) if masked.size else np.array([])
    medians = np.nan_to_num(medians, nan=-np.inf)
    column = int(np.argmax(medians))
    return column, float(medians[column])


def _boundary(lane: pl.DataFrame, once: pl.DataFrame, period: int) -> tuple[np.ndarray, str]:
    """Row positions where steps start, and how the start was chosen.

    Each once-per-step kernel is an anchor; the start is a fixed offset (within
    :data:`MAX_REACH` rows) from the anchor: after the longest device idle time, else right
    after the last sampling kernel, else right after the longest once-per-step kernel.
    """
    codes = lane["code"].to_numpy()
    idle = lane["idle"].to_numpy().astype(np.float64)
    n, reach = codes.size, min(period // 2, MAX_REACH)
    usual = float(np.median(idle)) if n else 0.0
    sampling = (lane["category"].cast(pl.String) == "sampling").fill_null(False).to_numpy()
    after_sampling = np.zeros(n, dtype=np.float64)
    after_sampling[1:] = sampling[:-1] & ~sampling[1:]
    anchors = once.sort(["regular", "count"], descending=True)["code"].head(16).to_list()
    best_idle = (-np.inf, None, 0)
    best_sampling = (-np.inf, None, 0)
    for code in anchors:
        positions = _positions(codes, code)
        at, valid = _around(positions, reach, n)
        column, value = _best_offset(idle[at], valid)
        if value > best_idle[0]:
            best_idle = (value, positions, column - reach)
        column, value = _best_offset(after_sampling[at], valid)
        if value > best_sampling[0]:
            best_sampling = (value, positions, column - reach)
    value, positions, offset = best_idle
    if positions is not None and value >= max(IDLE_FACTOR * usual, MIN_IDLE_NS):
        return positions + offset, "the longest device idle gap"
    value, positions, offset = best_sampling
    if positions is not None and value >= 1.0:
        return positions + offset, "the end of sampling"
    per_code = (
        lane.filter(pl.col("code").is_in(anchors))
        .group_by("code")
        .agg(dur=pl.col("dur").median())
        .sort(["dur", "code"], descending=[True, False])
    )
    longest = int(per_code["code"][0])
    return _positions(codes, longest) + 1, "the end of the longest once-per-step kernel"


def _signature(codes: np.ndarray, starts: np.ndarray, count: int) -> np.ndarray | None:
    """The shortest run of codes (at most :data:`MAX_SIGNATURE`) that opens the regular
    steps and occurs exactly once per step from the first step on, or None."""
    first, n = int(starts[0]), codes.size
    for k in range(1, MAX_SIGNATURE + 1):
        sig = codes[starts[starts + k <= n][:1] + np.arange(k)].ravel() if k else None
        if sig is None or sig.size < k:
            return None
        opens = starts[starts + k <= n]
        if not np.all(codes[opens[:, None] + np.arange(k)] == sig):
            continue
        hits = _occurrences(codes[first:], sig)
        if hits.size == min(count, opens.size):
            return sig
    return None


def _occurrences(codes: np.ndarray, sig: np.ndarray) -> np.ndarray:
    """Positions where the run ``sig`` starts in ``codes``."""
    k = sig.size
    if codes.size < k:
        return np.array([], dtype=np.int64)
    hit = np.ones(codes.size - k + 1, dtype=bool)
    for j in range(k):
        hit &= codes[j : codes.size - k + 1 + j] == sig[j]
    return np.flatnonzero(hit)


def _earlier_starts(codes: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """``starts`` with the steps before the first one prepended: where the run of kernels
    that opens every regular step opens a step earlier too (a prefill, or a step whose
    anchor lies before the trace began); load and warm-up work never opens that way."""
    sig = _signature(codes, starts, starts.size)
    if sig is None:
        return starts
    before = _occurrences(codes[: int(starts[0])], sig)
    return np.concatenate([before.astype(starts.dtype), starts])


def _past_copies_out(lane: pl.DataFrame, starts: np.ndarray) -> np.ndarray:
    """Starts moved past device-to-host copies: the copy of a step's sampled tokens belongs
    to that step, not to the next one."""
    out = lane["name"].cast(pl.String).str.contains(DEVICE_TO_HOST).fill_null(False).to_numpy()
    starts = starts.copy()
    for _ in range(4):
        inside = starts < out.size
        moving = np.zeros(starts.size, dtype=bool)
        moving[inside] = out[starts[inside]]
        if not moving.any():
            break
        starts[moving] += 1
    return starts[starts < out.size]


def _merged_starts(starts: np.ndarray, n: int, period: int) -> np.ndarray:
    """Step starts, dropping those whose segment is shorter than half a period (it joins
    the segment before it; a short first one joins the window before the first period)."""
    if not starts.size:
        return starts
    ends = np.append(starts[1:], n)
    return starts[(ends - starts) * 2 >= period]


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
    period, match = found
    once = names.filter(
        (pl.col("regular") >= REGULAR) & ((pl.col("med") - period).abs() <= _tolerance(period))
    )
    if not once.height:
        return None
    starts, how = _boundary(lane, once, period)
    starts = _past_copies_out(lane, np.unique(starts[(starts >= 0) & (starts < codes.size)]))
    starts = _merged_starts(np.unique(starts), codes.size, period)
    if starts.size:
        starts = _merged_starts(_earlier_starts(codes, starts), codes.size, period)
    if starts.size < 2:
        return None
    counts = np.diff(np.append(starts, codes.size))
    regular = float(np.mean(np.abs(counts[:-1] - period) <= _tolerance(period)))
    name = lane["name"].cast(pl.String)[int(starts[0])]
    return Period(rank, lane, period, match, str(name), how, starts, regular)


def by_period(df: pl.DataFrame) -> tuple[pl.DataFrame, bool, list[Period]]:
    """Step ranges from the period of every rank's kernels: ``(ranges, by_device_time,
    periods)``; empty ranges when no rank repeats. Ranges are host launch times when every
    boundary kernel has a launch call, else device times."""
    work = df.filter(kind_is(*WORK_KINDS) & ~is_host()).with_columns(
        pl.col("rank").fill_null(0).cast(pl.Int32)
    )
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
        ranges = pl.DataFrame(
            {"rank": p.rank, "start": start, "label": [f"period {i}" for i in range(len(start))]}
        ).with_columns(end=pl.col("start").shift(-1).fill_null(pl.lit(OPEN_END, pl.Int64)))
        if head > 0:  # the load / warm-up / prefill window before the first period
            pre_start = _first_ts(df, p.rank)
            pre = pl.DataFrame(
                {"rank": [p.rank], "start": [pre_start], "label": [PRE_LABEL],
                 "end": [ranges["start"][0]]}
            )  # fmt: skip
            ranges = pl.concat([pre.cast(ranges.schema), ranges])
        out.append(ranges.with_columns(pl.col("rank").cast(pl.Int32)))
    return closed(numbered(pl.concat(out)), df), not host_times, periods


def _first_ts(df: pl.DataFrame, rank: int) -> int:
    """The first timestamp of any row of ``rank`` (host or device)."""
    return int(df.filter(pl.col("rank").fill_null(0) == rank)["ts"].min())
