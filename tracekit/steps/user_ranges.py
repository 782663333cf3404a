"""The user's own ranges as steps: top-level host ranges that repeat and hold the device time.

A benchmark script or an engineer wraps each unit of work in a range of their own (NVTX,
ROCTx, mstx, ``record_function``): ``prefill_run``, ``iter 3``, ``generate``. Where no
profiler or engine marker cuts the trace, those ranges are the steps the author meant.

Candidates are host ranges (not those a framework draws by itself, :data:`FRAMEWORK_RANGES`)
grouped by their name with the digits taken out (``run 3`` and
``run 12`` are one group), each group reduced to its outermost ranges. A group is a step
candidate when it repeats (:data:`MIN_REPEATS` ranges on some rank) and the device rows it
holds — by their launch call's time where a launch links them, else by their own start —
make up most of the device busy time (:data:`MIN_COVER`). Groups are ranked by that cover,
then by regularity (the spread of their lengths); of groups that cover about the same (within
:data:`COVER_TIE`), the one with the fewest ranges wins (a run, not the layers inside it).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from tracekit.steps.model import WORK_KINDS, is_host, kind_is, named, numbered, outermost
from tracekit.steps.placement import launch_times

MIN_REPEATS = 2  # ranges of one group on one rank for the group to be steps
MIN_COVER = 0.5  # share of the device busy time their rows must hold
COVER_TIE = 0.05  # covers this close count as equal: the group of fewer ranges wins
MAX_GROUPS = 64  # the most repeated groups looked at (by their count)
# Ranges a framework or library draws by itself, not the user: PyTorch's operators, autograd,
# optimizer, FSDP/DDP and c10d annotations, NCCL/RCCL/HCCL NVTX ranges, CUDA/HIP/ACL API
# ranges of nsys' --cuda-trace NVTX, torch.compile regions.
FRAMEWORK_RANGES = (
    r"^(aten::|autograd::|c10d::|nccl|rccl|hccl|hcom|cuda|hip|acl|cu[A-Z]|record_param_comms"
    r"|Optimizer\.|FullyShardedDataParallel|FSDP::|DistributedDataParallel|## |Torch-Compiled"
    r"|CompiledFunction|ProfilerStep#|torch/|enumerate\(DataLoader\))"
)


@dataclass
class RangeSteps:
    """The user ranges chosen as steps, with the numbers that chose them."""

    ranges: pl.DataFrame  # RANGE_SCHEMA
    group: str  # the name with digits taken out, e.g. "run #"
    example: str  # one range's name
    cover: float  # share of the device busy time held by rows placed in the ranges
    spread: float  # (p90 - p10) / median of the ranges' lengths
    per_rank: int  # the most ranges on one rank


def _group(name: pl.Expr) -> pl.Expr:
    return name.str.replace_all(r"\d+", "#")


def _row_times(df: pl.DataFrame, work: pl.DataFrame) -> pl.DataFrame:
    """Per device work row: ``rank``, the time that places it (its launch call's start where
    one links it, else its own) and its ``dur``."""
    work = work.with_columns(pl.col("rank").fill_null(0).cast(pl.Int32))
    launched = launch_times(df, work)["_launch"]
    return work.select("rank", at=pl.coalesce(launched, pl.col("ts")), dur=pl.col("dur"))


class _Times:
    """The rows' placing times sorted per rank with the running sum of their ``dur``: the
    busy time inside any set of disjoint ranges in O(ranges · log rows)."""

    def __init__(self, times: pl.DataFrame) -> None:
        self.total = int(times["dur"].sum() or 0)
        self.per_rank: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        for (rank,), part in times.sort("rank", "at").group_by("rank", maintain_order=True):
            at = part["at"].to_numpy()
            summed = np.concatenate(([0], np.cumsum(part["dur"].to_numpy(), dtype=np.int64)))
            self.per_rank[int(rank)] = (at, summed)

    def cover(self, ranges: pl.DataFrame) -> float:
        """Share of the busy time whose placing time lies in one of ``ranges`` (disjoint
        per rank)."""
        if self.total <= 0:
            return 0.0
        held = 0
        for (rank,), part in ranges.group_by("rank"):
            if int(rank) not in self.per_rank:
                continue
            at, summed = self.per_rank[int(rank)]
            lo = np.searchsorted(at, part["start"].to_numpy(), side="left")
            hi = np.searchsorted(at, part["end"].to_numpy(), side="left")
            held += int((summed[hi] - summed[lo]).sum())
        return held / self.total


def _spread(lengths: pl.Series) -> float:
    median = float(lengths.median() or 0)
    if median <= 0:
        return float("inf")
    return float(lengths.quantile(0.9) - lengths.quantile(0.1)) / median


def by_user_ranges(df: pl.DataFrame) -> RangeSteps | None:
    """The group of the user's host ranges that best serves as steps, or None."""
    # only the columns read are gathered: a trace may hold millions of ranges and device rows
    wanted = kind_is("range") & is_host() & (pl.col("dur") > 0) & ~named(df, FRAMEWORK_RANGES)
    host = df.lazy().filter(wanted).select("rank", "name", "ts", "dur").collect()
    work = df.lazy().filter(kind_is(*WORK_KINDS)).select("rank", "corr", "ts", "dur").collect()
    if not host.height or not work.height:
        return None
    ranges = host.select(
        pl.col("rank").fill_null(0).cast(pl.Int32),
        label=pl.col("name").cast(pl.String),
        start=pl.col("ts"),
        end=pl.col("ts") + pl.col("dur"),
    )
    groups = ranges.select("label").unique().with_columns(group=_group(pl.col("label")))
    ranges = ranges.join(groups, on="label", how="left", maintain_order="left")
    counts = ranges.group_by("rank", "group").len().group_by("group").agg(n=pl.col("len").max())
    repeated = (
        counts.filter(pl.col("n") >= MIN_REPEATS)
        .sort("n", "group", descending=[True, False])
        .head(MAX_GROUPS)
    )
    if not repeated.height:
        return None
    times = _Times(_row_times(df, work))
    best: RangeSteps | None = None
    for group in repeated["group"].to_list():
        mine = outermost(ranges.filter(pl.col("group") == group).drop("group"))
        per_rank = int(mine.group_by("rank").len()["len"].max() or 0)
        if per_rank < MIN_REPEATS:
            continue
        cover = times.cover(mine)
        if cover < MIN_COVER:
            continue
        found = RangeSteps(
            numbered(mine),
            group,
            str(mine["label"][0]),
            cover,
            _spread(mine["end"] - mine["start"]),
            per_rank,
        )
        if best is None or _better(found, best):
            best = found
    return best


def _better(a: RangeSteps, b: RangeSteps) -> bool:
    """Whether ``a`` serves as steps better than ``b``: more cover, or about the same cover
    with fewer ranges (the outer unit), or the same count and a more regular length."""
    if abs(a.cover - b.cover) > COVER_TIE:
        return a.cover > b.cover
    if a.per_rank != b.per_rank:
        return a.per_rank < b.per_rank
    return a.spread < b.spread
