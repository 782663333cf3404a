"""Rule ``fallback``: operators on a slow path where the trace's stack has a faster kernel,
one finding per fallback chain (what is a fallback is decided per stack by the taxonomy's
``[[fallback]]`` entries)."""

from __future__ import annotations

from typing import Any, ClassVar

import polars as pl

from tracekit.intervals import covered, merge
from tracekit.metrics import IS_COMPUTE, KEY
from tracekit.model import Context, Finding
from tracekit.rules.base import Rule
from tracekit.rules.patterns import (
    PATTERN_HELP,
    PATTERN_OPTIONS,
    chain_key,
    findings,
    labelled,
    step_time,
    summarise,
)

# Pattern kinds (advice keys), most specific first: a chain takes the first of its members'.
KINDS = ("ai_cpu_cast", "ai_cpu", "triton", "eager", "other")
_WHAT = {
    "ai_cpu_cast": "a conversion on the AI CPU",
    "ai_cpu": "operators on the AI CPU",
    "triton": "the engine's Triton fallback kernel",
    "eager": "a PyTorch eager at::native chain inside the engine's step",
    "other": "slow-path kernels",
}
# The Triton kernels of an engine's documented fallback path (taxonomy.toml [[fallback]]):
# vLLM's / SGLang's Triton fused MoE where AITER's would run.
TRITON_FALLBACK = r"^(fused_moe_kernel|triton_)"
STATS = ("fallback_ns", "chains", "kernels", "step_share")
# ATen's copies and fills: a dtype cast inside an eager chain is part of what the fused kernel
# replaces, but a chain of nothing else is data movement (buffer writes, zeroing), no fallback
DATA_MOVEMENT = r"copy_kernel|FillFunctor|\bfill_kernel"


def fallback_chains(work: pl.DataFrame) -> pl.DataFrame:
    """The fallback chains of the work rows placed in steps: maximal runs of ``is_fallback``
    rows one after another on a stream, nothing else of the stream between them, in one step.

    A chain of copies and fills alone (:data:`DATA_MOVEMENT`) is no fallback.

    Columns: ``rank, device, step, stream``, ``start`` / ``end``, ``ns`` (the summed time of
    its kernels), ``hidden_ns`` (the part of it during which compute ran on another stream of
    the device), ``kernels``, ``kind`` (an index into :data:`KINDS`), ``names`` (distinct)
    and ``pattern`` (the members' labels in order, repeats in a row once: :func:`chain_key`).
    """
    lane = ["rank", "device", "_lane"]
    rows = (
        work.filter(pl.col("step").is_not_null() & ~pl.col("is_part"))
        .select(*KEY, "ts", "dur", "name", "engine", "is_fallback", _lane=pl.col("stream"))
        .with_columns(pl.col("_lane").fill_null(-1))
    )
    lanes = rows.filter(pl.col("is_fallback")).select(lane).unique()
    if lanes.height == 0:
        return pl.DataFrame()
    rows = rows.join(lanes, on=lane, how="semi").sort(
        *lane, "ts", maintain_order=True
    )  # streams with fallbacks
    same = pl.all_horizontal(*(pl.col(c) == pl.col(c).shift(1) for c in [*lane, "step"])).fill_null(
        False
    )
    follows = same & pl.col("is_fallback").shift(1).fill_null(False)
    fb = labelled(rows.with_columns(_start=~follows).filter(pl.col("is_fallback")), "name", "label")
    name = pl.col("name").cast(pl.String)
    low = name.str.to_lowercase()
    ai_cpu = (pl.col("engine").cast(pl.String) == "ai_cpu").fill_null(False) | low.str.contains(
        "aicpu"
    )
    kind = (
        pl.when(ai_cpu & low.str.contains("cast|transdata"))
        .then(0)
        .when(ai_cpu)
        .then(1)
        .when(name.str.contains(TRITON_FALLBACK))
        .then(2)
        .when(name.str.contains("at::native", literal=True))
        .then(3)
        .otherwise(4)
    )
    fb = fb.with_columns(
        _hidden=_beside_other_streams(work, fb),
        _run=pl.col("_start").cum_sum(),
        _kind=kind,
        _new=pl.col("_start") | (pl.col("label") != pl.col("label").shift(1)),
    )
    return (
        fb.group_by("_run")
        .agg(
            *(pl.col(c).first() for c in KEY),
            stream=pl.col("_lane").first(),
            start=pl.col("ts").first(),
            end=(pl.col("ts") + pl.col("dur")).max(),
            ns=pl.col("dur").sum(),
            hidden_ns=pl.col("_hidden").sum(),
            kernels=pl.len(),
            kind=pl.col("_kind").min(),
            names=name.unique(maintain_order=True),
            _labels=pl.col("label").filter(pl.col("_new")),
            _moves=name.str.contains(DATA_MOVEMENT).all(),
        )
        .filter(~pl.col("_moves"))
        .with_columns(pattern=chain_key(pl.col("_labels")))
        .drop("_run", "_labels", "_moves")
    )


