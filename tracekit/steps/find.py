"""``find_steps``: the step-finding methods in order, the first that finds steps wins.

1. markers: ``--step-marker REGEX``, then the serving engines' and profilers' own step
   markers (:mod:`.markers`), host ranges before their device copies; else the Step Id the
   export gives each device row (:mod:`.exported`); else the user's own top-level ranges that
   repeat and hold most of the device time (:mod:`.user_ranges`);
2. graph launches, grouped per step (:mod:`.graphs`);
3. the period of the device kernel sequence (:mod:`.period`), only where the kernels show an
   LLM generating tokens (decode attention or sampling kernels);
4. idle gaps between device bursts (:mod:`.gaps`), only where the bursts repeat alike;
5. else the whole trace is one window.
What the rows show of the workload (:mod:`.workload`) bars the guessing methods 2-4 where
they would invent steps: a training window without iteration markers and a micro-benchmark
are one window. Each method states its confidence; :mod:`.confidence` lowers it when the
result looks wrong.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import polars as pl

from tracekit.errors import TraceError
from tracekit.steps.exported import export_step_ranges
from tracekit.steps.gaps import MIN_GAP_NS, by_gaps
from tracekit.steps.graphs import REGULAR, by_graph
from tracekit.steps.iterations import ITERATION_SHARE, iteration_share
from tracekit.steps.markers import borrow_phases, find_markers, user_marker
from tracekit.steps.model import RANGE_SCHEMA, Steps, closed
from tracekit.steps.period import NOT_STEPS, SPREAD, by_period
from tracekit.steps.user_ranges import by_user_ranges
from tracekit.steps.workload import Signals, signals

AGREE = 0.1  # graph launches and the kernels' period may differ by this share of steps
PERIOD_NOTE_KERNELS = 200_000  # above, a one-window trace's period is not looked for
REGULAR_SPREAD = 0.5  # user ranges whose lengths spread more than this are less sure steps


def _user(df: pl.DataFrame, marker: str) -> Steps:
    try:
        re.compile(marker)
        ranges, host = user_marker(df, marker)
    except (re.error, pl.exceptions.PolarsError) as exc:
        raise TraceError(
            f"--step-marker {marker!r} is not a valid regular expression ({exc})"
        ) from None
    if not ranges.height:
        raise TraceError(
            f"--step-marker {marker!r} matches no range in the trace; "
            "`tracekit info` lists what the trace holds"
        )
    where = "host" if host else "device"
    detail = f"{where} ranges matching {marker!r}"
    return Steps("marker", "high", detail, ranges, not host, family="user")


def _markers(df: pl.DataFrame) -> Steps | None:
    found = find_markers(df)
    if found is None:
        return None
    ranges, marker, host = found
    ranges = closed(ranges, df)
    if ranges["phase"].null_count() == ranges.height:
        ranges = borrow_phases(df, ranges, host)
    known = ranges["phase"].null_count() < ranges.height
    where = "host" if host else "device"
    example = str(ranges["label"][0])
    example = example if len(example) <= 48 else example[:47] + "…"
    detail = f"{marker.family} step markers, {where} ranges such as {example!r}"
    phase_method = "marker" if known else None
    return Steps("marker", "high", detail, ranges, not host, phase_method, family=marker.family)


def _exported(df: pl.DataFrame) -> Steps | None:
    ranges = export_step_ranges(df)
    if not ranges.height:
        return None
    detail = "the Step Id the export gives each device row (torch_npu kernel_details / db)"
    return Steps("marker", "high", detail, ranges, by_device_time=True, family="export")


def _ranges(df: pl.DataFrame) -> Steps | None:
    found = by_user_ranges(df)
    if found is None:
        return None
    regular = found.spread <= REGULAR_SPREAD
    detail = (
        f"the user's ranges {found.example[:48]!r} ({found.per_rank} per rank, holding"
        f" {found.cover:.0%} of the device time)"
    )
    steps = Steps("ranges", "high" if regular else "medium", detail, found.ranges)
    steps.family = "user ranges"
    if not regular:
        steps.warnings.append(
            f"the ranges {found.group[:48]!r} vary in length (p90 - p10 = {found.spread:.0%}"
            " of the median)"
        )
    return steps


def _graphs(df: pl.DataFrame) -> Steps | None:
    graph = by_graph(df)
    if graph is None:
        return None
    confidence = "medium" if graph.regular >= REGULAR else "low"
    detail = f"graph launches, {graph.how} ({graph.per_step:g} per step)"
    steps = Steps("graph", confidence, detail, graph.ranges)
    if confidence == "low":
        steps.warnings.append(
            f"graph launches per step vary: only {graph.regular:.0%} of steps hold the usual number"
        )
    _check_against_period(steps, df)
    return steps


def _check_against_period(steps: Steps, df: pl.DataFrame) -> None:
    """Lower the confidence when the kernels' own period gives another number of steps than
    the graph launches (a host wait inside a step splits it; a step of several graphs with
    no wait between steps merges them)."""
    ranges, _, periods = by_period(df)
    if not periods:
        return
    by_kernels = ranges.filter(~pl.col("label").is_in(NOT_STEPS)).height
    by_graphs = len(steps)
    if abs(by_graphs - by_kernels) > AGREE * by_kernels:
        steps.warnings.append(
            f"the graph launches give {by_graphs} steps, the period of the kernels"
            f" {by_kernels}: one of them is wrong"
        )
        steps.confidence = "low"


def _period(df: pl.DataFrame) -> Steps | None:
    ranges, by_device_time, periods = by_period(df)
    if not ranges.height:
        return None
    p = min(periods, key=lambda x: x.regular)
    steps = ranges.filter(~pl.col("label").is_in(NOT_STEPS))
    confidence = "medium" if p.regular >= REGULAR and steps.height >= 3 else "low"
    detail = (
        f"a period of {p.period} kernels ({p.cover:.0%} of the recurring kernel names run at"
        " the same place in most periods);"
        f" each step starts at {p.boundary_name[:60]!r}, found by {p.how}"
    )
    out = Steps("period", confidence, detail, ranges, by_device_time)
    lengths = sorted({(x.rank, x.period) for x in periods}, key=lambda r: r[1])
    if lengths[-1][1] > lengths[0][1] * (1 + SPREAD) + 2:
        listing = ", ".join(f"rank {r}: {n}" for r, n in lengths)
        out.warnings.append(f"the ranks repeat with different periods ({listing} kernels)")
        out.confidence = "low"
    if p.regular < REGULAR:
        out.warnings.append(
            f"kernel counts per step vary: {p.regular:.0%} of steps hold {p.period} kernels;"
            " step boundaries may be off"
        )
    return out


def _iterations(df: pl.DataFrame) -> Steps | None:
    """Training iterations by the kernels' period, where nearly every period runs an
    optimizer step (:mod:`.iterations`)."""
    steps = _period(df)
    if steps is None:
        return None
    share = iteration_share(df, steps.ranges)
    if share < ITERATION_SHARE:
        return None
    steps.detail += f"; {share:.0%} of the periods run an optimizer step: one iteration each"
    return steps


def find_steps(
    df: pl.DataFrame,
    marker: str | None = None,
    min_gap_ns: int = MIN_GAP_NS,
    meta: Mapping[str, Any] | None = None,
    seen: Signals | None = None,
) -> Steps:
    """Find the steps in classified timeline rows (``marker``: a regex over range names
    that overrides the built-in markers; ``meta``: the timeline's metadata, whose ``steps``
    says whether the export names Step Ids, else every row's args are searched; ``seen``:
    what the rows show of the workload, :func:`.workload.signals`, read here when None)."""
    if marker is not None:
        return _user(df, marker)
    seen = signals(df) if seen is None else seen
    exported = meta is None or bool(meta.get("steps"))
    methods = (_markers, _exported, _ranges) if exported else (_markers, _ranges)
    for method in methods:
        steps = method(df)
        if steps is not None:
            return steps
    if seen.is_training:
        iterations = _iterations(df)
        if iterations is not None:
            return iterations
        return _whole(df, "a training window without iteration markers: one window")
    if seen.is_benchmark and not seen.graph_launches:
        return _whole(df, "a micro-benchmark: its kernels' repetitions, not steps")
    guesses = (_graphs, _period) if seen.llm_decode else (_graphs,)
    for method in guesses:
        steps = method(df)
        if steps is not None:
            return steps
    ranges = by_gaps(df, min_gap_ns)
    if ranges.height:
        detail = f"device bursts split at the long idle gaps (>= {min_gap_ns} ns, Otsu split)"
        return Steps("gaps", "low", detail, ranges, by_device_time=True)
    return _whole(df, _why_whole(df, seen))


def _why_whole(df: pl.DataFrame, seen: Signals) -> str:
    """Why the trace is one window, naming a period of the kernels that was not taken for
    steps (looked for only where the kernels are few enough to search quickly)."""
    plain = "no step markers, graph launches, repeating kernels or real bursts: one window"
    if seen.llm_decode or seen.kernels > PERIOD_NOTE_KERNELS:
        return plain
    _, _, periods = by_period(df)
    if not periods:
        return plain
    p = min(periods, key=lambda x: x.regular)
    return (
        f"no step markers or graph launches; the kernels repeat every {p.period} kernels"
        f" ({len(p.starts)} times), but with no decode or iteration evidence a period is no"
        " step (pass --step-marker REGEX if the trace marks its own): one window"
    )


def _whole(df: pl.DataFrame, why: str) -> Steps:
    """The whole trace as one window per rank, and why."""
    whole = (
        df.select(
            pl.col("rank").fill_null(0).cast(pl.Int32),
            start=pl.col("ts"),
            end=pl.col("ts") + pl.col("dur"),
        )
        .group_by("rank")
        .agg(pl.col("start").min(), pl.col("end").max())
        .with_columns(
            step=pl.lit(0, pl.Int64),
            label=pl.lit("whole trace"),
            phase=pl.lit(None, pl.String),
            tokens=pl.lit(None, pl.Int64),
        )
    )
    return Steps("whole", "none", why, whole.select(list(RANGE_SCHEMA)).cast(RANGE_SCHEMA))
