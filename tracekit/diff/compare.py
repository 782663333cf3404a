"""The comparison itself: bootstrap both sides' samples, estimate every change, judge the
gates and explain the verdict (see :mod:`tracekit.diff`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from tracekit import bootstrap
from tracekit.analysis import Analysis
from tracekit.diff.efficiency import compare_efficiency
from tracekit.diff.findings import compare_findings
from tracekit.diff.operations import compare_operations, member_times
from tracekit.diff.result import REPLICATES, SEED, Change, Diff, Estimate
from tracekit.diff.roles import Role
from tracekit.diff.samples import (
    CATEGORY_COLUMNS,
    RULE_METRICS,
    STEP_COLUMNS,
    RunSamples,
    Samples,
    samples,
)
from tracekit.errors import TraceError
from tracekit.metrics.columns import LABELS
from tracekit.names import distinct_short_names, short_name
from tracekit.taxonomy import CATEGORIES

MIN_STEPS = 2  # per side, for an interval


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
    base: np.ndarray,
    head: np.ndarray,
    boot_b: np.ndarray,
    boot_h: np.ndarray,
    confidence: float,
    measurable: bool = True,
) -> list[Estimate]:
    """One :class:`Estimate` per column from point values and bootstrap replicates; without
    intervals when not ``measurable`` (a side with one step has no noise to resample)."""
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
        bounds = (lo[i], hi[i], rel_lo[i], rel_hi[i]) if measurable else (None,) * 4
        lo_i, hi_i, rel_lo_i, rel_hi_i = (_num(v) for v in bounds)
        if not positive[i]:
            rel_lo_i = rel_hi_i = None
        out.append(Estimate(b, h, delta, _num(rel[i]), lo_i, hi_i, rel_lo_i, rel_hi_i))
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


def _by_size(change: Change) -> tuple[float, str]:
    return -abs(change.estimate.delta or 0), change.name


def _side(runs: list[RunSamples]) -> list[dict[str, Any]]:
    return [
        {
            "source": r.source,
            "format": r.format,
            "steps_by": r.method,
            "devices": r.devices,
            "steps": r.steps.height,
        }
        for r in runs
    ]


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
    for column, better in RULE_METRICS.items():
        e = est[STEP_COLUMNS.index(column)]
        if e.base is not None or e.head is not None:
            detail = {"higher_is_better": better > 0}
            label = LABELS[column].text
            out.append(Change("metric", column, e, _metric_status(e, better), label, detail))
    return out


def _names(keys: list[str], times: dict[str, tuple[float, float]]) -> str:
    """The busiest of ``keys``, and how many more."""
    busiest = max(keys, key=lambda k: (times.get(k, (0.0, 0.0))[0], k))
    more = f" +{len(keys) - 1}" if len(keys) > 1 else ""
    return short_name(busiest, 40) + more


def _role_label(role: Role, plain: str, times: tuple[dict, dict]) -> str:
    """``plain`` (the distinct short name) for a kernel on both sides; else what the role
    runs on each side, after its operator where one is known."""
    if role.presence == "both":
        return plain
    if not role.in_base or not role.in_head:
        return plain
    shared = sorted(set(role.base_keys) & set(role.head_keys))
    if shared:  # one kernel on both sides, with others beside it on one side or both
        extra = [
            f"{side} also {_names(others, t)}"
            for side, keys, t in (
                ("base", role.base_keys, times[0]),
                ("head", role.head_keys, times[1]),
            )
            if (others := [k for k in keys if k not in shared])
        ]
        text = f"{_names(shared, times[0])}; {'; '.join(extra)}"
    else:
        text = f"{_names(role.base_keys, times[0])} → {_names(role.head_keys, times[1])}"
    ops = ", ".join(role.ops[:2]) + (f" +{len(role.ops) - 2}" if len(role.ops) > 2 else "")
    return f"{ops}: {text}" if ops else text


def _kernel_changes(
    data: Samples, est: list[Estimate], threshold: float, floor: float
) -> list[Change]:
    """One change per role (time per step; launches per step and how the role was matched
    in ``detail``), largest absolute delta first."""
    out = []
    first, n_k = len(STEP_COLUMNS), len(data.kernels)
    labels = distinct_short_names([k.key for k in data.kernels])
    times = member_times(data.base_runs), member_times(data.head_runs)
    for i, (role, label) in enumerate(zip(data.kernels, labels)):
        e, n = est[first + i], est[first + n_k + i]
        detail = {
            "category": role.category,
            "fallback": role.fallback,
            "presence": role.presence,
            "matched_by": role.matched_by,
            "base_names": role.base_keys,
            "head_names": role.head_keys,
            "head_name": role.head_keys[0] if role.presence == "renamed" else None,
            "op": role.op,
            "ops": role.ops,
            "count_base": n.base,
            "count_head": n.head,
        }
        if role.presence in ("renamed", "role"):
            detail["members"] = [
                {"side": tag, "name": key, "ns": side[key][0], "count": side[key][1]}
                for tag, keys, side in (
                    ("base", role.base_keys, times[0]),
                    ("head", role.head_keys, times[1]),
                )
                for key in keys
            ]
        status = judge(e, threshold, abs(e.delta or 0) >= floor)
        out.append(Change("kernel", role.key, e, status, _role_label(role, label, times), detail))
    return sorted(out, key=_by_size)


def compare(
    base: list[Analysis],
    head: list[Analysis],
    threshold: float = 0.05,
    min_impact: float = 0.01,
    confidence: float = 0.95,
    allow_low_confidence: bool = False,
    phase: str | None = None,
) -> Diff:
    """Compare the analysed runs of ``base`` and ``head`` (see the module docstring). Runs
    whose steps were found with low confidence are refused unless ``allow_low_confidence``:
    a gate on steps that may be wrong could pass or fail a change by accident. ``phase``
    (``decode``, ``unknown``, ``all``) chooses the steps compared; by default the phase both
    sides share (:func:`tracekit.diff.samples.compared_phase`)."""
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
    data = samples(base, head, phase)
    doubtful = [
        run.timeline.meta.get("source") or "?" for run in [*base, *head] if run.low_confidence
    ]
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
    # one step on a side: no step-to-step noise to resample, so no interval and no
    # significance (a zero-width interval would pass any difference for a certain one)
    measurable = min(len(data.base), len(data.head)) >= MIN_STEPS
    gate_est = _estimates(mean_b, mean_h, boot_b, boot_h, gate_conf, measurable)
    step_b, step_h = data.base[:, 0], data.head[:, 0]
    median = _estimates(
        np.array([np.median(step_b)]),
        np.array([np.median(step_h)]),
        med_b[:, None],
        med_h[:, None],
        gate_conf,
        measurable,
    )[0]
    label = "decode step" if data.phase == "decode" else "step"
    step = Change("step", label, median, judge(median, threshold), f"{label} time (median)")
    floor = min_impact * float(np.median(step_b))
    categories = sorted(
        (
            Change(
                "category",
                name,
                gate_est[i],
                judge(gate_est[i], threshold, abs(gate_est[i].delta or 0) >= floor),
                name,
            )
            for name, i in zip(CATEGORIES, cats)
            if i in present
        ),
        key=_by_size,
    )
    est = _estimates(mean_b, mean_h, boot_b, boot_h, confidence, measurable)
    warnings = _warnings(data.base_runs, data.head_runs, data.phase)
    if not measurable:
        warnings.append(
            f"{min(len(data.base), len(data.head))} step on a side: the noise cannot be measured,"
            " so no change is called significant; profile more steps or runs"
        )
    if doubtful:
        warnings.append(
            f"steps found with low confidence in {', '.join(map(str, doubtful))}: compared"
            " anyway (--allow-low-confidence)"
        )
    return Diff(
        threshold,
        min_impact,
        confidence,
        gate_conf,
        REPLICATES,
        _side(data.base_runs),
        _side(data.head_runs),
        step,
        (float(np.percentile(step_b, 90)), float(np.percentile(step_h, 90))),
        (len(step_b), len(step_h)),
        categories,
        _kernel_changes(data, est, threshold, floor),
        _metric_changes(est),
        compare_findings(base, head, floor, float(np.median(step_b))),
        warnings,
        data.phase,
        compare_efficiency(base, head, threshold),
        compare_operations(data.base_runs, data.head_runs),
    )
