"""What a diff produces: per compared quantity an :class:`Estimate` of its change, a
:class:`Change` with its status, and the :class:`Diff` with its verdict (the findings
compared by pattern are :class:`tracekit.diff.findings.FindingChange`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import polars as pl

from tracekit.diff.findings import FindingChange
from tracekit.diff.notebook import changes_frame, diff_html

REPLICATES = 2_000
SEED = 0


@dataclass
class Estimate:
    """Base and head values, the change (``delta``, ``rel`` = delta / base) and its interval."""

    base: float | None
    head: float | None
    delta: float | None
    rel: float | None
    lo: float | None  # confidence interval of delta
    hi: float | None
    rel_lo: float | None  # the same, relative to base
    rel_hi: float | None

    @property
    def significant(self) -> bool:
        """The interval excludes zero."""
        return self.lo is not None and self.hi is not None and (self.lo > 0 or self.hi < 0)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {**asdict(self), "significant": self.significant}


@dataclass
class Change:
    """One compared quantity: what it is, its estimate and status.

    ``status``: ``regression`` / ``improvement`` (gated), ``not significant`` (beyond the
    threshold, inside the noise), ``within threshold``, ``unchanged``; for rule metrics
    ``worse`` / ``better`` / ``unchanged``.
    """

    kind: str  # step, category, kernel, metric
    name: str
    estimate: Estimate
    status: str
    label: str = ""
    detail: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {**asdict(self), "estimate": self.estimate.to_dict()}


@dataclass
class Diff:
    """The comparison of two sides (see the module docstring); ``to_dict`` is the JSON."""

    threshold: float
    min_impact: float
    confidence: float
    gate_confidence: float
    replicates: int
    base: list[dict[str, Any]]
    head: list[dict[str, Any]]
    step: Change
    step_p90: tuple[float, float]
    step_count: tuple[int, int]
    categories: list[Change]  # largest absolute delta first
    kernels: list[Change]  # largest absolute delta first
    metrics: list[Change]
    findings: list[FindingChange]  # by (rule, pattern), largest change per step first
    warnings: list[str] = field(default_factory=list)
    phase: str = "all"  # the steps compared: decode, unknown (no phase known) or all
    # per operator family, the same shapes on both sides: time and efficiency
    # (tracekit.diff.efficiency); explains, does not gate
    efficiency: list[dict[str, Any]] = field(default_factory=list)
    # per launching operator, where the traces record them (tracekit.diff.operations)
    operations: list[dict[str, Any]] = field(default_factory=list)

    @property
    def gates(self) -> list[Change]:
        """The changes that decide the verdict: step median and every category."""
        return [self.step, *self.categories]

    @property
    def verdict(self) -> str:
        """``regression``, ``improvement`` or ``no significant change``."""
        statuses = {g.status for g in self.gates}
        for verdict in ("regression", "improvement"):
            if verdict in statuses:
                return verdict
        return "no significant change"

    @property
    def exit_code(self) -> int:
        """1 on a regression, else 0."""
        return 1 if self.verdict == "regression" else 0

    @property
    def categories_frame(self) -> pl.DataFrame:
        """One row per category: name, estimate (base … hi, ns per step), status
        (:func:`tracekit.diff.notebook.changes_frame`)."""
        return changes_frame([c.to_dict() for c in self.categories])

    @property
    def kernels_frame(self) -> pl.DataFrame:
        """One row per kernel (role) change: name, label, estimate, status and the detail
        fields (category, presence, matched_by, names …) as columns."""
        return changes_frame([c.to_dict() for c in self.kernels])

    def _repr_html_(self) -> str:
        """Jupyter's view of the diff (:func:`tracekit.diff.notebook.diff_html`)."""
        return diff_html(self.to_dict())

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: verdict and exit code first, then every comparison."""
        return {
            "verdict": self.verdict,
            "exit_code": self.exit_code,
            "threshold": self.threshold,
            "min_impact": self.min_impact,
            "confidence": self.confidence,
            "gate_confidence": self.gate_confidence,
            "bootstrap": {"replicates": self.replicates, "seed": SEED, "method": "hierarchical"},
            "phase": self.phase,
            "base": {"runs": self.base, "steps": self.step_count[0]},
            "head": {"runs": self.head, "steps": self.step_count[1]},
            "step": {
                **self.step.to_dict(),
                "p90": {"base": self.step_p90[0], "head": self.step_p90[1]},
                "count": {"base": self.step_count[0], "head": self.step_count[1]},
            },
            "categories": [c.to_dict() for c in self.categories],
            "kernels": [c.to_dict() for c in self.kernels],
            "metrics": [c.to_dict() for c in self.metrics],
            "findings": [f.to_dict() for f in self.findings],
            "efficiency": self.efficiency,
            "operations": self.operations,
            "warnings": self.warnings,
        }
