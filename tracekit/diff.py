"""``tracekit diff``: is the candidate (head) slower than the baseline (base), and where?

:func:`compare` takes the analysed runs of each side and returns a :class:`Diff`: the decode
step time (median, p90, count), the time per category and per kernel, the rule metrics and
the findings of both sides, each change with a bootstrap confidence interval, and a verdict.

Statistics (see :mod:`tracekit.bootstrap`): the samples are decode steps; with several runs
per side a hierarchical bootstrap resamples runs, then steps, so run-to-run variation widens
the interval instead of passing for a change. Step time is compared on the median; category
and kernel times on the mean per step, which adds up (kernel deltas sum to their category's
delta). A change *gates* (exit code 1) when

* it is beyond the threshold: step median or a category's time per step changed by at least
  ``threshold`` (5 % by default) — the practical bar;
* it is significant: the ``confidence`` (95 %) interval of the change excludes zero — the
  noise bar;
* for a category, it matters: its delta is at least ``min_impact`` (1 %) of the base step
  median, so a small category cannot fail a build by itself.

A change beyond the threshold whose interval includes zero is reported as not significant
(more steps or runs would tell). Kernels, rule metrics and findings explain; they do not gate.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from tracekit import bootstrap
from tracekit.analysis import Analysis
from tracekit.diff_samples import (
    CATEGORY_COLUMNS,
    RULE_METRICS,
    STEP_COLUMNS,
    RunSamples,
    Samples,
    samples,
)
from tracekit.errors import TraceError
from tracekit.reports.format import distinct_short_names
from tracekit.taxonomy import CATEGORIES

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
class FindingChange:
    """A kind of finding (rule + title with its numbers masked) and how often per run."""

    rule: str
    title: str
    severity: str
    base: float
    head: float
    status: str  # appeared, disappeared, more, fewer, same
    example: str  # the detail of one occurrence

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return asdict(self)


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
    findings: list[FindingChange]
    warnings: list[str] = field(default_factory=list)
    phase: str = "all"  # the steps compared: decode, unknown (no phase known) or all

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
            "warnings": self.warnings,
        }


def _boot(values: np.ndarray, lengths: list[int], seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Bootstrap column means (replicates × columns) and step-time medians (replicates)."""
    means, medians = [], []
    for w in bootstrap.chunks(lengths, REPLICATES, seed):
        means.append(bootstrap.nan_means(w, values))
        medians.append(bootstrap.medians(w, values[:, 0]))
    return np.vstack(means), np.concatenate(medians)


def _nan_mean(values: np.ndarray) -> np.ndarray:
    """Column means without NaN cells (NaN for a column without any value, no warning)."""
    return bootstrap.nan_means(np.ones((1, len(values))), values)[0]


def _num(value: float) -> float | None:
    return None if value is None or not np.isfinite(value) else float(value)


