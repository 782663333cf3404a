"""The per-step samples a diff compares, from analysed runs.

One row per (run, decode step) and one column per quantity: the step's duration, the time of
each category, the rule metrics, and the time and count of each role: the kernels of each side
that do one job, matched by name and, across renames and vendors, by role
(:mod:`tracekit.diff.roles`). With several devices (ranks) in a run, a step lasts as
long as its slowest device, and times and counts are averaged over the devices, so runs on
different numbers of devices stay comparable.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from tracekit.analysis import Analysis
from tracekit.diff.roles import Role, Side, match_roles
from tracekit.metrics.shapes import launching_op_dims
from tracekit.names import kernel_key
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
# the steps of each side whose kernel order is aligned to match roles by place
ALIGNED_STEPS = 3
OPS_SCHEMA = {
    "key": pl.String,
    "op": pl.String,
    "shapes": pl.String,
    "n": pl.UInt32,
    "kernels": pl.UInt32,
    "ns": pl.Float64,
}


@dataclass
class RunSamples:
    """One run: its per-step values (``STEP_COLUMNS``), its kernels per step (long: step,
    key, ns, count, category, fallback), their launching operators (``ops``: key, op, shapes,
    rows n (kernels of them: kernels) and their time ns, per device; empty where the trace
    records none) and the
    key sequences of its first steps."""

    source: str
    format: str
    method: str  # how the steps were found (marker, graph, gaps, ...)
    devices: int
    steps: pl.DataFrame
    kernels: pl.DataFrame
    left_out: int = 0  # steps of other phases, not compared
    phases: bool = False  # whether any of its steps has a phase
    ops: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=OPS_SCHEMA))
    sequences: list[list[str]] = field(default_factory=list)
    # read ``ops`` and ``sequences`` from the trace: only when names differ between the sides
    load_ops: Callable[[], pl.DataFrame] | None = None
    load_sequences: Callable[[], list[list[str]]] | None = None


@dataclass
class Samples:
    """Both sides as matrices (steps × columns) over one column layout."""

    columns: list[str]
    kernels: list[Role]
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
    work = work.with_columns(key=pl.col("name").replace_strict(keys, return_dtype=pl.String))
    kernels = (
        work.group_by("step", "key")
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
    return RunSamples(
        source,
        fmt,
        method,
        devices,
        steps,
        kernels,
        left_out,
        phased,
        pl.DataFrame(schema=OPS_SCHEMA),
        [],
        lambda: _launching_ops(analysis.rows, work).with_columns(pl.col("ns") / devices),
        lambda: _sequences(work),
    )


def _launching_ops(rows: pl.DataFrame, work: pl.DataFrame) -> pl.DataFrame:
    """Per key, the host operators that launched it with their recorded input shapes, how
    often and for how long (:data:`OPS_SCHEMA`); empty where the trace records no operator
    inputs."""
    if not (rows.get_column("kind") == "op").any():
        return pl.DataFrame(schema=OPS_SCHEMA)
    found = launching_op_dims(rows, work.select("rank", "corr", "args"))
    if found.get_column("op").null_count() == found.height:
        return pl.DataFrame(schema=OPS_SCHEMA)
    return (
        pl.concat(
            [work.select("key", "dur", "kind"), found.select("op", shapes="input_dims")],
            how="horizontal",
        )
        .filter(pl.col("op").is_not_null())
        .group_by("key", "op", "shapes")
        .agg(
            n=pl.len().cast(pl.UInt32),
            kernels=(pl.col("kind") == "kernel").sum().cast(pl.UInt32),
            ns=pl.col("dur").sum().cast(pl.Float64),
        )
    )


def _sequences(work: pl.DataFrame) -> list[list[str]]:
    """The keys of the first :data:`ALIGNED_STEPS` steps in start order, on the first
    (rank, device) of the run (the order of the other devices repeats it)."""
    if work.height == 0:
        return []
    first = work.select("rank", "device").sort("rank", "device", nulls_last=True).row(0)
    one = work.filter(pl.col("rank").eq_missing(first[0]) & pl.col("device").eq_missing(first[1]))
    chosen = one.get_column("step").unique().sort().head(ALIGNED_STEPS)
    per = (
        one.filter(pl.col("step").is_in(chosen.implode()))
        .sort("step", "ts")
        .group_by("step", maintain_order=True)
        .agg("key")
    )
    return per.get_column("key").to_list()


def _side(runs: list[RunSamples]) -> Side:
    """One side's kernels for role matching: per key its category, fallback flag and total
    time; its launching operators; the sequences of its first run's first steps."""
    frames = [r.kernels.select("key", "category", "fallback", "ns") for r in runs]
    schema = {"key": pl.String, "category": pl.String, "fallback": bool, "ns": pl.Float64}
    catalogue = (
        pl.concat(frames)
        .group_by("key")
        .agg(pl.col("category").first(), pl.col("fallback").any(), pl.col("ns").sum())
        .sort("key")
        if frames
        else pl.DataFrame(schema=schema)
    )
    ops = pl.concat([r.ops for r in runs]) if runs else pl.DataFrame(schema=OPS_SCHEMA)
    return Side(catalogue, ops, runs[0].sequences if runs else [])


def match_kernels(base: list[RunSamples], head: list[RunSamples]) -> list[Role]:
    """The kernels of both sides grouped into roles (:func:`tracekit.diff.roles.match_roles`)."""
    return match_roles(_side(base), _side(head))


def _matrix(runs: list[RunSamples], kernels: list[Role], head: bool) -> np.ndarray:
    """Rows: the steps of every run in order; columns: STEP_COLUMNS, role ns, role count."""
    index = {
        key: i
        for i, role in enumerate(kernels)
        for key in (role.head_keys if head else role.base_keys)
    }
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
            .group_by("_row", "_col")
            .agg(pl.col("ns").sum(), pl.col("count").sum())
        )
        rows = cells.get_column("_row").to_numpy()
        cols = cells.get_column("_col").to_numpy() + len(STEP_COLUMNS)
        block[rows, cols] = cells.get_column("ns").to_numpy()
        block[rows, cols + n_k] = cells.get_column("count").to_numpy()
        blocks.append(block)
    return np.vstack(blocks)


def samples(base: list[Analysis], head: list[Analysis], phase: str | None = None) -> Samples:
    """Both sides' samples over one column layout (kernels matched across the sides), over
    the steps of ``phase`` (default: the phase both sides share, :func:`compared_phase`)."""
    phase = phase or compared_phase([*base, *head])
    runs_b = [run_samples(a, phase) for a in base]
    runs_h = [run_samples(a, phase) for a in head]
    names = [
        {k for r in runs for k in r.kernels.get_column("key").to_list()}
        for runs in (runs_b, runs_h)
    ]
    for run in [*runs_b, *runs_h]:  # what role matching reads beyond the names
        if names[0] - names[1] and names[1] - names[0] and run.load_ops:
            run.ops = run.load_ops()  # operators pair names that differ on both sides
        if names[0] != names[1] and run.load_sequences:
            run.sequences = run.load_sequences()  # places pair what is left on either side
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