def _beside_other_streams(work: pl.DataFrame, rows: pl.DataFrame) -> pl.Series:
    """Per row of ``rows`` (``rank, device, ts, dur, _lane``): the ns of it during which a
    compute kernel ran on another stream of its device (a fallback that runs beside the real
    work costs the step little). One merge per stream that has fallbacks (a few), not per row."""
    device = ["rank", "device"]
    # real work only: two fallback chains running side by side hide nothing of each other
    real = IS_COMPUTE & ~pl.col("is_fallback") & pl.col("step").is_not_null()
    compute = work.filter(real).select(*device, "ts", "dur", _lane=pl.col("stream").fill_null(-1))
    spans = rows.select(*device, "_lane", start="ts", end=pl.col("ts") + pl.col("dur"))
    hidden = pl.Series("_hidden", [0] * rows.height, dtype=pl.Int64)
    for lane in spans["_lane"].unique().to_list():
        mine = spans.select(pl.arg_where(pl.col("_lane") == lane))[:, 0]
        others = merge(compute.filter(pl.col("_lane") != lane).drop("_lane"), device)
        if others.height:
            hidden = hidden.scatter(mine, covered(spans[mine], others, device))
    return hidden


class Fallback(Rule):
    """Operators on a slow path where the stack has a faster kernel: one finding per chain.

    Detects the rows the taxonomy flags ``is_fallback``, which depends on the trace's stack
    (:mod:`tracekit.stack`): PyTorch-eager ``at::native`` elementwise/reduce kernels inside a
    serving engine's step (vLLM, SGLang, TensorRT-LLM, ATOM, vllm-ascend, MindIE: the engine
    fuses or compiles these operations elsewhere); the engine's documented Triton fallback
    (vLLM's / SGLang's Triton ``fused_moe_kernel`` on ROCm where AITER runs elsewhere in the
    trace, i.e. its AITER MoE switch is off); and Ascend operators on the AI CPU. Not
    fallbacks: TorchInductor's generated kernels (torch.compile's compiled path), an engine's
    deliberate Triton / TileLang / FlyDSL kernels, and eager kernels of training steps or
    benchmarks without a serving engine. A *chain* is a run of such rows one after another on
    a stream; its pattern is the sequence of its kernels' short names (a name repeated in a
    row counted once), so the same chain in every layer and step is one finding. Why it
    matters: each chain costs several launches and memory round trips instead of one fused
    kernel, a fallback kernel runs slower than the library's tuned one, and AI CPU operators
    are slow and serialise the stream.

    Impact: the summed time of the chain's kernels over every step, rank and device where it
    runs, less the part during which compute ran on another stream of the device (what
    replacing it by a free kernel would save on the step's critical path: the most a fused
    kernel can save; an AI CPU operator beside the AI Core's work costs the step little).
    ``fallback_ns`` is the chains' whole time.
    Severity from its share of the summed step time; advice by kind (eager chain, Triton,
    AI CPU cast, AI CPU operator), vendor and stack.

    Triggers: ``at::native::vectorized_elementwise_kernel<... silu_kernel ...>`` then
    ``... MulFunctor ...`` instead of ``vllm::act_and_mul_kernel`` in one layer of every step
    in a vLLM trace -> one finding listing every step, impact the chain's time summed over
    them. Clean: the same steps with the fused ``act_and_mul_kernel``, or the same eager chain
    in a training step with no serving engine, or Inductor's ``triton_poi_fused_*`` kernels
    -> nothing.
    """

    id: ClassVar[str] = "fallback"
    name: ClassVar[str] = "fallback kernels"
    options: ClassVar[dict] = {"min_share": 0.0, **PATTERN_OPTIONS}
    option_help: ClassVar[dict] = {
        "min_share": "report a chain when its impact share (of the summed step time) exceeds this",
        **PATTERN_HELP,
    }

    def run(self, ctx: Context) -> list[Finding]:
        """One finding per fallback chain, largest impact first."""
        chains = fallback_chains(ctx.work)
        if chains.height == 0:
            return []
        obs = (
            chains.sort("start")
            .group_by("pattern", *KEY)
            .agg(
                impact_ns=(pl.col("ns") - pl.col("hidden_ns")).sum(),
                fallback_ns=pl.col("ns").sum(),
                chains=pl.len(),
                kernels=pl.col("kernels").sum(),
                kind=pl.col("kind").min(),
                ranges=pl.concat_list("start", "end"),
                streams=pl.col("stream").unique().sort(),
                names=pl.col("names").explode().unique(maintain_order=True),
            )
            .join(ctx.windows.select(*KEY, "dur"), on=KEY, how="left")
            .with_columns(step_share=pl.col("impact_ns") / pl.col("dur"))
        )
        table = summarise(obs, STATS, step_time(ctx))
        table = table.filter(pl.col("impact_share").fill_null(1.0) > self.opts["min_share"])
        return findings(self, ctx, table, _describe, STATS)


def _describe(row: dict[str, Any]) -> dict[str, Any]:
    kind = KINDS[row["kind"]]
    share = row["step_share"]
    return {
        "kind": kind,
        "title": f"fallback chain {row['pattern']}: {row['impact_ns']:,} ns in "
        f"{len(row['steps']):,} step(s)",
        "detail": f"{_WHAT[kind]} where a fused kernel is expected; worst in step {row['step']}"
        f" (rank {row['rank']}, device {row['device']}): {row['chains']} chain(s), "
        f"{row['worst_ns']:,} ns"
        + (f", {share:.1%} of the step" if share is not None else "")
        + (
            f" (of its {row['fallback_ns']:,} ns, {hidden:,} ran beside compute on another"
            " stream and cost the step nothing)"
            if (hidden := row["fallback_ns"] - row["worst_ns"])
            else ""
        ),
        "metrics": {
            "fallback_ns": row["fallback_ns"],
            "exposed_ns": row["worst_ns"],
            "step_share": share,
            "chains": row["chains"],
            "kernels": row["kernels"],
        },
        "evidence": {"ranges": row["ranges"], "streams": row["streams"], "names": row["names"]},
    }
