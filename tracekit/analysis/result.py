"""What ``analyze()`` produces: the :class:`Analysis` of one timeline, and how its steps
were found as JSON."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import polars as pl

from tracekit.analysis.notebook import analysis_html, summary_frame
from tracekit.checks.capture import NAME as CAPTURE
from tracekit.checks.capture import capture_note
from tracekit.metrics.requests import request_latency, request_summary
from tracekit.metrics.roofline import Roofline
from tracekit.metrics.steps import clipped, phase_summary
from tracekit.metrics.streams import pair_overlap, stream_busy
from tracekit.model import Check, Finding
from tracekit.stack import Stack
from tracekit.steps import Steps
from tracekit.steps.placement import placement_counts
from tracekit.steps.workload import Workload
from tracekit.timeline import Timeline


@dataclass
class Analysis:
    """An analysed timeline: its steps, per-step metrics and the rules' findings.

    ``rows`` are the timeline's rows with the taxonomy columns; ``work`` the device work rows
    with their ``step`` (``in_windows``: the same cut to their step's window); ``windows`` the
    step windows per (rank, device); ``findings`` one per pattern, ranked by impact
    (:func:`tracekit.model.ranked`); ``collectives`` every communication launch matched
    across ranks with its aligned arrival and wait (:mod:`tracekit.metrics.waits`);
    ``clocks`` each rank's clock offset (:mod:`tracekit.metrics.clocks`); ``workload`` what
    the trace is and what one of its steps is (:mod:`tracekit.steps.workload`); ``stack``
    the software it shows (:mod:`tracekit.stack`); ``roofline`` the work, bound and headroom
    of the rows whose shapes the trace recorded (:mod:`tracekit.metrics.roofline`).
    """

    timeline: Timeline
    rows: pl.DataFrame
    work: pl.DataFrame
    steps: Steps
    windows: pl.DataFrame
    step_metrics: pl.DataFrame
    findings: list[Finding] = field(default_factory=list)
    rules: list[str] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    collectives: pl.DataFrame = field(default_factory=pl.DataFrame)
    clocks: pl.DataFrame = field(default_factory=pl.DataFrame)
    workload: Workload = field(default_factory=lambda: Workload("unknown", "whole window", "none"))
    stack: Stack = field(default_factory=Stack)
    roofline: Roofline = field(default_factory=Roofline)

    @cached_property
    def placement(self) -> dict[str, int]:
        """How many device rows were placed in steps each way (``launch``, ``export``,
        ``device_window``, ``device_time``, ``host_time``, ``none``)."""
        return placement_counts(self.work)

    @property
    def capture_note(self) -> str | None:
        """One line saying that the capture holds only part of the work (the
        ``capture.complete`` check warned or failed), or None: said first, before
        :attr:`low_confidence`."""
        return capture_note(next((c for c in self.checks if c.name == CAPTURE), None))

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
    def requests(self) -> pl.DataFrame:
        """Per-request latency where the spans give it (serving traces: TTFT, TPOT; see
        :func:`tracekit.metrics.requests.request_latency`); empty otherwise."""
        return request_latency(self.rows)

    @cached_property
    def in_windows(self) -> pl.DataFrame:
        """The work rows cut to their step's window (made when first read)."""
        return clipped(self.work, self.windows)

    @cached_property
    def stream_busy(self) -> pl.DataFrame:
        """Busy ns per (rank, device, step, stream)."""
        return stream_busy(self.in_windows)

    @cached_property
    def stream_overlap(self) -> pl.DataFrame:
        """Overlap ns per (rank, device, step, stream_a, stream_b)."""
        return pair_overlap(self.in_windows, self.windows)

    @property
    def summary_frame(self) -> pl.DataFrame:
        """Per phase: steps, median / p90 step time, tokens, ns per token, busy and idle
        shares (:func:`tracekit.analysis.notebook.summary_frame`)."""
        return summary_frame(self.step_metrics)

    def _repr_html_(self) -> str:
        """Jupyter's view: summary, checks, top findings, step chart (:func:`analysis_html`)."""
        return analysis_html(self)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: how steps were found, the metrics rows and the findings."""
        return {
            "source": self.timeline.meta.get("source"),
            "capture_note": self.capture_note,
            "low_confidence": self.low_confidence,
            "workload": self.workload.to_dict(),
            "stack": self.stack.to_dict(),
            "steps": steps_summary(self.steps, self.placement),
            "phases": phase_summary(self.step_metrics),
            "requests": request_summary(self.requests),
            "checks": [c.to_dict() for c in self.checks],
            "rules": self.rules,
            "step_metrics": self.step_metrics.to_dicts(),
            "findings": [f.to_dict() for f in self.findings],
            "roofline": self.roofline.to_dict(),
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
