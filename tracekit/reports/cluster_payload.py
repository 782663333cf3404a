"""The JSON document of the cluster page (:mod:`tracekit.reports.cluster_html`).

Per (rank, device) *series* and step, the step metrics travel as matrices (one row per
series, one column per step, ``None`` where a series has no such step): the heatmaps draw
``dur`` and ``sync_wait_ns`` from them unchanged and the per-rank step table reads its rows.
Collectives travel as the per-group summary and one row per instance (at most
:data:`MAX_INSTANCES`, the largest arrival skews); drill-down rows as columns per (series,
step), at most :data:`MAX_DRILL_ROWS` over the page (the longest rows of each step; when
more steps were drilled than fit, each rank's slowest step first), with times relative to
the step's window and names as indices into one string table.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from tracekit import __version__
from tracekit.cluster.part import DRILL_ROWS
from tracekit.cluster.result import ClusterAnalysis, group_summary
from tracekit.metrics.columns import LABELS
from tracekit.model import ordered
from tracekit.reports.cluster_text import rank_table, stragglers_of
from tracekit.reports.format import cut, step_ranges
from tracekit.reports.html_findings import page_findings
from tracekit.reports.html_gantt import Strings

MAX_DRILL_ROWS = 40_000  # drill-down rows the page carries over all ranks and steps
MIN_DRILL_ROWS = 200  # per (rank, device, step), however many ranks there are
NAME_CHARS = 300  # event names are cut to this many characters
MAX_INSTANCES = 5_000  # collective instances in the skew figure: the largest skews
TOP_INSTANCES = 20  # rows of the top-skew table
MAX_GROUPS = 200  # rows of the collective groups table
OTHER_FINDINGS = 20  # findings of the per-rank rules listed below the stragglers
STEP_COLUMNS = (
    "start",
    "dur",
    "sync_wait_ns",
    "compute_ns",
    "comm_ns",
    "exposed_comm_ns",
    "bubble_ns",
    "idle_ns",
)
FINDING_FIELDS = ("rule", "severity", "title", "impact_ns", "impact_share", "steps_text")


def series_of(metrics: pl.DataFrame) -> pl.DataFrame:
    """The heatmaps' rows: one per (rank, device) in order, with its index ``si`` and label
    (``rank r``, or ``rank r dev d`` when a rank has several devices)."""
    if metrics.height == 0:
        return pl.DataFrame(schema={"rank": pl.Int32, "device": pl.Int32, "si": pl.Int64})
    rows = metrics.select("rank", "device").unique().sort("rank", "device", nulls_last=True)
    return rows.with_columns(si=pl.int_range(pl.len(), dtype=pl.Int64))


def _labels(series: pl.DataFrame) -> list[str]:
    multi = series.height > series["rank"].n_unique()
    return [
        f"rank {r} dev {d}" if multi and d is not None else f"rank {r}"
        for r, d in series.select("rank", "device").iter_rows()
    ]


def matrices(
    metrics: pl.DataFrame, series: pl.DataFrame, steps: list[int]
) -> tuple[dict[str, list[list[Any]]], list[str], list[list[int | None]]]:
    """Per :data:`STEP_COLUMNS` column a [series][step] matrix of the metrics' values; the
    phases seen and a matrix of indices into them."""
    at = {s: i for i, s in enumerate(steps)}
    rows = metrics.join(series, on=["rank", "device"], how="left", nulls_equal=True)
    si, xi = rows["si"].to_list(), [at[s] for s in rows["step"].to_list()]
    out: dict[str, list[list[Any]]] = {}
    for column in STEP_COLUMNS:
        grid: list[list[Any]] = [[None] * len(steps) for _ in range(series.height)]
        for s, x, v in zip(si, xi, rows[column].to_list()):
            grid[s][x] = v
        out[column] = grid
    phases = sorted({p for p in rows["phase"].to_list() if p is not None})
    code = {p: i for i, p in enumerate(phases)}
    phase_grid: list[list[int | None]] = [[None] * len(steps) for _ in range(series.height)]
    for s, x, p in zip(si, xi, rows["phase"].to_list()):
        phase_grid[s][x] = code.get(p)
    return out, phases, phase_grid


def _columns(frame: pl.DataFrame, names: list[str]) -> dict[str, list[Any]]:
    return {n: frame[n].to_list() if n in frame.columns else [] for n in names}


def _with_series(frame: pl.DataFrame, series: pl.DataFrame) -> pl.DataFrame:
    return frame.join(series, on=["rank", "device"], how="left", nulls_equal=True)


def instances(collectives: pl.DataFrame, origin: int) -> dict[str, Any]:
    """One row per collective instance (the largest :data:`MAX_INSTANCES` skews): its group
    (index into ``groups``), instance, step, first arrival (ns from the cluster's origin),
    arrival skew, last rank, ranks, whether matched and the waits it caused."""
    if collectives.height == 0:
        return {"groups": [], "total": 0, "rows": {}}
    table = (
        collectives.group_by("group", "instance")
        .agg(
            step=pl.col("step").min(),
            t=pl.col("arrival").min() - origin,
            skew_ns=pl.col("skew_ns").max(),
            last_rank=pl.col("last_rank").first(),
            ranks=pl.col("ranks").max(),
            matched=pl.col("matched").all(),
            wait_ns=pl.when(pl.col("matched").any()).then(pl.col("wait_ns").sum()),
        )
        .sort(["skew_ns", "group", "instance"], descending=[True, False, False], nulls_last=True)
    )
    kept = table.head(MAX_INSTANCES)
    groups = kept["group"].unique(maintain_order=True).to_list()
    code = {g: i for i, g in enumerate(groups)}
    rows = _columns(kept, ["instance", "step", "t", "skew_ns", "last_rank", "ranks", "matched"])
    rows["wait_ns"] = kept["wait_ns"].to_list()
    rows["group"] = [code[g] for g in kept["group"].to_list()]
    return {"groups": groups, "total": table.height, "rows": rows}


def drill_cap(keys: int, budget: int = MAX_DRILL_ROWS) -> int:
    """Rows kept per drilled-down (rank, device, step) when ``keys`` of them share the page's
    ``budget``: at most what a part keeps, at least :data:`MIN_DRILL_ROWS`."""
    return max(MIN_DRILL_ROWS, min(DRILL_ROWS, budget // max(keys, 1)))


def drilled_keys(rows: pl.DataFrame, windows: pl.DataFrame, budget: int) -> pl.DataFrame:
    """The (rank, device, step) keys the page carries with their ``total`` rows: every key
    while ``budget`` allows :data:`MIN_DRILL_ROWS` each, else each series' slowest step
    first, the slowest windows first, as many as fit."""
    key = ["rank", "device", "step"]
    totals = (
        rows.group_by(key)
        .agg(total=pl.len())
        .join(windows.select(*key, "dur"), on=key, how="left", nulls_equal=True)
    )
    fit = budget // drill_cap(totals.height, budget)
    if totals.height <= fit:
        return totals
    not_slowest = pl.col("dur").rank("ordinal", descending=True).over("rank", "device") > 1
    order = [not_slowest, pl.col("dur"), *key]
    descending = [False, True, False, False, False]
    return totals.sort(order, descending=descending, nulls_last=True).head(max(fit, 1))


def drill(
    cluster: ClusterAnalysis, series: pl.DataFrame, budget: int = MAX_DRILL_ROWS
) -> dict[str, Any]:
    """The drill-down rows per (series, step) of :func:`drilled_keys`: the longest
    :func:`drill_cap` of each, by start, times in ns from the start of the step's window."""
    rows, key = cluster.drill, ["rank", "device", "step"]
    if rows.height == 0 or "start" not in rows.columns or cluster.step_metrics.height == 0:
        return {"cap": 0, "names": [], "kinds": [], "steps": [], "keys": 0}
    origin = int(cluster.meta.get("origin_ns") or 0)
    windows = cluster.step_metrics.select(*key, "dur", win=pl.col("start") + origin)
    keys = drilled_keys(rows, windows, budget)
    cap = drill_cap(rows.select(key).unique().height, budget)
    kept = (
        rows.join(keys.select(*key, "total"), on=key, how="inner", nulls_equal=True)
        .sort(["dur", "start"], descending=[True, False], nulls_last=True)
        .filter(pl.int_range(pl.len()).over(key) < cap)
        .join(windows.drop("dur"), on=key, how="left", nulls_equal=True)
        .join(series, on=["rank", "device"], how="left", nulls_equal=True)
        .with_columns(win=pl.coalesce("win", pl.col("start").min().over(key)))
        .with_columns(start=pl.col("start") - pl.col("win"), comm="is_comm")
        .sort(*key, "start", nulls_last=True)
    )
    names, kinds = Strings(), Strings()
    name_at = names.index(kept["name"].cast(pl.String))
    kind_at = kinds.index(kept["kind"].cast(pl.String))
    kept = kept.with_columns(
        name=pl.Series(name_at, dtype=pl.Int64), kind=pl.Series(kind_at, dtype=pl.Int64)
    )
    steps = []
    for part in kept.partition_by(key, maintain_order=True):
        steps.append(
            {
                "series": part["si"][0],
                "step": part["step"][0],
                "total": part["total"][0],
                "shown": part.height,
                **_columns(part, ["start", "dur", "stream", "name", "kind", "comm"]),
            }
        )
    steps.sort(key=lambda d: (d["series"] is None, d["series"] or 0, d["step"] or 0))
    names_text = [cut(n, NAME_CHARS) for n in names.values]
    total = rows.select(key).unique().height
    return {"cap": cap, "names": names_text, "kinds": kinds.values, "steps": steps, "keys": total}


def _part(part: dict[str, Any]) -> dict[str, Any]:
    steps = part.get("steps") or {}
    how = f"{steps.get('count')} by {steps.get('method')} ({steps.get('confidence')})"
    return {
        "source": str(part.get("source") or "?"),
        "ranks": step_ranges([int(r) for r in part.get("ranks") or []]),
        "events": part.get("events"),
        "format": part.get("format"),
        "steps": how if steps else None,
        "low_confidence": part.get("low_confidence"),
    }


def header(cluster: ClusterAnalysis, steps: list[int]) -> dict[str, Any]:
    """What the cluster is: its inputs, ranks, world size, formats, steps and launches."""
    meta = cluster.meta
    ranks = cluster.ranks if "rank" in cluster.step_metrics.columns else []
    ranks = ranks or list(meta.get("ranks") or [])  # parts without steps: the ranks they named
    producer = meta.get("producer") or {}
    launches = cluster.collectives
    return {
        "parts": [_part(p) for p in cluster.parts],
        "ranks": len(ranks),
        "rank_list": step_ranges(ranks),
        "world_size": meta.get("world_size"),
        "format": meta.get("format"),
        "producer": producer.get("name") if isinstance(producer, dict) else str(producer),
        "steps": len(steps),
        "launches": launches.height,
        "matched": int(launches["matched"].sum()) if launches.height else 0,
    }


def _findings(cluster: ClusterAnalysis, steps: list[int]) -> dict[str, Any]:
    late = stragglers_of(cluster)
    ids = {id(f) for f in late}
    others = [f for f in cluster.findings if id(f) not in ids]
    shown = page_findings(others, pl.DataFrame(), steps)[:OTHER_FINDINGS]
    return {
        "stragglers": page_findings(late, pl.DataFrame(), steps),
        "others": [{k: f.get(k) for k in FINDING_FIELDS} for f in shown],
        "others_total": len(others),
    }


def cluster_payload(cluster: ClusterAnalysis, *, drill_budget: int = MAX_DRILL_ROWS) -> dict:
    """The page's JSON document for ``cluster``."""
    metrics = cluster.step_metrics
    series = series_of(metrics)
    steps = sorted(metrics["step"].drop_nulls().unique().to_list()) if metrics.height else []
    grids, phases, phase_grid = matrices(metrics, series, steps) if steps else ({}, [], [])
    late = cluster.stragglers
    late = _with_series(late, series) if late.height else late
    ranks = rank_table(cluster) if metrics.height else pl.DataFrame()
    ranks = _with_series(ranks, series) if ranks.height else ranks
    groups = group_summary(cluster.collectives)
    return {
        "tracekit": __version__,
        "labels": {c: LABELS[c].heading for c in STEP_COLUMNS if c in LABELS},
        "header": header(cluster, steps),
        "checks": [c.to_dict() for c in ordered(cluster.checks)],
        "findings": _findings(cluster, steps),
        "series": {
            **_columns(series, ["rank", "device", "si"]),
            "label": _labels(series) if series.height else [],
        },
        "steps": steps,
        "metrics": grids,
        "phases": phases,
        "phase": phase_grid,
        "late": _columns(late, ["step", "rank", "device", "wait_ns", "waiters", "instances", "si"]),
        "ranks": ranks.to_dicts(),
        "clocks": cluster.clocks.to_dicts(),
        "groups": groups.head(MAX_GROUPS).to_dicts(),
        "groups_total": groups.height,
        "instances": instances(cluster.collectives, int(cluster.meta.get("origin_ns") or 0)),
        "top_instances": TOP_INSTANCES,
        "drill": drill(cluster, series, drill_budget),
    }
