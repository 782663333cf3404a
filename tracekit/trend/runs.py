"""Per-run figures of a trend, over the steps of the phase every run shares
(:func:`tracekit.diff.samples.compared_phase`): the step median with the bootstrap interval
the diff uses (:mod:`tracekit.bootstrap`, steps resampled), the mean time per step of each
category (``CATEGORIES`` order), of fallback kernels and of exposed communication, the
roofline efficiency where the trace recorded shapes (the summed roofline bounds of the shaped
operators over their time), the vendor and what makes the run's numbers less sure."""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from tracekit import bootstrap
from tracekit.analysis import Analysis
from tracekit.diff.result import REPLICATES, SEED
from tracekit.diff.samples import CATEGORY_COLUMNS, STEP, run_samples
from tracekit.names import kernel_key
from tracekit.taxonomy import CATEGORIES, vendor_of
from tracekit.trend.series import capture_date


def _num(value: Any) -> float | None:
    return float(value) if value is not None and np.isfinite(value) else None


def _mean(steps: pl.DataFrame, column: str) -> float | None:
    values = steps.get_column(column).cast(pl.Float64).drop_nulls().drop_nans()
    return _num(values.mean()) if values.len() else None


def median_interval(durations: np.ndarray, confidence: float) -> dict[str, float | None]:
    """The median of the step durations and its bootstrap ``confidence`` interval (none
    for one step: there is no step-to-step noise to resample)."""
    if durations.size == 0:
        return {"median": None, "lo": None, "hi": None}
    if durations.size == 1:
        return {"median": float(durations[0]), "lo": None, "hi": None}
    reps = np.concatenate(
        [
            bootstrap.medians(w, durations)
            for w in bootstrap.chunks([durations.size], REPLICATES, SEED)
        ]
    )
    lo, hi = bootstrap.interval(reps[:, None], confidence)
    return {"median": float(np.median(durations)), "lo": _num(lo[0]), "hi": _num(hi[0])}


def efficiency(analysis: Analysis) -> float | None:
    """Roofline bound over time of the operators with shapes and a bound, or None."""
    ops = analysis.roofline.operators
    if not analysis.roofline.shaped or not {"bound_ns", "time_ns"} <= set(ops.columns):
        return None
    bounded = ops.filter(pl.col("bound_ns").is_not_null())
    time = float(bounded["time_ns"].sum() or 0)
    return float(bounded["bound_ns"].sum()) / time if time > 0 else None


def fallback_keys(analysis: Analysis) -> frozenset[str]:
    """The kernel keys (:func:`tracekit.names.kernel_key`) of the run's fallback kernels."""
    names = analysis.work.filter(pl.col("is_fallback")).get_column("name").cast(pl.String)
    return frozenset(kernel_key(n) for n in names.drop_nulls().unique().to_list())


def run_warnings(analysis: Analysis) -> list[str]:
    """What makes the run's numbers less sure: partial capture, low-confidence steps, the
    step finder's and the reader's warnings (each once)."""
    found = [
        analysis.capture_note,
        analysis.low_confidence,
        *analysis.steps.warnings,
        *(analysis.timeline.meta.get("warnings") or []),
    ]
    return list(dict.fromkeys(str(w) for w in found if w))


def run_record(
    analysis: Analysis, index: int, label: str, source: str, phase: str, confidence: float
) -> dict[str, Any]:
    """One run of the trend JSON (``vs_baseline`` is filled in by :func:`vs_baseline`)."""
    meta = analysis.timeline.meta
    data = run_samples(analysis, phase)
    steps = data.steps
    durations = steps.get_column(STEP).cast(pl.Float64).to_numpy()
    return {
        "index": index,
        "label": label,
        "source": source,
        "format": meta.get("format"),
        "vendor": vendor_of(meta),
        "date": capture_date(meta),
        "steps": steps.height,
        "steps_by": analysis.steps.method,
        "phase": phase,
        "step_ns": median_interval(durations, confidence),
        "categories": {
            c: (_mean(steps, col) or 0.0) for c, col in zip(CATEGORIES, CATEGORY_COLUMNS)
        },
        "fallback_ns": _mean(steps, "fallback_ns"),
        "exposed_comm_ns": _mean(steps, "exposed_comm_ns"),
        "efficiency": efficiency(analysis),
        "vs_baseline": {"delta_ns": None, "rel": None},
        "warnings": run_warnings(analysis),
    }


def vs_baseline(runs: list[dict[str, Any]], baseline: int) -> None:
    """Fill every run's ``vs_baseline``: its step median minus the baseline's, and that over
    the baseline's."""
    base = runs[baseline]["step_ns"]["median"]
    for run in runs:
        median = run["step_ns"]["median"]
        delta = None if base is None or median is None else median - base
        rel = delta / base if delta is not None and base else None
        run["vs_baseline"] = {"delta_ns": delta, "rel": rel}
