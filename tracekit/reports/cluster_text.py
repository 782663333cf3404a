"""The cluster view in a terminal and in Markdown: a per-rank step-time table (step time,
waits at collectives, times late, clock offset), the top stragglers and who was late in
each step, and the checks that say when the cross-rank numbers may be wrong."""

from __future__ import annotations

from typing import Any

import polars as pl
from rich.console import Group
from rich.table import Table
from rich.text import Text

from tracekit.cluster import ClusterAnalysis
from tracekit.metrics.steps import primary_phase
from tracekit.model import QUIET, Finding
from tracekit.names import printable
from tracekit.reports.format import fmt_ns, fmt_pct
from tracekit.reports.markdown import md_text

MAX_RANKS = 32  # rank rows shown; the rest are counted
MAX_STEPS = 10  # per-step straggler rows shown
TOP = 5  # straggler findings shown


def rank_table(cluster: ClusterAnalysis) -> pl.DataFrame:
    """Per (rank, device) over its decode steps (else all): steps, median and p90 step time,
    median ``sync_wait_ns``, waits' share of step time, steps it was the straggler in and
    its clock offset."""
    metrics = primary_phase(cluster.step_metrics)
    if metrics.height == 0:
        return pl.DataFrame()
    late = cluster.stragglers.group_by("rank", "device").agg(late=pl.len())
    table = (
        metrics.group_by("rank", "device")
        .agg(
            steps=pl.len(),
            median_ns=pl.col("dur").median(),
            p90_ns=pl.col("dur").quantile(0.9, "linear"),
            wait_ns=pl.col("sync_wait_ns").median(),
            wait_share=pl.col("sync_wait_ns").sum() / pl.col("dur").sum(),
        )
        .join(late, on=["rank", "device"], how="left")
        .join(cluster.clocks.select("rank", "offset_ns"), on="rank", how="left")
        .with_columns(pl.col("late").fill_null(0))
    )
    return table.sort("rank", "device")


def stragglers_of(cluster: ClusterAnalysis) -> list[Finding]:
    """The findings of the ``stragglers`` rule, ranked."""
    return [f for f in cluster.findings if f.rule == "stragglers"]


def _no_stragglers(cluster: ClusterAnalysis) -> str:
    if len(cluster.ranks) < 2:
        return "not measured (one rank: nothing to compare it with)"
    if not cluster.collectives.height or not cluster.collectives["matched"].any():
        return "not measured (no collective matched across ranks)"
    return "none (no rank made the others wait)"


def _headline(cluster: ClusterAnalysis) -> str:
    ranks = cluster.ranks
    world = cluster.meta.get("world_size")
    of = f" of {world:,}" if world and world > len(ranks) else ""
    inputs = len(cluster.parts)
    steps = cluster.step_metrics["step"].n_unique() if cluster.step_metrics.height else 0
    return (
        f"cluster: {len(ranks)} rank{'s' * (len(ranks) != 1)}{of} from {inputs}"
        f" input{'s' * (inputs != 1)}, "
        f"{steps} step{'s' * (steps != 1)}, {cluster.collectives.height:,} collective launches"
    )


def _rank_cells(row: dict[str, Any]) -> list[str]:
    return [
        str(row["rank"]),
        "-" if row["device"] is None else str(row["device"]),
        f"{row['steps']:,}",
        fmt_ns(row["median_ns"]),
        fmt_ns(row["p90_ns"]),
        fmt_ns(row["wait_ns"]),
        fmt_pct(row["wait_share"]),
        f"{row['late']:,}",
        f"{row['offset_ns']:+,} ns" if row["offset_ns"] else "0",
    ]


RANK_HEADINGS = (
    "rank",
    "dev",
    "steps",
    "median step",
    "p90 step",
    "median sync wait",
    "wait share",
    "late in",
    "clock offset",
)


def _step_rows(cluster: ClusterAnalysis) -> list[list[str]]:
    return [
        [str(r["step"]), f"rank {r['rank']}", fmt_ns(r["wait_ns"]), f"{r['waiters']:,}"]
        for r in cluster.stragglers.head(MAX_STEPS).iter_rows(named=True)
    ]


def cluster_terminal(cluster: ClusterAnalysis) -> Group:
    """The cluster view as rich renderables."""
    parts: list[Any] = [Text(_headline(cluster), style="bold")]
    for check in cluster.checks:
        if check.status not in QUIET:
            parts.append(Text(f"{check.status}: {printable(check.detail)}", style="yellow"))
    ranks = rank_table(cluster)
    if ranks.height:
        table = Table(title="per rank", title_justify="left", box=None, header_style="bold")
        for i, heading in enumerate(RANK_HEADINGS):
            table.add_column(heading, justify="left" if i == 0 else "right")
        for row in ranks.head(MAX_RANKS).iter_rows(named=True):
            table.add_row(*_rank_cells(row))
        parts.append(table)
        if ranks.height > MAX_RANKS:
            parts.append(Text(f"… {ranks.height - MAX_RANKS} more ranks (--format json)"))
    found = stragglers_of(cluster)
    if not found:
        parts.append(Text(f"stragglers: {_no_stragglers(cluster)}"))
    for finding in found[:TOP]:
        parts.append(Text(f"{finding.severity}: {printable(finding.title)}", style="bold"))
        parts.append(Text(f"  {printable(finding.detail)}"))
    if len(found) > TOP:
        parts.append(Text(f"… {len(found) - TOP} more late ranks"))
    if cluster.stragglers.height:
        table = Table(title="late rank per step", title_justify="left", box=None)
        for heading in ("step", "late", "wait caused", "launches waiting"):
            table.add_column(heading, justify="right")
        for cells in _step_rows(cluster):
            table.add_row(*cells)
        parts.append(table)
    return Group(*parts)


def _md_table(headings: tuple[str, ...] | list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(headings) + " |", "|" + "---|" * len(headings)]
    return lines + ["| " + " | ".join(cells) + " |" for cells in rows]


def cluster_markdown(cluster: ClusterAnalysis) -> str:
    """The cluster view as Markdown (names escaped)."""
    lines = ["## Cluster", "", md_text(_headline(cluster)), ""]
    for check in cluster.checks:
        if check.status not in QUIET:
            lines.append(f"- **{check.status}** {md_text(check.detail)}")
    ranks = rank_table(cluster)
    if ranks.height:
        rows = [_rank_cells(r) for r in ranks.head(MAX_RANKS).iter_rows(named=True)]
        lines += ["", "### Per rank", "", *_md_table(RANK_HEADINGS, rows)]
        if ranks.height > MAX_RANKS:
            lines.append(f"\n{ranks.height - MAX_RANKS} more ranks in the JSON output.")
    lines += ["", "### Stragglers", ""]
    found = stragglers_of(cluster)
    if not found:
        lines.append(_no_stragglers(cluster).capitalize() + ".")
    for finding in found[:TOP]:
        lines.append(
            f"- **{finding.severity}** {md_text(finding.title)}: {md_text(finding.detail)}"
        )
    if cluster.stragglers.height:
        headings = ("step", "late", "wait caused", "launches waiting")
        lines += ["", *_md_table(headings, _step_rows(cluster))]
    return "\n".join(lines) + "\n"
