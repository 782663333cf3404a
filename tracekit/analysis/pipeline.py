"""The stages of ``analyze()``: classify the rows, find the steps and place the device rows
in them, measure every step, run the rules and the checks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from tracekit.analysis.result import Analysis
from tracekit.checks import run_checks
from tracekit.checks.roofline import roofline_check
from tracekit.metrics import MIN_BUBBLE_NS
from tracekit.metrics.collectives import launches
from tracekit.metrics.roofline import roofline, with_roofline
from tracekit.metrics.steps import clipped, step_metrics
from tracekit.metrics.stream_waits import stream_wait_totals, stream_waits
from tracekit.metrics.waits import align, sync_waits
from tracekit.model import Context, ordered, ranked
from tracekit.rules.registry import select
from tracekit.stack import detect
from tracekit.steps import Steps, assign, find_steps, infer_phases, review, windows
from tracekit.steps.phase import sampled_phases
from tracekit.steps.placement import host_lead
from tracekit.steps.workload import Signals, Workload, decide, settle, signals
from tracekit.taxonomy import classified, load_patterns, vendor_of
from tracekit.timeline import Timeline


def _kernel_phases(steps: Steps, work: pl.DataFrame, seen: Signals) -> None:
    """Fill the steps' missing phases from their attention kernels, then, where a step is one
    forward of the model (period, graph replay) and no training runs, from its sampling."""
    for source in ("kernels", "sampling"):
        if source == "kernels":
            ranges, changed = infer_phases(steps.ranges, work, override=False)
        elif steps.method in ("period", "graph") and not seen.is_training:
            ranges, changed = sampled_phases(steps.ranges, work)
        else:
            break
        if changed:
            steps.ranges = ranges
            steps.phase_method = (
                source if steps.phase_method is None else f"{steps.phase_method}, {source}"
            )


def place_steps(
    rows: pl.DataFrame, meta: dict[str, Any], marker: str | None = None
) -> tuple[Steps, pl.DataFrame, Workload]:
    """Steps of classified rows, the device work rows placed in them and the workload: read
    what the rows show, find the steps, place every device row, fill phases from the kernels,
    take a second look at the confidence, name the workload and its step unit."""
    seen = signals(rows)
    steps = find_steps(rows, marker, meta=meta, seen=seen)
    work = assign(rows, steps)
    _kernel_phases(steps, work, seen)
    steps = review(steps, work, host_lead(rows, work))
    workload = decide(seen, steps)
    settle(steps, workload)
    return steps, work, workload


def analyze(
    timeline: Timeline,
    rules: list[str] | None = None,
    options: dict[str, dict[str, Any]] | None = None,
    *,
    step_marker: str | None = None,
    patterns: str | Path | None = None,
    min_bubble_ns: int = MIN_BUBBLE_NS,
    device: str | None = None,
) -> Analysis:
    """Classify, segment into steps, measure every step and run the rules (all by default).

    ``options`` maps a rule id to its options, e.g. ``{"bubbles": {"report_ns": 50_000}}``;
    ``patterns`` is a TOML file of extra taxonomy entries; ``step_marker`` a regex over host
    range names that overrides the built-in step markers; ``device`` names the device table
    entry (or a TOML file of entries) the roofline uses for every device instead of matching
    the trace's device names.
    """
    chosen = select(rules, options)
    vendor = vendor_of(timeline.meta)
    stack = detect(timeline.df, timeline.meta, vendor)
    rows, guessed = classified(timeline.df, vendor, load_patterns(patterns), stack.ids)
    steps, work, workload = place_steps(rows, timeline.meta, step_marker)
    if timeline.meta.get("truncated") and len(steps):
        last = int(steps.ranges["step"].max())
        steps.warnings.append(
            f"the trace is cut short: step {last}, the last, may be incomplete (its numbers"
            " end where the trace ends)"
        )
    wins = windows(work)
    launched = launches(work, timeline.meta.get("origin_ns"), steps.ranges)
    matched, clocks = align(launched)
    waits = sync_waits(matched)
    blocked = stream_wait_totals(stream_waits(rows, work), work, wins)
    metrics = step_metrics(work, wins, min_bubble_ns, None, steps.ranges, waits, blocked)
    roof = roofline(rows, work, timeline.meta, device)
    metrics = with_roofline(metrics, roof)

    # the rows cut to their windows are made again where read (0.2 s at 10M rows), not kept
    # beside the rules and checks that do not read them (0.3 GB)
    def cut(columns: list[str] | None = None) -> pl.DataFrame:
        return clipped(work if columns is None else work.select(columns), wins)

    ctx = Context(
        rows, work, cut, wins, metrics, steps, timeline.meta, matched, clocks, stack, roof
    )
    findings = ranked([finding for rule in chosen for finding in rule.run(ctx)])
    del ctx
    checks = run_checks(
        rows, work, wins, metrics, steps, timeline.meta, guessed, None, matched, clocks
    )
    checks = ordered([*checks, roofline_check(roof)])
    return Analysis(
        timeline,
        rows,
        work,
        steps,
        wins,
        metrics,
        findings,
        [r.id for r in chosen],
        checks,
        matched,
        clocks,
        workload,
        stack,
        roof,
    )
