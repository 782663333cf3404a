"""The per-step part of the HTML report: the metrics table, outliers, the steps to drill into.

A step's time across devices is its slowest (rank, device) window: that is how long the
decode step took. The drill-down embeds raw events only for a few steps (first, median,
slowest, steps asked for, the worst steps of the top findings, then evenly spaced ones).
"""

from __future__ import annotations

from typing import Any

import polars as pl

from tracekit.errors import TraceError
from tracekit.metrics.columns import METRIC_COLUMNS
from tracekit.metrics.steps import primary_phase
from tracekit.model import Finding, ranked
from tracekit.reports.format import ROOFLINE_TABLE

SERIES = ["rank", "device"]
TUKEY_K = 1.5  # outlier fences: below Q1 - k·IQR or above Q3 + k·IQR
MIN_STEPS_FOR_OUTLIERS = 4


def outliers(metrics: pl.DataFrame) -> pl.Series:
    """Per (rank, device): whether each step's duration lies outside Tukey's fences."""
    dur = pl.col("dur").cast(pl.Float64)
    q1 = dur.quantile(0.25, "linear").over(SERIES)
    q3 = dur.quantile(0.75, "linear").over(SERIES)
    enough = pl.len().over(SERIES) >= MIN_STEPS_FOR_OUTLIERS
    fence = TUKEY_K * (q3 - q1)
    flag = enough & ((dur > q3 + fence) | (dur < q1 - fence))
    return metrics.select(flag.alias("outlier"))["outlier"]


def step_table(metrics: pl.DataFrame, keep: pl.Series | None = None) -> dict[str, list[Any]]:
    """``step_metrics`` column by column (every value as analysed) plus ``outlier`` (Tukey's
    fences over all rows); only the rows where ``keep`` is true when given; the roofline's
    columns too when some step has a roofline bound."""
    columns = list(METRIC_COLUMNS)
    if "roofline_ns" in metrics.columns and metrics["roofline_ns"].is_not_null().any():
        columns += ROOFLINE_TABLE
    rows = metrics.select(columns).with_columns(outlier=outliers(metrics))
    if keep is not None:
        rows = rows.filter(keep)
    return {col: rows[col].to_list() for col in rows.columns}


def step_times(metrics: pl.DataFrame) -> pl.DataFrame:
    """One row per step: ``dur`` of its slowest (rank, device) window, sorted by step."""
    return metrics.group_by("step").agg(pl.col("dur").max()).sort("step")


def default_steps(metrics: pl.DataFrame) -> dict[str, int]:
    """The first step, the step of median duration (lower median) and the slowest one; the
    median and the slowest among the decode steps when the trace has any."""
    times = step_times(metrics)
    if times.height == 0:
        return {}
    by_dur = step_times(primary_phase(metrics)).sort("dur", "step")
    return {
        "first": int(times["step"][0]),
        "median": int(by_dur["step"][(by_dur.height - 1) // 2]),
        "slowest": int(by_dur["step"][-1]),
    }


def parse_steps(text: str | None) -> list[int]:
    """``"3,17,40-42"`` -> [3, 17, 40, 41, 42] (for ``--steps``)."""
    out: list[int] = []
    for part in (text or "").split(","):
        part = part.strip()
        if not part:
            continue
        low, dash, high = part.partition("-")
        try:
            first, last = int(low), int(high) if dash else int(low)
        except ValueError:
            raise TraceError(f"--steps {text!r}: expected step numbers like 3,17,40-42") from None
        if last < first or last - first > 10_000:
            raise TraceError(f"--steps {part!r}: not a range of step numbers")
        out.extend(range(first, last + 1))
    return out


def embedded_steps(
    metrics: pl.DataFrame, findings: list[Finding], extra: list[int], limit: int, top: int = 10
) -> list[int]:
    """Steps whose raw events the report embeds: the defaults, ``extra`` and the worst steps
    of the ``top`` findings by impact (the rows of the page's findings table open them)
    always, then evenly spaced steps until ``limit`` steps are chosen."""
    known = step_times(metrics)["step"].to_list()
    missing = sorted(set(extra) - set(known))
    if missing:
        span = f"{known[0]}-{known[-1]}" if known else "none"
        raise TraceError(f"--steps: no step {missing[0]} in this trace (steps {span})")
    worst = [int(f.step) for f in ranked(findings)[:top] if f.step is not None]
    present = set(known)
    chosen = list(
        dict.fromkeys(
            [*default_steps(metrics).values(), *extra, *(s for s in worst if s in present)]
        )
    )
    must = len(chosen)
    room = limit - len(chosen)
    if room > 0 and known:
        stride = max(len(known) / room, 1.0)
        spaced = [known[min(int(i * stride), len(known) - 1)] for i in range(room)]
        chosen.extend(s for s in dict.fromkeys(spaced) if s not in chosen)
    return sorted(chosen[: max(limit, must)])
