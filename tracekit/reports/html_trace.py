"""The per-trace tables of the HTML report: overview, top kernels, fallbacks, stream overlap
(the findings are in :mod:`tracekit.reports.html_findings`).

All numbers are ns (or ratios) as the analysis computed them; the page formats them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from itertools import combinations
from typing import Any

import polars as pl

from tracekit.analysis import Analysis, steps_summary
from tracekit.intervals import lengths, merge
from tracekit.metrics import IS_COMPUTE
from tracekit.metrics.steps import phase_summary, primary_phase
from tracekit.names import distinct_short_names
from tracekit.reports.checks_text import tally
from tracekit.reports.html_steps import step_times
from tracekit.reports.workload_text import stack_line

TOTALS = (
    "dur",
    "busy_ns",
    "idle_ns",
    "compute_ns",
    "comm_ns",
    "exposed_comm_ns",
    "fallback_ns",
    "fused_comm_ns",
    "bubble_ns",
)
LABEL_WIDTH = 90  # kernel names are shortened to this (the full name is the cell's tooltip)
MAX_MATRIX_STREAMS = 12  # the busiest streams of a device in its overlap matrix


def producer_text(producer: Any) -> str:
    """``{"name": …, "version": …}`` (or anything else) as one line."""
    if not isinstance(producer, Mapping):
        return "" if producer is None else str(producer)
    return " ".join(str(v) for v in (producer.get("name"), producer.get("version")) if v)


def overview(analysis: Analysis, label: str) -> dict[str, Any]:
    """What the trace is, how steps were found and its totals over all steps."""
    meta = analysis.timeline.meta
    metrics = analysis.step_metrics
    primary = primary_phase(metrics)
    times = step_times(primary)["dur"]
    df = analysis.timeline.df
    span = df.select(s=pl.col("ts").min(), e=(pl.col("ts") + pl.col("dur")).max()).row(0)
    devices = [d for d in meta.get("devices") or [] if isinstance(d, Mapping)]
    return {
        "label": label,
        "source": meta.get("source"),
        "format": meta.get("format"),
        "producer": producer_text(meta.get("producer")),
        "devices": [{"index": d.get("index"), "name": d.get("name")} for d in devices],
        "ranks": metrics["rank"].unique().sort().to_list(),
        "series": metrics.select("rank", "device").unique().sort("rank", "device").rows(),
        "events": len(analysis.timeline),
        "work_events": analysis.work.height,
        "span_ns": None if span[0] is None else span[1] - span[0],
        "capture_note": analysis.capture_note,
        "low_confidence": analysis.low_confidence,
        "workload": analysis.workload.to_dict(),
        "stack": stack_line(analysis.stack.to_dict()).split(": ", 1)[1],
        "checks": tally(c.to_dict() for c in analysis.checks),
        "steps": steps_summary(analysis.steps, analysis.placement),
        "phases": phase_summary(metrics),
        "step_time_phase": primary["phase"][0] if primary.height else None,
        "totals": {k: int(metrics[k].sum()) for k in TOTALS},
        "step_time": {
            "mean": times.mean(),
            "median": times.median(),
            "min": times.min(),
            "max": times.max(),
            "p90": times.quantile(0.9, "linear"),
        },
        "findings": dict(Counter(f.severity for f in analysis.findings)),
        "rules": analysis.rules,
        "warnings": [str(w) for w in meta.get("warnings") or []],
    }


def _by_name(rows: pl.LazyFrame, whole_ns: int, top: int) -> list[dict[str, Any]]:
    needed = ("name", "dur", "step", "category", "is_comm", "is_fused_comm", "is_fallback")
    table = (
        rows.select(needed)
        .collect()
        .group_by("name")
        .agg(
            count=pl.len(),
            total_ns=pl.col("dur").sum(),
            mean_ns=pl.col("dur").mean(),
            steps=pl.col("step").n_unique(),
            category=pl.col("category").first().cast(pl.String),
            is_comm=pl.col("is_comm").any(),
            is_fused_comm=pl.col("is_fused_comm").any(),
            is_fallback=pl.col("is_fallback").any(),
        )
        .with_columns(pl.col("name").cast(pl.String), share=pl.col("total_ns") / max(whole_ns, 1))
        .sort(["total_ns", "name"], descending=[True, False], nulls_last=True)
    )
    rows_out = table.head(top).to_dicts()
    for row, label in zip(
        rows_out, distinct_short_names([r["name"] for r in rows_out], LABEL_WIDTH)
    ):
        row["label"] = label
    return rows_out


def kernels(analysis: Analysis, top: int = 25) -> list[dict[str, Any]]:
    """Kernels and communication by total time; ``share`` of all device work time."""
    whole = ~pl.col("is_part")  # an HCCL task counts in its collective
    kinds = pl.col("kind").is_in(["kernel", "comm"])
    total = int(analysis.work.select(pl.col("dur").filter(whole).sum()).item() or 0)
    return _by_name(analysis.work.lazy().filter(whole & kinds), total, top)


def fallbacks(analysis: Analysis, top: int = 50) -> list[dict[str, Any]]:
    """Fallback kernels by total time; ``share`` of all compute kernel time."""
    work = analysis.work
    compute = int(work.select(pl.col("dur").filter(IS_COMPUTE).sum()).item() or 0)
    return _by_name(work.lazy().filter(pl.col("is_fallback")), compute, top)


def overlap_matrices(analysis: Analysis) -> list[dict[str, Any]]:
    """Per (rank, device): busy ns of its busiest streams (diagonal) and the ns each pair of
    them ran together (off the diagonal), over all steps (rows cut to their step's window).

    One sweep per device: each stream's merged intervals add its bit at their start and
    remove it at their end, so the running sum is the set of busy streams of every segment."""
    device, lane = ["rank", "device"], ["rank", "device", "stream"]
    merged = merge(analysis.in_windows.lazy().filter(pl.col("stream").is_not_null()), lane)
    busy = lengths(merged, lane, "busy_ns").sort("busy_ns", "stream", descending=[True, False])
    busy = busy.with_columns(bit=pl.int_range(pl.len()).over(device), of=pl.len().over(device))
    busy = busy.filter(pl.col("bit") < MAX_MATRIX_STREAMS).sort(lane)
    bit = pl.col("bit").replace_strict(
        range(MAX_MATRIX_STREAMS),
        [1 << i for i in range(MAX_MATRIX_STREAMS)],
        return_dtype=pl.Int16,
    )
    # each device numbered; its times lifted above the other devices' for one sort below
    devices = merged.select(device).unique().sort(device).with_row_index("_d")
    merged = merged.join(busy.select(*lane, "bit"), on=lane).join(devices, on=device)
    if not merged.height:
        return []
    first = merged["start"].min()
    span = merged["end"].max() - first + 1
    lifted = pl.col("_d").cast(pl.Int64) * span - first
    # One sort on that single integer, then one running sum over narrow edges (11 bytes a
    # row): several edges at one time make empty segments, dropped.
    edges = pl.concat(
        [
            merged.select(_at=pl.col("start") + lifted, d=bit, n=pl.lit(1, pl.Int8)),
            merged.select(_at=pl.col("end") + lifted, d=-bit, n=pl.lit(-1, pl.Int8)),
        ]
    )
    del merged
    edges = edges.sort("_at", maintain_order=True)
    at_device = pl.col("_at") // span
    segments = edges.select(
        _d=at_device,
        mask=pl.col("d").cum_sum(),
        busy=pl.col("n").cum_sum(),
        ns=pl.when(at_device == at_device.shift(-1)).then(pl.col("_at").shift(-1) - pl.col("_at")),
    ).filter((pl.col("ns") > 0) & (pl.col("busy") >= 2))
    del edges
    shared = (
        segments.group_by("_d", "mask")
        .agg(ns=pl.col("ns").sum())
        .join(devices, on="_d")
        .select(*device, pl.col("mask").cast(pl.Int64), "ns")
    )
    out = []
    for (rank, dev), group in busy.group_by(device, maintain_order=True):
        order = group.sort("stream")
        at = {bit: i for i, bit in enumerate(order["bit"].to_list())}
        matrix = [[0] * len(at) for _ in at]
        for bit, ns in order.select("bit", "busy_ns").iter_rows():
            matrix[at[bit]][at[bit]] = ns
        here = shared.filter((pl.col("rank") == rank) & (pl.col("device") == dev))
        for bits, ns in here.select("mask", "ns").iter_rows():
            on = [at[b] for b in at if bits >> b & 1]
            for i, j in combinations(on, 2):
                matrix[i][j] += ns
                matrix[j][i] += ns
        out.append(
            {
                "rank": rank,
                "device": dev,
                "streams": order["stream"].to_list(),
                "ns": matrix,
                "streams_total": int(order["of"][0]),
            }
        )
    return out
