"""``analyze()``: taxonomy + steps + rules -> :class:`Analysis`."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import polars as pl

from tracekit.metrics import MIN_BUBBLE_NS, clipped, step_metrics
from tracekit.rules.base import Context, Finding
from tracekit.rules.overlap import pair_overlap, stream_busy
from tracekit.rules.registry import select
from tracekit.steps import Steps, assign, find_steps, windows
from tracekit.taxonomy import classify, load_patterns, vendor_of
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
            "steps": {
                "method": self.steps.method,
                "confidence": self.steps.confidence,
                "detail": self.steps.detail,
                "count": len(self.steps),
            },
            "rules": self.rules,
            "step_metrics": self.step_metrics.to_dicts(),
            "findings": [f.to_dict() for f in self.findings],
        }


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
    rows = classify(timeline.df, vendor_of(timeline.meta), load_patterns(patterns))
    steps = find_steps(rows, step_marker)
    work = assign(rows, steps)
    wins = windows(work)
    in_windows = clipped(work, wins)
    metrics = step_metrics(work, wins, min_bubble_ns, in_windows)
    ctx = Context(rows, work, in_windows, wins, metrics, steps, timeline.meta)
    findings = [finding for rule in chosen for finding in rule.run(ctx)]
    order = {"error": 0, "warning": 1, "info": 2}
    findings.sort(key=lambda f: (f.step is None, f.step or 0, order.get(f.severity, 3), f.rule))
    return Analysis(
        timeline, rows, work, in_windows, steps, wins, metrics, findings, [r.id for r in chosen]
    )
