"""The analysis of a cluster: its parts' compact results merged, collectives matched across
all ranks, clocks aligned, waits measured and the cross-rank rules run."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import polars as pl

from tracekit.analysis import Analysis
from tracekit.checks.cluster import cluster_checks
from tracekit.cluster.part import CROSS_RANK_RULES, Part, Settings, drill_rows, ranks_of
from tracekit.cluster.ranks import distinct_ranks
from tracekit.metrics import KEY
from tracekit.metrics.collectives import LAUNCH_COLUMNS
from tracekit.metrics.columns import METRIC_COLUMNS, ROOFLINE_COLUMNS
from tracekit.metrics.steps import phase_summary
from tracekit.metrics.waits import align, stragglers, sync_waits
from tracekit.model import QUIET, Check, Context, Finding, ordered, ranked
from tracekit.rules.registry import select
from tracekit.stack import combined


@dataclass
class ClusterAnalysis:
    """Every rank of a cluster: ``step_metrics`` per (rank, device, step) with
    ``sync_wait_ns``; ``collectives`` (every launch matched across ranks, aligned, with its
    wait and bandwidth); ``clocks`` (offset per rank); ``stragglers`` (per step, who was
    late); ``findings`` (the parts' own and the cross-rank rules', ranked); ``checks``;
    ``drill`` (a few steps' device rows per rank, absolute ns); ``parts`` (per input: source,
    ranks, events, how its steps were found, its worker's peak RSS)."""

    parts: list[dict[str, Any]]
    step_metrics: pl.DataFrame
    collectives: pl.DataFrame
    clocks: pl.DataFrame
    stragglers: pl.DataFrame
    findings: list[Finding] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    drill: pl.DataFrame = field(default_factory=pl.DataFrame)
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def ranks(self) -> list[int]:
        """The ranks in the cluster."""
        return ranks_of(self.step_metrics)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: parts, clocks, per-step stragglers, the metrics rows, the collectives'
        summary per group, checks and findings."""
        return {
            "ranks": self.ranks,
            "parts": [{k: v for k, v in p.items() if k != "peak_rss"} for p in self.parts],
            "clocks": self.clocks.to_dicts(),
            "phases": phase_summary(self.step_metrics),
            "stragglers": self.stragglers.to_dicts(),
            "collective_groups": group_summary(self.collectives).to_dicts(),
            "checks": [c.to_dict() for c in self.checks],
            "step_metrics": self.step_metrics.to_dicts(),
            "findings": [f.to_dict() for f in self.findings],
        }


def group_summary(collectives: pl.DataFrame) -> pl.DataFrame:
    """Per collective group: launches, instances, ranks, matched share, median arrival skew,
    summed waits, median bytes and bus bandwidth."""
    if collectives.height == 0:
        return pl.DataFrame()
    return (
        collectives.group_by("group", "kind")
        .agg(
            launches=pl.len(),
            instances=pl.col("instance").n_unique(),
            ranks=pl.col("rank").n_unique(),
            matched=pl.col("matched").sum(),
            skew_ns=pl.col("skew_ns").median(),
            wait_ns=pl.col("wait_ns").sum(),
            bytes=pl.col("bytes").median(),
            busbw_gbps=pl.col("busbw_gbps").median(),
        )
        .sort(["wait_ns", "group"], descending=[True, False])
    )


def _part_summary(part: Part) -> dict[str, Any]:
    return {
        "source": part.source,
        "ranks": part.ranks,
        "events": part.events,
        "format": part.meta.get("format"),
        "steps": part.steps,
        "low_confidence": part.low_confidence,
        "peak_rss": part.peak_rss,
    }


def _frames(frames: list[pl.DataFrame], schema: Any = None) -> pl.DataFrame:
    kept = [f for f in frames if f.height]
    if kept:
        return pl.concat(kept, how="diagonal_relaxed")
    return pl.DataFrame(schema=schema) if schema else pl.DataFrame()


def merge(parts: list[Part], settings: Settings | None = None) -> ClusterAnalysis:
    """The cluster of ``parts`` (in the given order): their launches matched and aligned,
    ``sync_wait_ns`` joined into their step metrics, the cross-rank rules run."""
    settings = settings or Settings()
    parts, numbering = distinct_ranks(parts)
    launched = _frames([p.launches for p in parts], LAUNCH_COLUMNS)
    origins = [int(p.meta.get("origin_ns") or 0) for p in parts]
    origin = min(origins, default=0)
    metrics = _frames(  # every part's step starts relative to the earliest part's origin
        [
            p.step_metrics.with_columns(pl.col("start") + (o - origin))
            for p, o in zip(parts, origins)
        ],
        parts[0].step_metrics.schema if parts else None,
    )
    table, clocks = align(launched)
    waits = sync_waits(table)
    if metrics.height:
        metrics = (
            metrics.drop("sync_wait_ns")
            .join(waits, on=KEY, how="left")
            .with_columns(pl.col("sync_wait_ns").fill_null(0))
            .select(*METRIC_COLUMNS, *(c for c in ROOFLINE_COLUMNS if c in metrics.columns))
            .sort(KEY)
        )
    meta = {**_cluster_meta(parts), "origin_ns": origin}
    chosen = [r for r in (settings.rules or CROSS_RANK_RULES) if r in CROSS_RANK_RULES]
    rules = select(chosen, {k: v for k, v in settings.options.items() if k in chosen})
    empty = pl.DataFrame()
    stack = combined([p.stack for p in parts])
    ctx = Context(empty, empty, empty, empty, metrics, None, meta, table, clocks, stack)
    found = [f for p in parts for f in p.findings] + [f for r in rules for f in r.run(ctx)]
    own = [
        Check(c.name, c.status, f"{p.source}: {c.detail}", c.expected, c.actual)
        for p in parts
        for c in p.checks
        if c.status not in QUIET
    ]
    return ClusterAnalysis(
        parts=[_part_summary(p) for p in parts],
        step_metrics=metrics,
        collectives=table,
        clocks=clocks,
        stragglers=stragglers(table),
        findings=ranked(found),
        checks=ordered(numbering + cluster_checks(table, clocks, meta, len(meta["ranks"])) + own),
        drill=_frames([p.drill for p in parts]),
        meta=meta,
    )


def _cluster_meta(parts: list[Part]) -> dict[str, Any]:
    worlds = [p.meta.get("world_size") for p in parts if p.meta.get("world_size")]
    formats = sorted({str(p.meta.get("format")) for p in parts})
    vendors = [p.meta for p in parts]
    first = vendors[0] if vendors else {}
    return {
        "format": ", ".join(formats),
        "producer": first.get("producer") or {},
        "devices": first.get("devices") or [],
        "world_size": max(worlds) if worlds else None,
        "ranks": sorted({r for p in parts for r in p.ranks}),
    }


def from_analysis(analysis: Analysis) -> ClusterAnalysis:
    """The cluster view of one analysis whose timeline holds several ranks (the same tables,
    computed in one process)."""
    source = str(analysis.timeline.meta.get("source") or "trace")
    return ClusterAnalysis(
        parts=[
            {
                "source": source,
                "ranks": ranks_of(analysis.step_metrics),
                "events": len(analysis.timeline),
                "format": analysis.timeline.meta.get("format"),
                "steps": None,
                "low_confidence": analysis.low_confidence,
                "peak_rss": 0,
            }
        ],
        step_metrics=analysis.step_metrics,
        collectives=analysis.collectives,
        clocks=analysis.clocks,
        stragglers=stragglers(analysis.collectives),
        findings=analysis.findings,
        checks=analysis.checks,
        drill=drill_rows(analysis),
        meta=analysis.timeline.meta,
    )
