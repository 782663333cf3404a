"""Findings as patterns: what every rule shares to turn per-step observations into one
finding per pattern, ranked by what it costs.

A rule builds an *observations* frame: one row per (``pattern``, rank, device, step) with
``impact_ns`` (what the pattern cost in that step) and the metric columns it wants
statistics of, plus any columns of evidence. :func:`summarise` groups it by pattern (the
steps and ranks where it occurs, its summed impact, per-step median / p90 / max of each
metric, and the columns of its worst step) in a few polars expressions, with no loop over
steps; :func:`findings` turns the largest patterns into :class:`Finding` objects (a loop per
pattern) and folds the rest into one last finding that says how many it holds.

:func:`label` is the stable, readable key of a kernel name that patterns are keyed by.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import polars as pl

from tracekit.model import FOLDED, Context, Finding
from tracekit.names import kernel_key, short_name
from tracekit.rules.advice import advice
from tracekit.taxonomy import vendor_of

if TYPE_CHECKING:
    from tracekit.rules.base import Rule

# Options every pattern rule has (merged into its own ``options`` and ``option_help``).
PATTERN_OPTIONS: dict[str, Any] = {"warning_share": 0.01, "error_share": 0.1, "max_patterns": 50}
PATTERN_HELP: dict[str, str] = {
    "warning_share": "severity warning from this impact share (impact / summed step time) on",
    "error_share": "severity error from this impact share on (info below warning_share)",
    "max_patterns": "findings listed at most; the smallest patterns beyond are folded into the "
    "last one, which says how many",
}
LABEL_WIDTH = 120
CHAIN_ITEMS = 8  # names kept in a chain's key; longer chains end in "… (+N)"
STAT_NAMES = ("median", "p90", "max")
WARM_UP_STEPS = 2  # a pattern only in the trace's first this many steps is start-up cost ...
# ... when at least four steps after them are free of it (a profiler schedule that skipped
# the warm-up already leaves steady steps first: a pattern in two of four is no start-up)
WARM_UP_MIN_STEPS = WARM_UP_STEPS + 4

# PyTorch's generic TensorIterator wrappers: the operation is in their template arguments,
# the first identifier there that names one (its last ``::`` part) and is no wrapper itself.
_GENERIC = re.compile(r"^at::native::\w*(?:elementwise|reduce)_kernel\w*$")
_IDENTIFIER = re.compile(r"\b[A-Za-z_]\w*\b(?!::)")  # a namespace is no operation
_OPERATION = re.compile(
    r"\w*(?:Functor\w*|Ops|_functor|_kernel_cuda|_kernel_impl|_kernel|_impl|_gpu|_scalar)"
)
_NOT_HINTS = {"BinaryFunctor", "AUnaryFunctor", "BUnaryFunctor", "gpu_kernel_impl"}


# The collectives by name (first match): the advice kind of a communication pattern.
COLLECTIVES = (
    ("all_to_all", re.compile(r"(?i)all_?to_?all|alltoall|dispatch|combine|a2a")),
    # vLLM's and SGLang's custom all-reduce kernels name the reduction only
    ("all_reduce", re.compile(r"(?i)all_?reduce|cross_device_reduce")),
    ("all_gather", re.compile(r"(?i)all_?gather")),
    ("reduce_scatter", re.compile(r"(?i)reduce_?scatter")),
)


def collective(name: str) -> str | None:
    """``all_to_all`` (MoE dispatch / combine too), ``all_reduce``, ``all_gather``,
    ``reduce_scatter``, or None: which collective a communication name is."""
    return next((kind for kind, regex in COLLECTIVES if regex.search(name)), None)


@lru_cache(maxsize=65_536)
def label(name: str | None) -> str:
    """The key a kernel or operator name is grouped by: its readable short form (no return
    type, templates, parameters, counters or ids), and for PyTorch's generic elementwise /
    reduce wrappers the operation they run (``vectorized_elementwise_kernel<silu_kernel>``),
    so that two traces' names with the same job share the key."""
    if not name:
        return "?"
    key = kernel_key(name)
    short = short_name(key, LABEL_WIDTH)
    cut = key.find("<")
    if cut > 0 and _GENERIC.match(short):
        for word in _IDENTIFIER.findall(key[cut + 1 :]):
            wrapper = word in _NOT_HINTS or _GENERIC.match(f"at::native::{word}")
            if _OPERATION.fullmatch(word) and not wrapper:
                return f"{short.rsplit('::', 1)[-1]}<{word}>"
    return short


