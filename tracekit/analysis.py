"""``analyze()``: taxonomy + steps + rules -> :class:`Analysis`."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import polars as pl

from tracekit.checks import Check, run_checks
from tracekit.metrics import MIN_BUBBLE_NS, clipped, phase_summary, step_metrics
from tracekit.rules.base import Context, Finding
from tracekit.rules.overlap import pair_overlap, stream_busy
from tracekit.rules.registry import select
from tracekit.steps import Steps, assign, find_steps, infer_phases, review, windows
from tracekit.steps.placement import host_lead, placement_counts
from tracekit.taxonomy import classified, load_patterns, vendor_of
from tracekit.timeline import Timeline


@dataclass
class Analysis:
    """An analysed timeline: its steps, per-step metrics and the rules' findings.

    ``rows`` are the timeline's rows with the taxonomy columns; ``work`` the device work rows
    with their ``step`` (``in_windows``: the same cut to their step's window); ``windows`` the
    step windows per (rank, device).
    """

    timeline: Timeline
    rows: pl.DataFrame
    work: pl.DataFrame
    in_windows: pl.DataFrame
    steps: Steps
    windows: pl.DataFrame
    step_metrics: pl.DataFrame
    findings: list[Finding] = field(default_factory=list)
    rules: list[str] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)

    @cached_property
    def placement(self) -> dict[str, int]:
        """How many device rows were placed in steps each way (``launch``, ``export``,
        ``device_window``, ``device_time``, ``host_time``, ``none``)."""
        return placement_counts(self.work)

    @property
    def low_confidence(self) -> str | None:
        """One line saying that the steps may be wrong, or None when they are trusted."""
        if self.steps.confidence not in ("low", "none"):
            return None
        why = self.steps.warnings[0] if self.steps.warnings else self.steps.detail
        return (
            f"low confidence: steps found by {self.steps.method}, {why}; per-step numbers may be"
            " wrong (pass --step-marker REGEX if the trace marks its steps)"
        )

    @cached_property
    def stream_busy(self) -> pl.DataFrame:
        """Busy ns per (rank, device, step, stream)."""
        return stream_busy(self.in_windows)

    @cached_property
    def stream_overlap(self) -> pl.DataFrame:
        """Overlap ns per (rank, device, step, stream_a, stream_b)."""
        return pair_overlap(self.in_windows, self.windows)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: how steps were found, the metrics rows and the findings."""
        return {
            "source": self.timeline.meta.get("source"),
            "low_confidence": self.low_confidence,
            "steps": steps_summary(self.steps, self.placement),
            "phases": phase_summary(self.step_metrics),
            "checks": [c.to_dict() for c in self.checks],
            "rules": self.rules,
            "step_metrics": self.step_metrics.to_dicts(),
            "findings": [f.to_dict() for f in self.findings],
        }


def steps_summary(steps: Steps, placement: dict[str, int]) -> dict[str, Any]:
    """How steps were found, JSON-ready: method, confidence, detail, count (step ranges over
    all ranks), phases (steps per phase, ``unknown`` for none), where phases came from,
    warnings and row placement."""
    phases = (
        steps.ranges.group_by(pl.col("phase").fill_null("unknown"))
        .agg(n=pl.col("step").n_unique())
        .sort("n", "phase", descending=[True, False])
    )
    return {
        "method": steps.method,
        "confidence": steps.confidence,
        "detail": steps.detail,
        "count": len(steps),
        "phases": {str(p): int(n) for p, n in phases.iter_rows()},
        "phase_method": steps.phase_method,
        "warnings": list(steps.warnings),
        "placement": placement,
    }


def _kernel_phases(steps: Steps, work: pl.DataFrame) -> None:
    """Fill the steps' missing phases from their attention kernels (they replace the period
    method's premise that every period is a decode step)."""
    premise = steps.phase_method == "period"
    ranges, changed = infer_phases(steps.ranges, work, override=premise)
    if changed:
        steps.ranges = ranges
        steps.phase_method = "kernels" if steps.phase_method is None else (
            f"{steps.phase_method}, kernels")  # fmt: skip


def place_steps(rows: pl.DataFrame, meta: dict[str, Any],
                marker: str | None = None) -> tuple[Steps, pl.DataFrame]:  # fmt: skip
    """Steps of classified rows and the device work rows placed in them: find the steps, place
    every device row, fill phases from the kernels, take a second look at the confidence."""
    steps = find_steps(rows, marker, meta=meta)
    work = assign(rows, steps)
    _kernel_phases(steps, work)
    return review(steps, work, host_lead(rows, work)), work


def analyze(
    timeline: Timeline,
    rules: list[str] | None = None,
    options: dict[str, dict[str, Any]] | None = None,
    *,
    step_marker: str | None = None,
    patterns: str | Path | None = None,
    min_bubble_ns: int = MIN_BUBBLE_NS,
) -> Analysis:
    """Classify, segment into steps, measure every step and run the rules (all by default).

    ``options`` maps a rule id to its options, e.g. ``{"bubbles": {"report_ns": 50_000}}``;
    ``patterns`` is a TOML file of extra taxonomy entries; ``step_marker`` a regex over host
    range names that overrides the built-in step markers.
    """
    chosen = select(rules, options)
    rows, guessed = classified(timeline.df, vendor_of(timeline.meta), load_patterns(patterns))
    steps, work = place_steps(rows, timeline.meta, step_marker)
    wins = windows(work)
    in_windows = clipped(work, wins)
    metrics = step_metrics(work, wins, min_bubble_ns, in_windows, steps.ranges)
    ctx = Context(rows, work, in_windows, wins, metrics, steps, timeline.meta)
    findings = [finding for rule in chosen for finding in rule.run(ctx)]
    order = {"error": 0, "warning": 1, "info": 2}
    findings.sort(key=lambda f: (f.step is None, f.step or 0, order.get(f.severity, 3), f.rule))
    checks = run_checks(rows, work, wins, metrics, steps, timeline.meta, guessed, in_windows)
    return Analysis(
        timeline,
        rows,
        work,
        in_windows,
        steps,
        wins,
        metrics,
        findings,
        [r.id for r in chosen],
        checks,
    )
