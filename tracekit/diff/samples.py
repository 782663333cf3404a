"""The per-step samples a diff compares, from analysed runs.

One row per (run, decode step) and one column per quantity: the step's duration, the time of
each category, the rule metrics, and the time and count of each kernel (names matched by
:func:`tracekit.names.kernel_key`). With several devices (ranks) in a run, a step lasts as
long as its slowest device, and times and counts are averaged over the devices, so runs on
different numbers of devices stay comparable.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import polars as pl

from tracekit.analysis import Analysis
from tracekit.names import kernel_family, kernel_key
from tracekit.taxonomy import CATEGORIES

STEP = "step_ns"
CATEGORY_COLUMNS = tuple(f"cat_{c}_ns" for c in CATEGORIES)
# step_metrics column -> +1 when higher is better, -1 when lower is better (their labels are
# tracekit.metrics.columns.LABELS)
RULE_METRICS = {
    "exposed_comm_ns": -1,
    "comm_overlap_ratio": 1,
    "fallback_ns": -1,
    "fallback_share": -1,
    "bubble_ns": -1,
    "bubble_count": -1,
}
STEP_COLUMNS = (STEP, *CATEGORY_COLUMNS, *RULE_METRICS)


@dataclass
class RunSamples:
    """One run: its per-step values (``STEP_COLUMNS``) and its kernels per step (long:
    step, key, ns, count, category, fallback)."""

    source: str
    format: str
    method: str  # how the steps were found (marker, graph, gaps, ...)
    devices: int
    steps: pl.DataFrame
    kernels: pl.DataFrame
    left_out: int = 0  # steps of other phases, not compared
    phases: bool = False  # whether any of its steps has a phase


@dataclass
class KernelInfo:
    """A matched kernel: its key (the base side's name when renamed), category and flags."""

    key: str
    category: str
    fallback: bool
    in_base: bool
    in_head: bool
    head_key: str | None = None  # set when the head side's name differs (paired by family)


@dataclass
class Samples:
    """Both sides as matrices (steps × columns) over one column layout."""

    columns: list[str]
    kernels: list[KernelInfo]
    base: np.ndarray
    head: np.ndarray
    base_lengths: list[int]
    head_lengths: list[int]
    base_runs: list[RunSamples] = field(default_factory=list)
    head_runs: list[RunSamples] = field(default_factory=list)
    phase: str = "all"


def compared_phase(analyses: list[Analysis]) -> str:
    """Which steps a diff compares: ``decode`` when every run has decode steps (prefill and
    mixed steps would blur the decode median), ``unknown`` when every run has steps of no
    known phase and none has decode steps, else ``all``."""
    phases = [set(a.step_metrics["phase"].to_list()) for a in analyses]
    if all("decode" in p for p in phases):
        return "decode"
    if all(None in p and "decode" not in p for p in phases):
        return "unknown"
    return "all"


def _in_phase(metrics: pl.DataFrame, phase: str) -> pl.DataFrame:
    if phase == "decode":
        return metrics.filter(pl.col("phase") == "decode")
    if phase == "unknown":
        return metrics.filter(pl.col("phase").is_null())
    return metrics


def run_samples(analysis: Analysis, phase: str = "all") -> RunSamples:
    """The per-step values and kernels of one analysed run, over the steps of ``phase``
    (:func:`compared_phase`)."""
    metrics = _in_phase(analysis.step_metrics, phase)
    devices = max(metrics.select("rank", "device").n_unique(), 1)
    steps = (
        metrics.group_by("step")
        .agg(
            pl.col("dur").max().cast(pl.Float64).alias(STEP),
            *((pl.col(c).sum() / devices).alias(c) for c in CATEGORY_COLUMNS),
            *(pl.col(m).cast(pl.Float64).mean().alias(m) for m in RULE_METRICS),
        )
        .sort("step")
    )
    chosen = metrics.select("rank", "step").unique()
    work = analysis.work.join(chosen, on=["rank", "step"], how="semi").with_columns(
        pl.col("name").cast(pl.String).fill_null("?")
    )
    keys = {name: kernel_key(name) for name in work.get_column("name").unique().to_list()}
    kernels = (
        work.with_columns(key=pl.col("name").replace_strict(keys, return_dtype=pl.String))
        .group_by("step", "key")
        .agg(
            ns=pl.col("dur").sum() / devices,
            count=pl.len() / devices,
            category=pl.col("category").first(),
            fallback=pl.col("is_fallback").any(),
        )
        .sort("step", "key")
    )
    meta = analysis.timeline.meta
    source = str(meta.get("source") or "?")
    fmt, method = str(meta.get("format") or "?"), analysis.steps.method
    left_out = analysis.step_metrics["step"].n_unique() - steps.height
    phased = analysis.step_metrics["phase"].null_count() < analysis.step_metrics.height
    return RunSamples(source, fmt, method, devices, steps, kernels, left_out, phased)


def _catalogue(runs: list[RunSamples]) -> pl.DataFrame:
    """key -> category, fallback over the runs of one side."""
    frames = [r.kernels.select("key", "category", "fallback") for r in runs]
    if not frames:
        return pl.DataFrame(schema={"key": pl.String, "category": pl.String, "fallback": bool})
    return (
        pl.concat(frames)
        .group_by("key")
        .agg(pl.col("category").first(), pl.col("fallback").any())
        .sort("key")
    )


def match_kernels(base: list[RunSamples], head: list[RunSamples]) -> list[KernelInfo]:
    """Kernels of both sides matched by key; names left over on both sides are paired when
    one base name and one head name share a family, category and fallback flag."""
    cat_b = {r[0]: r for r in _catalogue(base).iter_rows()}
    cat_h = {r[0]: r for r in _catalogue(head).iter_rows()}
    infos = [
        KernelInfo(key, row[1] or "other", bool(row[2]), True, key in cat_h)
        for key, row in cat_b.items()
    ]
    infos += [
        KernelInfo(key, row[1] or "other", bool(row[2]), False, True)
        for key, row in cat_h.items()
        if key not in cat_b
    ]

    def group(info: KernelInfo) -> tuple[str, str, bool]:
        return kernel_family(info.key), info.category, info.fallback

    only_b: dict[tuple[str, str, bool], list[KernelInfo]] = {}
    only_h: dict[tuple[str, str, bool], list[KernelInfo]] = {}
    for info in infos:
        if info.in_base != info.in_head:
            (only_b if info.in_base else only_h).setdefault(group(info), []).append(info)
    paired = set()
    for fam, olds in only_b.items():
        news = only_h.get(fam, [])
        if len(olds) == 1 and len(news) == 1:
            olds[0].in_head, olds[0].head_key = True, news[0].key
            paired.add(news[0].key)
    return [i for i in infos if not (i.key in paired and not i.in_base)]


def _matrix(runs: list[RunSamples], kernels: list[KernelInfo], head: bool) -> np.ndarray:
    """Rows: the steps of every run in order; columns: STEP_COLUMNS, kernel ns, kernel count."""
    index = {((k.head_key or k.key) if head else k.key): i for i, k in enumerate(kernels)}
    n_k = len(kernels)
    blocks = []
    for run in runs:
        steps = run.steps
        block = np.zeros((steps.height, len(STEP_COLUMNS) + 2 * n_k))
        block[:, : len(STEP_COLUMNS)] = steps.select(STEP_COLUMNS).to_numpy().astype(np.float64)
        cells = (
            run.kernels.join(steps.select("step", _row=pl.int_range(pl.len())), on="step")
            .with_columns(_col=pl.col("key").replace_strict(index, default=None))
            .drop_nulls("_col")
        )
        rows = cells.get_column("_row").to_numpy()
        cols = cells.get_column("_col").to_numpy() + len(STEP_COLUMNS)
        block[rows, cols] = cells.get_column("ns").to_numpy()
        block[rows, cols + n_k] = cells.get_column("count").to_numpy()
        blocks.append(block)
    return np.vstack(blocks)


def samples(base: list[Analysis], head: list[Analysis]) -> Samples:
    """Both sides' samples over one column layout (kernels matched across the sides), over
    the steps of the phase both sides share (:func:`compared_phase`)."""
    phase = compared_phase([*base, *head])
    runs_b = [run_samples(a, phase) for a in base]
    runs_h = [run_samples(a, phase) for a in head]
    kernels = match_kernels(runs_b, runs_h)
    columns = [*STEP_COLUMNS, *(f"ns:{k.key}" for k in kernels), *(f"n:{k.key}" for k in kernels)]
    return Samples(
        columns,
        kernels,
        _matrix(runs_b, kernels, head=False),
        _matrix(runs_h, kernels, head=True),
        [r.steps.height for r in runs_b],
        [r.steps.height for r in runs_h],
        runs_b,
        runs_h,
        phase,
    )