def _estimates(
    base: np.ndarray, head: np.ndarray, boot_b: np.ndarray, boot_h: np.ndarray, confidence: float
) -> list[Estimate]:
    """One :class:`Estimate` per column from point values and bootstrap replicates."""
    lo, hi = bootstrap.interval(boot_h - boot_b, confidence)
    positive = (boot_b > 0).all(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        ratios = boot_h / np.where(boot_b > 0, boot_b, 1) - 1
        rel_lo, rel_hi = bootstrap.interval(ratios, confidence)
        rel = np.where(base > 0, (head - base) / np.where(base > 0, base, 1), np.nan)
    out = []
    for i in range(len(base)):
        b, h = _num(base[i]), _num(head[i])
        delta = None if b is None or h is None else h - b
        out.append(
            Estimate(b, h, delta, _num(rel[i]), _num(lo[i]), _num(hi[i]),
                     _num(rel_lo[i]) if positive[i] else None,
                     _num(rel_hi[i]) if positive[i] else None)
        )  # fmt: skip
    return out


def judge(est: Estimate, threshold: float, material: bool = True) -> str:
    """The gate status of a time (lower is better); see the module docstring."""
    if not est.delta:
        return "unchanged"
    beyond = est.rel is None or abs(est.rel) >= threshold  # from zero: beyond any threshold
    if not beyond or not material:
        return "within threshold"
    if not est.significant:
        return "not significant"
    return "regression" if est.delta > 0 else "improvement"


def _metric_status(est: Estimate, better: int) -> str:
    """``better`` / ``worse`` by the direction of the change (``estimate.significant`` says
    whether it stands out of the noise), or ``unchanged``."""
    if not est.delta:
        return "unchanged"
    return "better" if est.delta * better > 0 else "worse"


_NUMBER = re.compile(r"\d[\d,.]*")


def _findings(base: list[Analysis], head: list[Analysis]) -> list[FindingChange]:
    """Kinds of findings (rule + title, numbers masked) per run on each side."""
    per_side: list[Counter[tuple[str, str]]] = []
    examples: dict[tuple[str, str], tuple[str, str]] = {}
    for side in (base, head):
        counts: Counter[tuple[str, str]] = Counter()
        for analysis in side:
            for f in analysis.findings:
                key = (f.rule, _NUMBER.sub("N", f.title))
                counts[key] += 1
                examples.setdefault(key, (f.severity, f.detail))
        per_side.append(counts)
    out = []
    for key in sorted(set(per_side[0]) | set(per_side[1])):
        b, h = per_side[0][key] / len(base), per_side[1][key] / len(head)
        status = (
            "appeared" if not b else "disappeared" if not h
            else "more" if h > b else "fewer" if h < b else "same"
        )  # fmt: skip
        severity, example = examples[key]
        out.append(FindingChange(key[0], key[1], severity, b, h, status, example))
    return out


def _by_size(change: Change) -> tuple[float, str]:
    return -abs(change.estimate.delta or 0), change.name


def _side(runs: list[RunSamples]) -> list[dict[str, Any]]:
    return [
        {"source": r.source, "format": r.format, "steps_by": r.method, "devices": r.devices,
         "steps": r.steps.height}
        for r in runs
    ]  # fmt: skip


def _warnings(base: list[RunSamples], head: list[RunSamples], phase: str) -> list[str]:
    """What makes the comparison less trustworthy than its intervals say."""
    out = []
    methods = [sorted({r.method for r in side}) for side in (base, head)]
    if methods[0] != methods[1]:
        out.append(
            f"steps were found differently (base: {', '.join(methods[0])}; head: "
            f"{', '.join(methods[1])}): step times may not compare; pass --step-marker"
        )
    if phase == "all" and any(r.phases for side in (base, head) for r in side):
        out.append(
            "the sides' steps have no phase in common (decode on one side only): all steps are"
            " compared, prefill and decode alike"
        )
    left_out = [sum(r.left_out for r in side) for side in (base, head)]
    if any(left_out):
        out.append(
            f"only the steps of phase {phase} are compared; the others are left out (base:"
            f" {left_out[0]}, head: {left_out[1]})"
        )
    devices = [sorted({r.devices for r in side}) for side in (base, head)]
    if devices[0] != devices[1]:
        out.append(
            f"different device counts (base: {devices[0]}; head: {devices[1]}): times are per "
            "device, a step lasts as long as its slowest device"
        )
    return out


def _metric_changes(est: list[Estimate]) -> list[Change]:
    """The rule metrics (mean per step) that either side has."""
    out = []
    for column, (label, better) in RULE_METRICS.items():
        e = est[STEP_COLUMNS.index(column)]
        if e.base is not None or e.head is not None:
            detail = {"higher_is_better": better > 0}
            out.append(Change("metric", column, e, _metric_status(e, better), label, detail))
    return out


def _kernel_changes(
    data: Samples, est: list[Estimate], threshold: float, floor: float
) -> list[Change]:
    """One change per matched kernel (time per step; launches per step in ``detail``),
    largest absolute delta first."""
    out = []
    first, n_k = len(STEP_COLUMNS), len(data.kernels)
    labels = distinct_short_names([k.key for k in data.kernels])
    for i, (info, label) in enumerate(zip(data.kernels, labels)):
        e, n = est[first + i], est[first + n_k + i]
        presence = (
            "renamed" if info.head_key else "both" if info.in_base and info.in_head
            else "appeared" if info.in_head else "disappeared"
        )  # fmt: skip
        detail = {
            "category": info.category, "fallback": info.fallback, "presence": presence,
            "head_name": info.head_key, "count_base": n.base, "count_head": n.head,
        }  # fmt: skip
        status = judge(e, threshold, abs(e.delta or 0) >= floor)
        out.append(Change("kernel", info.key, e, status, label, detail))
    return sorted(out, key=_by_size)


def compare(
    base: list[Analysis],
    head: list[Analysis],
    threshold: float = 0.05,
    min_impact: float = 0.01,
    confidence: float = 0.95,
    allow_low_confidence: bool = False,
) -> Diff:
    """Compare the analysed runs of ``base`` and ``head`` (see the module docstring). Runs
    whose steps were found with low confidence are refused unless ``allow_low_confidence``:
    a gate on steps that may be wrong could pass or fail a change by accident."""
    if not base or not head:
        raise TraceError("diff: each side needs at least one run")
    for side, runs in (("base", base), ("head", head)):
        for run in runs:
            if run.low_confidence and not allow_low_confidence:
                source = run.timeline.meta.get("source") or "?"
                raise TraceError(
                    f"diff: {side} {source}: {run.low_confidence}; refusing to gate on it"
                    " (pass --allow-low-confidence to compare anyway)"
                )
    data = samples(base, head)
    doubtful = [run.timeline.meta.get("source") or "?" for run in [*base, *head]
                if run.low_confidence]  # fmt: skip
    for side, runs in (("base", data.base_runs), ("head", data.head_runs)):
        for run in runs:
            if run.steps.height == 0:
                raise TraceError(f"{side} {run.source}: no device work to compare")
    boot_b, med_b = _boot(data.base, data.base_lengths, SEED)
    boot_h, med_h = _boot(data.head, data.head_lengths, SEED + 1)
    mean_b, mean_h = _nan_mean(data.base), _nan_mean(data.head)
    # The gates (step median + each category present) share one error rate: Bonferroni.
    cats = [STEP_COLUMNS.index(c) for c in CATEGORY_COLUMNS]
    present = [i for i in cats if mean_b[i] or mean_h[i]]
    gate_conf = 1 - (1 - confidence) / (1 + len(present))
    gate_est = _estimates(mean_b, mean_h, boot_b, boot_h, gate_conf)
    step_b, step_h = data.base[:, 0], data.head[:, 0]
    median = _estimates(
        np.array([np.median(step_b)]), np.array([np.median(step_h)]),
        med_b[:, None], med_h[:, None], gate_conf,
    )[0]  # fmt: skip
    label = "decode step" if data.phase == "decode" else "step"
    step = Change("step", label, median, judge(median, threshold), f"{label} time (median)")
    floor = min_impact * float(np.median(step_b))
    categories = sorted(
        (
            Change("category", name, gate_est[i],
                   judge(gate_est[i], threshold, abs(gate_est[i].delta or 0) >= floor), name)
            for name, i in zip(CATEGORIES, cats) if i in present
        ),
        key=_by_size,
    )  # fmt: skip
    est = _estimates(mean_b, mean_h, boot_b, boot_h, confidence)
    return Diff(
        threshold, min_impact, confidence, gate_conf, REPLICATES, _side(data.base_runs),
        _side(data.head_runs), step,
        (float(np.percentile(step_b, 90)), float(np.percentile(step_h, 90))),
        (len(step_b), len(step_h)), categories, _kernel_changes(data, est, threshold, floor),
        _metric_changes(est), _findings(base, head),
        _warnings(data.base_runs, data.head_runs, data.phase) + [
            f"steps found with low confidence in {', '.join(map(str, doubtful))}: compared"
            " anyway (--allow-low-confidence)"] * bool(doubtful), data.phase,
    )  # fmt: skip
