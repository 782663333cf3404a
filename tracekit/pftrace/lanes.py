"""Slice nesting for Perfetto tracks, vectorised.

A Perfetto track is a stack: ``SLICE_END`` closes the most recent open slice. Rows that
overlap without nesting (a range that outlives its parent, two kernels whose timestamps
collide) cannot share a track, so rows are spread over *lanes* of their track until every
lane nests. The same begin/end ordering and stack matching serve the writer (to check a
lane) and the reader (to pair a file's begins and ends).
"""

from __future__ import annotations

import numpy as np


def slice_ranks(key: np.ndarray, ts: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Position of each row in (key, start, longest first, row) order."""
    order = np.lexsort((-end, ts, key))
    rank = np.empty(len(key), dtype=np.int64)
    rank[order] = np.arange(len(key), dtype=np.int64)
    return rank


def event_order(
    time: np.ndarray, is_end: np.ndarray, zero: np.ndarray, rank: np.ndarray
) -> np.ndarray:
    """Order of begin/end/instant events so that every track replays as a stack.

    At one instant, ends come before begins, inner ends before outer ones, outer begins
    before inner ones, and a zero-length slice ends right after it begins.
    """
    phase = np.where(is_end & ~zero, 0, 1)
    sub = np.where(is_end, np.where(zero, 2 * rank + 1, -2 * rank), 2 * rank)
    return np.lexsort((sub, phase, time))


def match_stack(key: np.ndarray, is_begin: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """Pair begin and end events that a per-track stack would pair.

    ``key`` and ``is_begin`` are in replay order (grouped by track or not). Returns the
    positions of matched begins and their ends, and the number of ends that had nothing
    open (they are ignored, as Perfetto does).
    """
    n = len(key)
    if not n:
        empty = np.empty(0, dtype=np.int64)
        return empty, empty, 0
    order = np.argsort(key, kind="stable")
    k, beg = key[order], is_begin[order]
    first = np.ones(n, dtype=bool)
    first[1:] = k[1:] != k[:-1]
    seg = np.cumsum(first) - 1
    step = np.where(beg, 1, -1)
    depth = np.cumsum(step)
    depth -= (depth - step)[first][seg]  # per-track running depth
    span = 2 * n + 2
    low = np.minimum.accumulate(depth - seg * span) + seg * span  # per-track running minimum
    floor = np.minimum(low, 0)
    prev_floor = np.where(first, 0, np.roll(floor, 1))
    orphan = ~beg & (floor < prev_floor)
    level = depth - floor + np.where(beg, 0, 1)
    keep = np.flatnonzero(~orphan)
    k2, lv, b2 = k[keep], level[keep], beg[keep]
    grouped = np.lexsort((keep, lv, k2))
    gk, gl, gb = k2[grouped], lv[grouped], b2[grouped]
    nxt_same = np.zeros(len(grouped), dtype=bool)
    nxt_same[:-1] = (gk[1:] == gk[:-1]) & (gl[1:] == gl[:-1])
    pair = np.flatnonzero(gb & nxt_same & np.append(~gb[1:], False))
    begins = order[keep[grouped[pair]]]
    ends = order[keep[grouped[pair + 1]]]
    return begins, ends, int(orphan.sum())


def _misnested(key: np.ndarray, ts: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Rows that a stack replay of their track would not reproduce (the later-started one)."""
    m = len(key)
    rank = slice_ranks(key, ts, end)
    zero = end == ts
    is_end = np.repeat([False, True], m)
    order = event_order(
        np.concatenate([ts, end]), is_end, np.concatenate([zero, zero]), np.tile(rank, 2)
    )
    rows = np.tile(np.arange(m), 2)[order]
    begins, ends, _ = match_stack(np.tile(key, 2)[order], ~is_end[order])
    rb, re = rows[begins], rows[ends]
    wrong = rb != re
    later = np.where(rank[rb] > rank[re], rb, re)[wrong]
    bad = np.zeros(m, dtype=bool)
    bad[later] = True
    return bad


def clusters(track: np.ndarray, ts: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Per row, a number shared by the rows of its track that overlap it, transitively."""
    n = len(track)
    if not n:
        return np.empty(0, dtype=np.int64)
    order = np.lexsort((-end, ts, track))
    t, s, e = track[order], ts[order], end[order]
    values, rank = np.unique(e, return_inverse=True)
    span = len(values) + 1
    reach = values[np.maximum.accumulate(t * span + rank.ravel()) - t * span]  # running max end
    first = np.ones(n, dtype=bool)
    first[1:] = t[1:] != t[:-1]
    starts = first.copy()
    starts[1:] |= s[1:] >= reach[:-1]
    out = np.empty(n, dtype=np.int64)
    out[order] = np.cumsum(starts) - 1
    return out


def assign_lanes(
    track: np.ndarray, ts: np.ndarray, end: np.ndarray, stacked: np.ndarray
) -> np.ndarray:
    """Lane of each row within its track: 0 unless it overlaps rows it does not nest with.

    Rows that overlap nothing keep lane 0 at no cost; groups of overlapping rows are checked
    with a vectorised stack replay, and only the groups that do not replay correctly are
    spread over lanes, greedily, row by row (``stacked`` False: instants, never moved).
    """
    lane = np.zeros(len(track), dtype=np.int64)
    idx = np.flatnonzero(stacked)
    group = clusters(track[idx], ts[idx], end[idx])
    sizes = np.bincount(group) if len(group) else np.zeros(0, dtype=np.int64)
    busy = sizes[group] > 1
    idx, group = idx[busy], group[busy]
    if not len(idx):
        return lane
    bad = _misnested(group, ts[idx], end[idx])
    redo = np.isin(group, np.unique(group[bad]))
    _greedy(idx[redo], group[redo], ts, end, lane)
    return lane


def _greedy(
    rows: np.ndarray, group: np.ndarray, ts: np.ndarray, end: np.ndarray, lane: np.ndarray
) -> None:
    """First-fit lanes, each a stack, for the rows of groups that do not nest."""
    order = np.lexsort((-end[rows], ts[rows], group))
    stacks: list[list[int]] = []
    current = -1
    for row, g in zip(rows[order].tolist(), group[order].tolist()):
        if g != current:
            stacks, current = [], g
        start, stop = int(ts[row]), int(end[row])
        for number, stack in enumerate(stacks):
            while stack and stack[-1] <= start:
                stack.pop()
            if not stack or stop <= stack[-1]:
                stack.append(stop)
                lane[row] = number
                break
        else:
            stacks.append([stop])
            lane[row] = len(stacks) - 1
