"""A second look at the steps found: lower the confidence, with a warning, where the result
looks wrong (one window holding most of the device time, rows placed by host time only,
most device time outside every step)."""

from __future__ import annotations

import polars as pl

from tracekit.steps.model import CONFIDENCES, Steps
from tracekit.steps.period import NOT_STEPS

GIANT_SHARE = 0.5  # with at least GIANT_STEPS steps, no step should hold more device time
GIANT_STEPS = 4
HOST_TIME_LOW = 0.10  # share of device time placed by host time only: low confidence ...
HOST_TIME_MEDIUM = 0.01  # ... or at most medium
OUTSIDE_SHARE = 0.5


def _cap(steps: Steps, level: str) -> None:
    if CONFIDENCES.index(steps.confidence) < CONFIDENCES.index(level):
        steps.confidence = level


def step_shares(work: pl.DataFrame, steps: Steps) -> pl.DataFrame:
    """Per (rank, step): its device time ``ns``, its ``label`` and ``phase``, its ``share`` of
    the device time of the steps of its phase on its rank, and how many ``steps`` those are (a
    prefill step may well outweigh the decode steps: steps are compared within a phase)."""
    labels = steps.ranges.select("rank", "step", "label", "phase")
    per = (
        work.filter(pl.col("step").is_not_null())
        .group_by("rank", "step")
        .agg(ns=pl.col("dur").sum())
        .join(labels, on=["rank", "step"], how="left")
        .filter(~pl.col("label").is_in(NOT_STEPS).fill_null(False))
    )
    group = ["rank", pl.col("phase").fill_null("unknown")]
    return per.with_columns(
        share=pl.col("ns") / pl.col("ns").sum().over(group), steps=pl.len().over(group)
    )


def review(steps: Steps, work: pl.DataFrame, lead_ns: int | None = None) -> Steps:
    """``steps`` with its confidence lowered and warnings added where ``work`` (device rows
    with their ``step`` and ``placed``, from :func:`~tracekit.steps.assign`) shows a problem;
    ``lead_ns`` is how far the host runs ahead of the device (``placement.host_lead``): rows
    placed by host time are at risk of landing a step late only when it is a good part of a
    step."""
    total = int(work["dur"].sum() or 0)
    if total <= 0 or steps.method == "whole":
        return steps
    per = step_shares(work, steps)
    giants = per.filter((pl.col("steps") >= GIANT_STEPS) & (pl.col("share") > GIANT_SHARE))
    if giants.height:
        top = giants.sort("share", descending=True).row(0, named=True)
        where = f"rank {top['rank']} " if per["rank"].n_unique() > 1 else ""
        steps.warnings.append(
            f"{where}step {top['step']} holds {top['share']:.0%} of the device time in steps"
        )
        _cap(steps, "low")
    # unknown lead (no launch links at all) counts as ahead: nothing says it is not
    # with one step per rank there is no other step to land in
    several = steps.ranges.group_by("rank").len()["len"].max() or 0
    ahead = several > 1 and (lead_ns is None or lead_ns * 4 >= _step_ns(work))
    if "placed" in work.columns and ahead:
        by_host = work.filter(pl.col("placed") == "host_time")
        if by_host.height:
            share = int(by_host["dur"].sum()) / total
            steps.warnings.append(
                f"{by_host.height:,} device rows ({share:.1%} of device"
                " time) have no launch link and lie outside every device window: placed by"
                " the host step range their start falls in, which may be a step late"
            )
            if share > HOST_TIME_LOW:
                _cap(steps, "low")
            elif share > HOST_TIME_MEDIUM:
                _cap(steps, "medium")
    outside = total - int(work.filter(pl.col("step").is_not_null())["dur"].sum() or 0)
    if outside / total > OUTSIDE_SHARE:
        steps.warnings.append(f"{outside / total:.0%} of the device time lies outside every step")
        _cap(steps, "medium")
    return steps


def _step_ns(work: pl.DataFrame) -> float:
    """The median span of a step's device rows (first start to last end) per device."""
    spans = (
        work.filter(pl.col("step").is_not_null())
        .group_by("rank", "device", "step")
        .agg(ns=(pl.col("ts") + pl.col("dur")).max() - pl.col("ts").min())
    )
    return float(spans["ns"].median() or 0) if spans.height else 0.0