def labelled(frame: pl.DataFrame, column: str, out: str) -> pl.DataFrame:
    """``frame`` with ``out``: the :func:`label` of ``column`` (computed once per distinct
    name, then joined)."""
    names = frame.select(pl.col(column).cast(pl.String).unique()).to_series()
    table = pl.DataFrame(
        {"_n": names, out: [label(n) for n in names.to_list()]},
        schema={"_n": pl.String, out: pl.String},
    )
    return (
        frame.with_columns(pl.col(column).cast(pl.String).alias("_n"))
        .join(table, on="_n", how="left")
        .drop("_n")
    )


def chain_key(labels: pl.Expr) -> pl.Expr:
    """The key of a chain from the list of its members' labels (in order, repeats kept):
    ``a → b → c``, the first :data:`CHAIN_ITEMS` and ``… (+N)`` when longer."""
    head = labels.list.head(CHAIN_ITEMS).list.join(" → ")
    more = labels.list.len().cast(pl.Int64) - CHAIN_ITEMS
    return pl.when(more > 0).then(pl.format("{} → … (+{})", head, more)).otherwise(head)


def step_time(ctx: Context) -> int:
    """The summed step time: ``dur`` over every (rank, device, step) row of the metrics."""
    return int(ctx.step_metrics["dur"].sum() or 0)


def summarise(obs: pl.DataFrame, metrics: Sequence[str], total_ns: int) -> pl.DataFrame:
    """One row per pattern of the observations ``obs`` (one row per ``pattern``, rank,
    device and step, with ``impact_ns`` and the ``metrics`` columns), largest impact first.

    Columns: ``pattern``; ``steps`` and ``ranks`` (sorted lists of where it occurs);
    ``occurrences`` (its rows); ``impact_ns`` (summed) and ``impact_share`` (over
    ``total_ns``); ``<metric>_median`` / ``_p90`` / ``_max`` over its rows; and every column
    of its worst row (the largest ``impact_ns``; the earliest step, rank, device on a tie),
    ``impact_ns`` of that row as ``worst_ns``.
    """
    stats = [
        expr
        for m in metrics
        for expr in (
            pl.col(m).median().alias(f"{m}_median"),
            pl.col(m).quantile(0.9, "linear").alias(f"{m}_p90"),
            pl.col(m).max().cast(pl.Float64).alias(f"{m}_max"),
        )
    ]
    per_pattern = obs.group_by("pattern").agg(
        pl.col("step").unique().sort().alias("steps"),
        pl.col("rank").unique().sort().alias("ranks"),
        pl.len().alias("occurrences"),
        pl.col("impact_ns").sum(),
        *stats,
    )
    worst = (
        obs.sort(["impact_ns", "step", "rank", "device"], descending=[True, False, False, False])
        .unique(subset="pattern", keep="first", maintain_order=True)
        .rename({"impact_ns": "worst_ns"})
    )
    share = pl.col("impact_ns") / total_ns if total_ns else pl.lit(None, pl.Float64)
    return (
        per_pattern.join(worst, on="pattern")
        .with_columns(impact_share=share)
        .sort(["impact_ns", "pattern"], descending=[True, False])
    )


def warm_up_steps(ctx: Context) -> set[int]:
    """The trace's first :data:`WARM_UP_STEPS` step numbers when it has at least
    :data:`WARM_UP_MIN_STEPS` steps (a pattern seen only there is start-up cost); else none."""
    steps = ctx.step_metrics["step"].unique().sort() if ctx.step_metrics.height else None
    if steps is None or steps.len() < WARM_UP_MIN_STEPS:
        return set()
    return set(steps.head(WARM_UP_STEPS).to_list())


