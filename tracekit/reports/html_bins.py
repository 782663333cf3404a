"""The per-step charts and table of the HTML report, bounded for any number of steps.

A page carries ``step_metrics`` row by row up to :data:`MAX_STEP_ROWS` rows (a step count a
browser draws comfortably). Beyond that the rows are aggregated (:func:`step_bins`): per
(rank, device, phase), bins of :math:`w` consecutive steps of that phase (``w`` chosen so
that a trace has at most about :data:`BIN_BUDGET` bins) with the step count, the median,
p10 and p90 of the step time (the chart's band) and the mean of each metric column; the
:data:`EXTREMES` slowest and fastest steps of each (rank, device, phase) stay individual rows
(:func:`kept_steps`, the chart's points), with the steps the drill-down embeds. The page
says what was aggregated (:func:`aggregation_note`); ``--format json`` has every row.

Payload budget per section (bytes are about 10 per number): the step rows at most
``MAX_STEP_ROWS`` or ``2 · EXTREMES`` per (rank, device, phase) plus the drilled-down steps;
the bins ``BIN_BUDGET`` + one per (rank, device, phase) rows of ``len(BIN_MEANS) + 11``
numbers; the findings' step lists ``html_findings.STEP_ITEMS`` each; the drill-down
``html.MAX_STEPS`` steps of ``html.MAX_EVENTS`` events.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from tracekit.taxonomy import CATEGORIES

MAX_STEP_ROWS = 2_000  # step_metrics rows a page carries one by one; beyond, bins
BIN_BUDGET = 1_000  # bins per trace (every rank, device and phase together), about
EXTREMES = 25  # slowest and fastest steps per (rank, device, phase) kept as points
SERIES = ["rank", "device", "phase"]
# the metric columns a bin carries as means (the step-time and category charts, overlap line)
BIN_MEANS = (
    "busy_ns",
    "idle_ns",
    "compute_ns",
    "comm_ns",
    "exposed_comm_ns",
    "comm_overlap_ratio",
    "fallback_ns",
    "bubble_ns",
    *(f"cat_{c}_ns" for c in CATEGORIES),
)


def aggregated(metrics: pl.DataFrame) -> bool:
    """Whether the page aggregates these step rows (more than :data:`MAX_STEP_ROWS`)."""
    return metrics.height > MAX_STEP_ROWS


def bin_width(rows: int, budget: int = BIN_BUDGET) -> int:
    """Consecutive steps per bin so that ``rows`` step rows make at most about ``budget``
    bins."""
    return max(1, -(-rows // budget))


def _ordered(metrics: pl.DataFrame) -> pl.DataFrame:
    """The rows by (rank, device, phase, step), ``phase`` null as ``unknown``, each with its
    position in its (rank, device, phase) group."""
    return (
        metrics.with_columns(pl.col("phase").fill_null("unknown"))
        .sort([*SERIES, "step"])
        .with_columns(_at=pl.int_range(pl.len()).over(SERIES))
    )


def step_bins(metrics: pl.DataFrame, budget: int = BIN_BUDGET) -> dict[str, list[Any]]:
    """Per (rank, device, phase), bins of consecutive steps, column by column: ``first`` and
    ``last`` step, ``count``, the step time's ``median``, ``p10``, ``p90``, ``min``, ``max``
    (linear percentiles, as numpy's) and ``mean_<column>`` of :data:`BIN_MEANS` (ns rounded
    to whole ns, the overlap ratio to 1e-4; a category column with no time left out); sorted
    by rank, device and first step."""
    width = bin_width(metrics.height, budget)
    dur = pl.col("dur").cast(pl.Float64)
    means = [pl.col(c).cast(pl.Float64).mean().alias(f"mean_{c}") for c in BIN_MEANS]
    bins = (
        _ordered(metrics)
        .with_columns(_bin=pl.col("_at") // width)
        .group_by([*SERIES, "_bin"])
        .agg(
            *means,
            first=pl.col("step").min(),
            last=pl.col("step").max(),
            count=pl.len(),
            median=dur.median(),
            p10=dur.quantile(0.1, "linear"),
            p90=dur.quantile(0.9, "linear"),
            min=pl.col("dur").min(),
            max=pl.col("dur").max(),
        )
        .sort("rank", "device", "first")
        .drop("_bin")
    )
    # whole ns (ratios to 1e-4) keep the numbers short; a category no step has is left out
    ns = [c for c in bins.columns if c in ("median", "p10", "p90") or c.endswith("_ns")]
    bins = bins.with_columns(
        pl.col(ns).round(0).cast(pl.Int64), pl.col("mean_comm_overlap_ratio").round(4)
    )
    empty = [c for c in bins.columns if c.startswith("mean_cat_") and not (bins[c] > 0).any()]
    return {c: bins[c].to_list() for c in bins.columns if c not in empty}


def kept_steps(metrics: pl.DataFrame, steps: list[int], extremes: int = EXTREMES) -> pl.Series:
    """Per row of ``metrics``: whether the page keeps it as a row of its own (one of the
    ``extremes`` slowest or fastest of its (rank, device, phase), ties by step, or a step of
    ``steps``)."""
    group = [pl.col(c).fill_null("unknown") if c == "phase" else pl.col(c) for c in SERIES]
    slow = pl.struct(-pl.col("dur"), pl.col("step")).rank("ordinal").over(group)
    fast = pl.struct(pl.col("dur"), pl.col("step")).rank("ordinal").over(group)
    keep = (slow <= extremes) | (fast <= extremes) | pl.col("step").is_in(steps)
    return metrics.select(keep.alias("kept"))["kept"]


def aggregation_note(metrics: pl.DataFrame, bins: dict[str, list[Any]], kept: int) -> str:
    """What the page aggregated, in one sentence."""
    steps = metrics["step"].n_unique()
    width = bin_width(metrics.height)
    return (
        f"{steps:,} steps ({metrics.height:,} step rows) are drawn as {len(bins['count']):,} "
        f"bins of up to {width:,} consecutive steps per device and phase: the median step time "
        f"as a line, p10–p90 as a band, the means of the other columns; the {EXTREMES} slowest "
        f"and fastest steps of each device and phase and the drilled-down steps ({kept:,} rows) "
        "are points and rows of their own. tracekit report --format json has every step."
    )


def aggregate(
    metrics: pl.DataFrame, table: Any, embedded: list[int]
) -> tuple[dict[str, list[Any]], dict[str, Any]]:
    """``table(rows)`` of the rows the page keeps and the ``step_bins`` section (its
    ``bins``, ``note``, ``width``, ``steps`` and ``rows``) for an aggregated page."""
    keep = kept_steps(metrics, embedded)
    rows = table(metrics, keep)
    bins = step_bins(metrics)
    section = {
        "bins": bins,
        "width": bin_width(metrics.height),
        "steps": metrics["step"].n_unique(),
        "rows": metrics.height,
        "extremes": EXTREMES,
        "note": aggregation_note(metrics, bins, int(keep.sum())),
    }
    return rows, section
