"""Graph replays: CUDA/HIP graph (and Ascend model) launches, grouped into steps.

A step replayed as one graph is one launch per step. Engines that capture a step piecewise
(vLLM v1's piecewise CUDA/HIP graphs: one graph per layer piece, attention eager between them)
launch dozens of graphs per step; those belong together. Launches are grouped

1. by host synchronisation: a decode step ends with the host waiting for its sampled tokens
   (a blocking copy or a stream/event/device synchronise); launches with no such wait between
   them are one step, which starts right after the wait that ended the step before;
2. else by the host time between launches, when it falls into two classes (Otsu's split of
   the log intervals, the long ones at least 3x the short ones) and the groups it makes all
   hold the same number of launches (requests of different lengths would not);
3. else one launch per step.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from tracekit.steps.model import OPEN_END, closed, empty_ranges, is_host, kind_is, named, numbered

GRAPH_LAUNCHES = (
    r"^(cudaGraphLaunch|cuGraphLaunch|hipGraphLaunch|aclmdlRIExecute|aclmdlExecute|aclgraph"
    r"|AscendCL@aclmdlRIExecute|AscendCL@aclmdlExecute)"
)
HOST_WAITS = (
    r"(Stream|Device|Event|Ctx)Synchroni[sz]e|^(cuda|hip)Memcpy(_v\d+)?$|^cuMemcpyDtoH"
    r"|^(cuda|hip)MemcpyDtoH$|aclrtSynchroni[sz]e"
)
SEPARATION = np.log(3.0)  # long intervals must be at least 3x the short ones (log scale)
REGULAR = 0.8  # share of groups holding the modal number of launches


@dataclass
class GraphSteps:
    """Graph-launch step ranges and how they were grouped."""

    ranges: pl.DataFrame
    how: str  # "one launch per step", "grouped by host synchronisation", "grouped by host gaps"
    per_step: float  # median launches per step
    regular: float  # share of steps with the modal number of launches


def _two_classes(intervals: np.ndarray) -> float | None:
    """The interval from which on a gap separates groups, or None when one class."""
    if intervals.size < 3:
        return None
    logs = np.log(np.sort(np.maximum(intervals, 1)).astype(np.float64))
    n, split = logs.size, np.arange(1, logs.size)
    below = np.cumsum(logs)[:-1]
    low, high = below / split, (logs.sum() - below) / (n - split)
    score = (split / n) * (1 - split / n) * (high - low) ** 2
    best = int(np.argmax(score))
    if high[best] - low[best] < SEPARATION:
        return None
    return float(np.exp(logs[best + 1]))


def _regular(sizes: np.ndarray) -> float:
    _, counts = np.unique(sizes, return_counts=True)
    return float(counts.max() / sizes.size) if sizes.size else 0.0


def _group_one_rank(
    launch: np.ndarray, wait_start: np.ndarray, wait_end: np.ndarray
) -> tuple[np.ndarray, np.ndarray, str]:
    """``(first launch index of each group, group start time, how)`` for one rank."""
    n = launch.size
    every = np.arange(n)
    if wait_start.size:
        # waits that start between launch i and launch i + 1
        after = np.searchsorted(wait_start, launch, side="left")
        between = after[1:] > after[:-1]
        if between.all():
            return every, launch, "one launch per step"
        if between.any():
            firsts = np.concatenate([[0], np.flatnonzero(between) + 1])
            sizes = np.diff(np.append(firsts, n))
            # a later step starts where the wait that ended the step before ended
            starts = launch[firsts].copy()
            last_wait = after[firsts[1:]] - 1
            starts[1:] = np.minimum(wait_end[last_wait], starts[1:])
            # the first step opens as far before its first launch as the others do
            lead = int(np.median(launch[firsts[1:]] - starts[1:]))
            before = after[0] - 1
            floor = wait_end[before] if before >= 0 else starts[0] - lead
            starts[0] = max(starts[0] - lead, min(floor, starts[0]))
            if _regular(sizes[:-1] if sizes.size > 2 else sizes) >= REGULAR:
                return firsts, starts, "grouped by host synchronisation"
    cut = _two_classes(np.diff(launch))
    if cut is not None:
        new = np.concatenate([[True], np.diff(launch) >= cut])
        firsts = np.flatnonzero(new)
        sizes = np.diff(np.append(firsts, n))
        if sizes.max() > 1 and _regular(sizes) >= REGULAR:
            return firsts, launch[firsts], "grouped by host gaps"
    return every, launch, "one launch per step"


def _rows(api: pl.DataFrame) -> pl.DataFrame:
    return api.select(
        pl.col("rank").fill_null(0).cast(pl.Int32),
        name=pl.col("name").cast(pl.String),
        start=pl.col("ts"),
        end=pl.col("ts") + pl.col("dur"),
    ).sort("rank", "start")


def by_graph(df: pl.DataFrame) -> GraphSteps | None:
    """Steps from graph launches (host ranges), or None when fewer than two launches."""
    api = df.filter(kind_is("api") & is_host())
    launches = _rows(api.filter(named(api, GRAPH_LAUNCHES)))
    if launches.height < 2:
        return None
    waits = _rows(api.filter(named(api, HOST_WAITS)))
    frames, hows, sizes_all = [], [], []
    for (rank,), rows in launches.group_by("rank", maintain_order=True):
        mine = waits.filter(pl.col("rank") == rank)
        launch = rows["start"].to_numpy()
        firsts, starts, how = _group_one_rank(
            launch, mine["start"].to_numpy(), mine["end"].to_numpy()
        )
        sizes_all.append(np.diff(np.append(firsts, launch.size)))
        hows.append(how)
        names = rows["name"].to_numpy()[firsts]
        frames.append(
            pl.DataFrame({"rank": rank, "start": starts, "label": names}).with_columns(
                pl.col("rank").cast(pl.Int32),
                end=pl.col("start").shift(-1).fill_null(pl.lit(OPEN_END, pl.Int64)),
            )
        )
    if sum(len(f) for f in frames) < 2:
        return None
    sizes = np.concatenate(sizes_all)
    how = max(set(hows), key=hows.count)
    ranges = closed(numbered(pl.concat(frames)), df) if frames else empty_ranges()
    return GraphSteps(ranges, how, float(np.median(sizes)), _regular(sizes))