def severity(share: float | None, opts: dict[str, Any]) -> str:
    """``error`` / ``warning`` / ``info`` from an impact share and the rule's thresholds."""
    if share is not None and share >= opts["error_share"]:
        return "error"
    if share is not None and share >= opts["warning_share"]:
        return "warning"
    return "info"


def findings(
    rule: Rule,
    ctx: Context,
    table: pl.DataFrame,
    build: Callable[[dict[str, Any]], dict[str, Any]],
    metrics: Sequence[str] = (),
) -> list[Finding]:
    """The findings of a :func:`summarise` table, at most ``max_patterns``.

    ``build(row)`` gives each pattern's ``title``, ``detail``, ``metrics`` and ``evidence``
    (of the worst step) and ``kind`` (its advice key), and may set ``severity``;
    the common fields (pattern, steps, ranks, impact, worst step, advice, and the stats of
    the ``metrics`` the pattern has) come from the row. Patterns beyond the limit are folded
    into one last finding.
    """
    limit = max(1, int(rule.opts["max_patterns"]))
    shown = table.head(limit - 1) if table.height > limit else table
    vendor, total = vendor_of(ctx.meta), step_time(ctx)
    first = warm_up_steps(ctx)
    out = []
    for row in shown.iter_rows(named=True):
        made = build(row)
        share = row["impact_ns"] / total if total else None  # Python's division, exact
        warm = bool(first) and set(row["steps"]) <= first
        out.append(
            Finding(
                rule.id,
                "info" if warm else made.get("severity") or severity(share, rule.opts),
                f"warm-up only: {made['title']}" if warm else made["title"],
                made["detail"]
                + (
                    f"; only in the trace's first {WARM_UP_STEPS} steps: start-up cost (first"
                    " calls, allocations, autotuning), not the steady state"
                    if warm
                    else ""
                ),
                step=row["step"],
                rank=row["rank"],
                device=row["device"],
                metrics=made["metrics"],
                evidence=made["evidence"],
                pattern=row["pattern"],
                steps=row["steps"],
                ranks=row["ranks"],
                impact_ns=int(row["impact_ns"]),
                impact_share=share,
                stats={
                    m: {s: row[f"{m}_{s}"] for s in STAT_NAMES}
                    for m in metrics
                    if row[f"{m}_max"] is not None
                },
                advice=advice(rule.id, made["kind"], vendor, ctx.stack.ids),
                warm_up=warm,
            )
        )
    if table.height > limit:
        out.append(_folded(rule, table.slice(limit - 1), limit, vendor, total, ctx.stack.ids))
    return out


def _folded(
    rule: Rule,
    rest: pl.DataFrame,
    limit: int,
    vendor: str | None,
    total: int,
    stack: frozenset[str],
) -> Finding:
    """One finding for the patterns beyond ``max_patterns``: how many, what they cost
    together; its severity that of the largest of them."""
    impact = int(rest["impact_ns"].sum())
    share = impact / total if total else None
    largest = int(rest["impact_ns"].max()) / total if total else None  # the most severe
    steps = rest["steps"].explode().unique().sort().to_list()
    ranks = rest["ranks"].explode().unique().sort().to_list()
    return Finding(
        rule.id,
        severity(largest, rule.opts),
        f"{rest.height:,} more patterns folded: {impact:,} ns",
        f"only the {limit - 1} largest patterns are listed (option {rule.id}.max_patterns = "
        f"{limit}); the {rest.height:,} smaller ones are summed here",
        metrics={"patterns": rest.height},
        evidence={"patterns": rest["pattern"].head(20).to_list()},
        pattern=FOLDED,
        steps=steps,
        ranks=ranks,
        impact_ns=impact,
        impact_share=share,
        advice=advice(rule.id, "default", vendor, stack),
    )
