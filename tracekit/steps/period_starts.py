"""Where decode steps start, once the period of the kernels is known (:mod:`.period`).

Names whose occurrences are one period apart run once per step; they anchor the step
start, which lies a fixed number of rows away from one of them: where the device was idle
longest before a row (the host's scheduling and sampling between steps); when there is no
idle time (tokens launched back to back), right after the sampling kernels, else right
after the longest once-per-step kernel (the LM head). A copy of the sampled tokens back to
the host stays with the step that sampled them, and a step opens on the busiest stream.

Every occurrence of the anchor, shifted by that offset, starts a step; so does every
earlier place where the run of kernels that opens each step opens one (a prefill step).
Kernels before the first step (load, warm-up) are one window of their own, and so is a
last step cut short by the end of the trace; a segment shorter than half a period is not a
step and joins the one before it.
"""

from __future__ import annotations

import numpy as np
import polars as pl

IDLE_FACTOR = 3.0  # a boundary's idle gap must be this many times the usual one ...
MIN_IDLE_NS = 5_000  # ... and at least this long
MAX_SIGNATURE = 8  # the run of kernels that opens every step is at most this long
DEVICE_TO_HOST = r"DtoH|Device -> (Pinned|Pageable|Host)|DeviceToHost|DEVICE_TO_HOST|D2H"
MAX_REACH = 64  # a step starts at most this many rows from a once-per-step kernel


def step_starts(lane: pl.DataFrame, once: pl.DataFrame, period: int) -> tuple[np.ndarray, str]:
    """Row positions in ``lane`` (one rank's busiest device, ``code`` per kernel name) where
    steps start, and how the start was chosen; ``once`` are the name codes that run once per
    ``period``."""
    codes = lane["code"].to_numpy()
    starts, how = _boundary(lane, once, period)
    starts = _past_copies_out(lane, np.unique(starts[(starts >= 0) & (starts < codes.size)]))
    starts = _on_main_stream(lane, starts)
    starts = _merged_starts(np.unique(starts), codes.size, period)
    if starts.size:
        starts = _merged_starts(_earlier_starts(codes, starts), codes.size, period)
    return starts, how


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
    ranked = once.sort(["regular", "count", "code"], descending=[True, True, False])
    anchors = ranked["code"].head(16).to_list()
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


def _on_main_stream(lane: pl.DataFrame, starts: np.ndarray) -> np.ndarray:
    """Starts on a communication kernel of another stream moved to the next row of the
    busiest stream: the collective of the step before that begins a moment early on its own
    stream does not open a step (an input copy on a copy stream does)."""
    streams = lane["stream"].fill_null(-1).to_numpy()
    values, counts = np.unique(streams, return_counts=True)
    on_main = streams == values[np.argmax(counts)]
    comm = (lane["category"].cast(pl.String) == "comm").fill_null(False).to_numpy()
    movable = comm & ~on_main
    main = np.flatnonzero(on_main)
    at = np.searchsorted(main, starts)
    moved = np.where(at < main.size, main[np.minimum(at, main.size - 1)], -1)
    out = np.where(movable[starts], moved, starts)
    return out[out >= 0]


def _merged_starts(starts: np.ndarray, n: int, period: int) -> np.ndarray:
    """Step starts, dropping those whose segment is shorter than half a period (it joins
    the segment before it; a short first one joins the window before the first period). The
    last segment stays: when the trace ends inside a step it is a window of its own."""
    if not starts.size:
        return starts
    ends = np.append(starts[1:], n)
    keep = (ends - starts) * 2 >= period
    keep[-1] = True
    return starts[keep]
