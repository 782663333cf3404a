"""One input of a cluster, analysed where it is read: the compact :class:`Part` that travels
back to the merge (step metrics, communication launches, findings, checks and a few
downsampled drill-down rows), never the timeline."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from tracekit.analysis import Analysis, analyze
from tracekit.analysis.result import steps_summary
from tracekit.checks.cluster import CHECKS as CLUSTER_CHECKS
from tracekit.load import load
from tracekit.memory import peak_rss
from tracekit.metrics.collectives import launches
from tracekit.model import Check, Finding
from tracekit.parsers.kineto.detect import rank_hint
from tracekit.rules.registry import available
from tracekit.stack import Stack
from tracekit.timeline import Timeline

DRILL_ROWS = 2_000  # device rows kept per drilled-down (rank, device, step), longest first
DRILL_COLUMNS = ("rank", "device", "step", "start", "dur", "kind", "name", "stream", "is_comm")
CROSS_RANK_RULES = ("stragglers",)  # rules that run on the merged cluster, not on a part


@dataclass(frozen=True)
class Settings:
    """How every part is analysed: the rules and their options, the step marker, extra
    taxonomy patterns (as for :func:`tracekit.analyze`)."""

    rules: tuple[str, ...] | None = None
    options: dict[str, dict[str, Any]] = field(default_factory=dict)
    step_marker: str | None = None
    patterns: str | None = None
    device: str | None = None  # the roofline's device table entry (or TOML file)

    def part_rules(self) -> list[str] | None:
        """The rules a part runs: the chosen ones but the cross-rank ones."""
        chosen = list(self.rules) if self.rules is not None else list(available())
        return [r for r in chosen if r not in CROSS_RANK_RULES]

    def part_options(self) -> dict[str, dict[str, Any]]:
        """The rule options of the rules a part runs."""
        return {k: v for k, v in self.options.items() if k not in CROSS_RANK_RULES}


@dataclass
class Part:
    """What one input sends back: its ``source``, ``ranks``, ``events``, a few metadata keys,
    how its steps were found, ``step_metrics``, ``launches`` (absolute ns), ``findings`` and
    ``checks`` of its own, ``drill`` rows (absolute ns) and the worker's peak RSS in bytes."""

    source: str
    ranks: list[int]
    events: int
    meta: dict[str, Any]
    steps: dict[str, Any]
    low_confidence: str | None
    step_metrics: pl.DataFrame
    launches: pl.DataFrame
    findings: list[Finding]
    checks: list[Check]
    drill: pl.DataFrame
    peak_rss: int = 0
    stack: Stack = field(default_factory=Stack)


def ranks_of(metrics: pl.DataFrame) -> list[int]:
    """The ranks of a step-metrics table, sorted."""
    if "rank" not in metrics.columns:
        return []
    return sorted(metrics["rank"].unique().drop_nulls().to_list())


META_KEYS = ("format", "producer", "world_size", "devices", "warnings", "origin_ns")


def drill_rows(analysis: Analysis, per_step: int = DRILL_ROWS) -> pl.DataFrame:
    """Per (rank, device): the device rows of its slowest step and of its median step, the
    ``per_step`` longest of each, in absolute ns."""
    metrics = analysis.step_metrics
    if metrics.height == 0:
        return pl.DataFrame(schema={c: pl.Null for c in DRILL_COLUMNS})
    ordered = metrics.sort("dur", "step").with_columns(
        _i=pl.int_range(pl.len()).over("rank", "device"), _n=pl.len().over("rank", "device")
    )
    chosen = ordered.filter(
        (pl.col("_i") == pl.col("_n") - 1) | (pl.col("_i") == pl.col("_n") // 2)
    )
    origin = int(analysis.timeline.meta.get("origin_ns") or 0)
    rows = analysis.work.join(
        chosen.select("rank", "device", "step"), on=["rank", "device", "step"]
    )
    rows = rows.sort("dur", descending=True).with_columns(
        _k=pl.int_range(pl.len()).over("rank", "device", "step")
    )
    return (
        rows.filter(pl.col("_k") < per_step)
        .select(
            "rank",
            "device",
            "step",
            start=pl.col("ts") + origin,
            dur="dur",
            kind=pl.col("kind").cast(pl.String),
            name=pl.col("name").cast(pl.String),
            stream="stream",
            is_comm="is_comm",
        )
        .sort("rank", "device", "step", "start")
    )


def analyse_part(path: str | Path, settings: Settings | None = None) -> Part:
    """Load and analyse one input of a cluster and keep what the merge needs."""
    settings = settings or Settings()
    timeline = with_rank_hint(load(path), Path(path))
    analysis = analyze(
        timeline,
        settings.part_rules(),
        settings.part_options(),
        step_marker=settings.step_marker,
        patterns=settings.patterns,
        device=settings.device,
    )
    meta = timeline.meta
    part = Part(
        source=str(meta.get("source") or path),
        ranks=ranks_of(analysis.step_metrics) or list(meta.get("ranks") or []),
        events=len(timeline),
        meta={k: meta.get(k) for k in META_KEYS},
        steps=steps_summary(analysis.steps, analysis.placement),
        low_confidence=analysis.low_confidence,
        step_metrics=analysis.step_metrics,
        launches=launches(analysis.work, meta.get("origin_ns"), analysis.steps.ranges),
        findings=analysis.findings,
        checks=[c for c in analysis.checks if c.name not in CLUSTER_CHECKS],
        drill=drill_rows(analysis),
        stack=analysis.stack,
    )
    part.peak_rss = peak_rss()
    return part


def with_rank_hint(timeline: Timeline, path: Path) -> Timeline:
    """``timeline`` with the rank its file name gives (``rank3.json``, ``…rank-3…``) when the
    trace itself records none (no ``distributedInfo``) and holds one rank, as reading the
    whole folder at once would number it."""
    hint = rank_hint(path) if path.is_file() else None
    ranks = timeline.meta.get("ranks") or []
    if hint is None or timeline.meta.get("world_size") is not None or len(ranks) > 1:
        return timeline
    events = timeline.stored
    index = events.schema.get_field_index("rank")
    column = pa.array(np.full(events.num_rows, hint, dtype=np.int32))
    meta = {**timeline.meta, "ranks": [hint]}
    return Timeline(events.set_column(index, "rank", column), meta)
