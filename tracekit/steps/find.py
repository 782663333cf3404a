"""``find_steps``: the step-finding methods in order, the first that finds steps wins.

1. markers: ``--step-marker REGEX``, then the serving engines' and profilers' own step
   markers (:mod:`.markers`), host ranges before their device copies; else the Step Id the
   export gives each device row (:mod:`.exported`);
2. graph launches, grouped per step (:mod:`.graphs`);
3. the period of the device kernel sequence (:mod:`.period`);
4. idle gaps between device bursts (:mod:`.gaps`);
5. else the whole trace is one window.
Each method states its confidence; :mod:`.confidence` lowers it when the result looks wrong.
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
from tracekit.steps.markers import borrow_phases, find_markers, user_marker
from tracekit.steps.model import RANGE_SCHEMA, Steps
from tracekit.steps.period import PRE_LABEL, by_period


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
    return Steps("marker", "high", f"{where} ranges matching {marker!r}", ranges, not host)


def _markers(df: pl.DataFrame) -> Steps | None:
    found = find_markers(df)
    if found is None:
        return None
    ranges, marker, host = found
    if ranges["phase"].null_count() == ranges.height:
        ranges = borrow_phases(df, ranges, host)
    known = ranges["phase"].null_count() < ranges.height
    where = "host" if host else "device"
    example = str(ranges["label"][0])
    example = example if len(example) <= 48 else example[:47] + "…"
    detail = f"{marker.family} step markers, {where} ranges such as {example!r}"
    return Steps("marker", "high", detail, ranges, not host, "marker" if known else None)


def _exported(df: pl.DataFrame) -> Steps | None:
    ranges = export_step_ranges(df)
    if not ranges.height:
        return None
    detail = "the Step Id the export gives each device row (torch_npu kernel_details / db)"
    return Steps("marker", "high", detail, ranges, by_device_time=True)


def _graphs(df: pl.DataFrame) -> Steps | None:
    graph = by_graph(df)
    if graph is None:
        return None
    confidence = "medium" if graph.regular >= REGULAR else "low"
    detail = f"graph launches, {graph.how} ({graph.per_step:g} per step)"
    steps = Steps("graph", confidence, detail, graph.ranges)
    if confidence == "low":
        steps.warnings.append(
            f"graph launches per step vary: only {graph.regular:.0%} of steps hold the usual"
            " number; pass --step-marker if the trace has a step range"
        )
    return steps


def _period(df: pl.DataFrame) -> Steps | None:
    ranges, by_device_time, periods = by_period(df)
    if not ranges.height:
        return None
    p = min(periods, key=lambda x: x.regular)
    steps = ranges.filter(pl.col("label") != PRE_LABEL)
    confidence = "medium" if p.regular >= REGULAR and steps.height >= 3 else "low"
    detail = (
        f"a period of {p.period} kernels ({p.match:.0%} of kernels repeat one period later);"
        f" each step starts at {p.boundary_name[:60]!r}, found by {p.how}"
    )
    premise = None
    if all(x.looks_like_decode for x in periods):  # an LLM: one period is one decode step
        premise = "period"
        detail += "; every period is taken for a decode step"
        ranges = ranges.with_columns(
            phase=pl.when(pl.col("label") != PRE_LABEL).then(pl.lit("decode"))
        )
    out = Steps("period", confidence, detail, ranges, by_device_time, premise)
    if p.regular < REGULAR:
        out.warnings.append(
            f"kernel counts per step vary: {p.regular:.0%} of steps hold {p.period} kernels;"
            " step boundaries may be off"
        )
    return out


def find_steps(
    df: pl.DataFrame,
    marker: str | None = None,
    min_gap_ns: int = MIN_GAP_NS,
    meta: Mapping[str, Any] | None = None,
) -> Steps:
    """Find decode steps in classified timeline rows (``marker``: a regex over range names
    that overrides the built-in markers; ``meta``: the timeline's metadata, whose ``steps``
    says whether the export names Step Ids, else every row's args are searched)."""
    if marker is not None:
        return _user(df, marker)
    exported = meta is None or bool(meta.get("steps"))
    methods = (_markers, _exported, _graphs, _period) if exported else (_markers, _graphs, _period)
    for method in methods:
        steps = method(df)
        if steps is not None:
            return steps
    ranges = by_gaps(df, min_gap_ns)
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
        .with_columns(step=pl.lit(0, pl.Int64), label=pl.lit("whole trace"),
                      phase=pl.lit(None, pl.String), tokens=pl.lit(None, pl.Int64))
    )  # fmt: skip
    return Steps(
        "whole",
        "none",
        "no step markers, graph launches, repeating kernels or idle gaps: one window",
        whole.select(list(RANGE_SCHEMA)).cast(RANGE_SCHEMA),
    )
