"""Decode-step segmentation: find the steps, assign device rows to them, derive windows.

Three methods, tried in order (DESIGN.md): explicit markers (``--step-marker REGEX``, then
known range names on the host, then device-side step ranges), graph replays (one
CUDA/HIP/ACL graph launch per step), and device idle gaps between bursts. A trace with none
of them is one window. Device rows belong to the step whose host range issued their launch
(joined by correlation id); rows without a launch link fall back to time. Everything is
polars joins and sorts: no Python per event.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import polars as pl

from tracekit.errors import TraceError
from tracekit.intervals import merge

WORK_KINDS = ("kernel", "comm", "memcpy", "memset")  # rows that make a device busy
# Known step markers, most specific first: PyTorch profiler steps, vLLM / SGLang model-runner
# ranges, torch_npu / msprof step ranges, generic names.
KNOWN_MARKERS = (
    r"^ProfilerStep#\d+$",
    r"^gpu_model_runner: forward$",  # vLLM v1 (its sampling kernels join the step by time)
    r"^(gpu_model_runner: )?execute_model",
    r"^(model_runner|ModelRunner)[.:_ ]*(forward|execute)",
    r"^forward_(decode|extend|batch)",
    r"^(decode|Decode)[ _-]?[Ss]tep",
    r"^[Ss]tep[ _#-]?\d+$",
    r"^Iteration \d+$",  # msprof Step Trace (device-side ranges)
)
MARKER_KINDS = ("range", "op")
GRAPH_LAUNCHES = r"^(cudaGraphLaunch|hipGraphLaunch|aclmdlRIExecute|aclmdlExecute|aclgraph)"
MIN_GAP_NS = 20_000  # the smallest idle gap the gaps method takes for a step boundary


@dataclass
class Steps:
    """How steps were found and their host-side (or device-side) ranges per rank.

    ``ranges`` has ``rank, step, label, start, end``; ``by_device_time`` is True when the
    ranges are on the device's clock (gaps method, msprof ``Iteration N`` ranges), so rows
    are assigned by their own time rather than through their launch.
    """

    method: str
    confidence: str
    detail: str
    ranges: pl.DataFrame
    by_device_time: bool = False

    def __len__(self) -> int:
        return self.ranges.height


_RANGE_SCHEMA = {
    "rank": pl.Int32,
    "step": pl.Int64,
    "label": pl.String,
    "start": pl.Int64,
    "end": pl.Int64,
}


def _is_host(df: pl.DataFrame) -> pl.Expr:
    return pl.col("device").is_null() | (pl.col("device") < 0)


def _outermost(ranges: pl.DataFrame) -> pl.DataFrame:
    """Drop ranges nested inside an earlier range of the same rank (a marker inside itself)."""
    ranges = ranges.sort("rank", "start", pl.col("end"), descending=[False, False, True])
    reach = pl.col("end").cum_max().shift(1).over("rank")
    return ranges.filter(reach.is_null() | (pl.col("start") >= reach))


def _numbered(ranges: pl.DataFrame) -> pl.DataFrame:
    return (
        ranges.sort("rank", "start")
        .with_columns(step=pl.int_range(pl.len(), dtype=pl.Int64).over("rank"))
        .select(list(_RANGE_SCHEMA))
    )


def _by_marker(df: pl.DataFrame, pattern: str, host: bool = True) -> pl.DataFrame:
    rows = df.filter(  # torch_npu records ProfilerStep#N as an operator, Kineto as a range
        pl.col("kind").cast(pl.String).is_in(MARKER_KINDS)
        & (_is_host(df) if host else ~_is_host(df))
        & pl.col("name").cast(pl.String).str.contains(pattern)
    )
    ranges = rows.select(
        pl.col("rank").fill_null(0).cast(pl.Int32),
        label=pl.col("name").cast(pl.String),
        start=pl.col("ts"),
        end=pl.col("ts") + pl.col("dur"),
    )
    return _numbered(_outermost(ranges)) if ranges.height else ranges


def _by_graph(df: pl.DataFrame) -> pl.DataFrame:
    launches = (
        df.filter(
            (pl.col("kind").cast(pl.String) == "api")
            & pl.col("name").cast(pl.String).str.contains(GRAPH_LAUNCHES)
        )
        .select(
            pl.col("rank").fill_null(0).cast(pl.Int32),
            label=pl.col("name").cast(pl.String),
            start=pl.col("ts"),
        )
        .sort("rank", "start")
    )
    if launches.height < 2:
        return launches.clear()
    ends = pl.col("start").shift(-1).over("rank").fill_null(pl.lit(2**62, pl.Int64))
    return _numbered(launches.with_columns(end=ends))


def _cut(gaps: np.ndarray, floor: int) -> int:
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


def _by_gaps(df: pl.DataFrame, min_gap_ns: int) -> pl.DataFrame:
    work = df.filter(pl.col("kind").cast(pl.String).is_in(WORK_KINDS))
    if work.height == 0:
        return pl.DataFrame(schema=_RANGE_SCHEMA)
    busy = merge(work.with_columns(pl.col("rank").fill_null(0).cast(pl.Int32)), ["rank"])
    gap = pl.col("start") - pl.col("end").shift(1).over("rank")
    busy = busy.with_columns(gap=gap)
    cuts = pl.DataFrame(
        [(rank, _cut(group["gap"].drop_nulls().to_numpy(), min_gap_ns))
         for (rank,), group in busy.group_by("rank")],
        schema={"rank": pl.Int32, "cut": pl.Int64}, orient="row",
    )  # fmt: skip
    bursts = busy.join(cuts, on="rank").with_columns(
        new=pl.col("gap").is_null() | (pl.col("gap") >= pl.col("cut"))
    )
    bursts = bursts.with_columns(burst=pl.col("new").cum_sum().over("rank"))
    ranges = bursts.group_by("rank", "burst").agg(
        start=pl.col("start").min(), end=pl.col("end").max()
    )
    if ranges.group_by("rank").len()["len"].max() < 2:
        return pl.DataFrame(schema=_RANGE_SCHEMA)
    ranges = ranges.sort("rank", "start").with_columns(
        end=pl.col("start").shift(-1).over("rank").fill_null(pl.col("end")),
        label=pl.format("burst {}", pl.col("burst")),
    )
    return _numbered(ranges)


def find_steps(df: pl.DataFrame, marker: str | None = None, min_gap_ns: int = MIN_GAP_NS) -> Steps:
    """Find decode steps in timeline rows (``marker``: a regex over host range names)."""
    if marker is not None:
        try:
            re.compile(marker)
            ranges = _by_marker(df, marker)
        except (re.error, pl.exceptions.PolarsError) as exc:
            raise TraceError(
                f"--step-marker {marker!r} is not a valid regular expression ({exc})"
            ) from None
        if not ranges.height:
            raise TraceError(
                f"--step-marker {marker!r} matches no host range in the trace; "
                "`tracekit info` lists what the trace holds"
            )
        return Steps("marker", "high", f"host ranges matching {marker!r}", ranges)
    for pattern in KNOWN_MARKERS:
        ranges = _by_marker(df, pattern)
        if ranges.height:
            return Steps("marker", "high", f"host ranges matching {pattern!r}", ranges)
    for pattern in KNOWN_MARKERS:  # device-side step ranges (msprof Step Trace): by time
        ranges = _by_marker(df, pattern, host=False)
        if ranges.height:
            detail = f"device ranges matching {pattern!r}"
            return Steps("marker", "high", detail, ranges, by_device_time=True)
    ranges = _by_graph(df)
    if ranges.height:
        return Steps("graph", "medium", "one graph launch per step", ranges)
    ranges = _by_gaps(df, min_gap_ns)
    if ranges.height:
        detail = f"device bursts split at the long idle gaps (>= {min_gap_ns} ns, Otsu split)"
        return Steps("gaps", "low", detail, ranges, by_device_time=True)
    whole = (
        df.select(
            pl.col("rank").fill_null(0).cast(pl.Int32),
            start=pl.col("ts"),
            end=pl.col("ts") + pl.col("dur"),
        )
        .group_by("rank")
        .agg(pl.col("start").min(), pl.col("end").max())
    )
    whole = whole.with_columns(step=pl.lit(0, pl.Int64), label=pl.lit("whole trace"))
    return Steps(
        "whole",
        "none",
        "no step markers, graph launches or idle gaps: one window",
        whole.select(list(_RANGE_SCHEMA)).cast(_RANGE_SCHEMA),
    )


def work_rows(df: pl.DataFrame) -> pl.DataFrame:
    """The rows that occupy a device (kernels, communication, copies, fills).

    A device row without a device index (torch_npu text exports record none; some HCCL rows
    lack it) is analysed on its rank's device when the rank's other rows name exactly one,
    else as device 0: one process drives one device there.
    """
    work = df.filter(pl.col("kind").cast(pl.String).is_in(WORK_KINDS))
    dev = pl.col("device")
    only = pl.when(dev.min().over("rank") == dev.max().over("rank")).then(dev.max().over("rank"))
    return work.with_columns(dev.fill_null(only).fill_null(0)).filter(dev >= 0)


def _step_at(rows: pl.DataFrame, at: str, ranges: pl.DataFrame, inside: bool) -> pl.Series:
    """Step of each row by the time in column ``at``: the last range of its rank that started
    at or before it (and, with ``inside``, has not ended yet); null otherwise."""
    probe = rows.select(pl.int_range(pl.len()).alias("_i"), pl.col("rank"), pl.col(at))
    probe = probe.filter(pl.col(at).is_not_null()).sort(at)
    found = probe.join_asof(
        ranges.sort("start"),
        left_on=at,
        right_on="start",
        by="rank",
        strategy="backward",
        check_sortedness=False,
    )
    step = pl.col("step")
    if inside:
        step = pl.when(pl.col(at) < pl.col("end")).then(step)
    found = found.select("_i", step.alias("step")).sort("_i")
    full = pl.DataFrame({"_i": pl.int_range(rows.height, eager=True)}).join(
        found, on="_i", how="left"
    )
    return full.sort("_i")["step"]


def assign(df: pl.DataFrame, steps: Steps) -> pl.DataFrame:
    """Device work rows of ``df`` with ``rank`` filled and a ``step`` column (null: none)."""
    work = work_rows(df).with_columns(pl.col("rank").fill_null(0).cast(pl.Int32))
    ranges = steps.ranges.select("rank", "step", "start", "end")
    by_time = _step_at(work, "ts", ranges, inside=False)
    if steps.by_device_time:
        return work.with_columns(step=by_time)
    launches = (
        df.filter((pl.col("kind").cast(pl.String) == "api") & pl.col("corr").is_not_null())
        .select(pl.col("rank").fill_null(0).cast(pl.Int32), "corr", _launch=pl.col("ts"))
        .unique(subset=["rank", "corr"], keep="first")
    )
    work = work.join(launches, on=["rank", "corr"], how="left", maintain_order="left")
    by_launch = _step_at(work, "_launch", ranges, inside=True)
    return work.drop("_launch").with_columns(step=pl.coalesce(by_launch, by_time))


def windows(work: pl.DataFrame) -> pl.DataFrame:
    """Per (rank, device, step): ``start`` (first row), ``end`` (the next step's first row
    on that device; the last step ends at its last row) and ``dur``."""
    per = (
        work.filter(pl.col("step").is_not_null())
        .group_by("rank", "device", "step")
        .agg(start=pl.col("ts").min(), last=(pl.col("ts") + pl.col("dur")).max())
        .sort("rank", "device", "step")
    )
    end = pl.col("start").shift(-1).over("rank", "device").fill_null(pl.col("last"))
    per = per.with_columns(end=pl.max_horizontal(end, pl.col("start")))
    return per.select("rank", "device", "step", "start", "end", dur=pl.col("end") - pl.col("start"))
