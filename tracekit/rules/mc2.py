"""Rule ``mc2``: fused compute-communication operators, and unfused pairs worth fusing; one
finding per operator and per pair."""

from __future__ import annotations

from typing import Any, ClassVar

import polars as pl

from tracekit.metrics import KEY
from tracekit.metrics.shapes import ASCEND_SHAPES, launching_op_dims, matmul_shape
from tracekit.model import Context, Finding
from tracekit.rules.base import Rule
from tracekit.rules.exposure import step_exposure
from tracekit.rules.fusion_pairs import (
    PRIORITY,
    fused_kind,
    step_pairs,
    too_small,
)
from tracekit.rules.patterns import (
    PATTERN_HELP,
    PATTERN_OPTIONS,
    collective,
    findings,
    labelled,
    step_time,
    summarise,
)
from tracekit.taxonomy import vendor_of

STATS = ("collective_ns", "fused_ns", "exposed_ns", "count")
SMALL = "unfused_small"  # a pair whose shapes are too small for fusion to pay off


class Mc2(Rule):
    """Fused compute-communication operators in use, and collectives next to the GEMM they
    feed (fusion opportunities: MC², ar_fusion, ...): one finding per operator and per pair.

    Fused compute-communication operators (Ascend MoeDistributeDispatch/Combine(V2),
    MatmulAllReduce, AllGatherMatmul, MatmulReduceScatter; DeepEP and NVSHMEM
    dispatch/combine; TensorRT-LLM all-reduce fusion; MegaMoE) are classified by the
    taxonomy; their time per step is ``fused_comm_ns`` in ``Analysis.step_metrics``. Each
    fused operator (pattern ``fused: <name>``) is listed with its exposed time (option
    ``fused``), as *info*: there is nothing left to fuse. The rule also reports the
    opposite: a plain collective (NCCL/RCCL/HCCL all-reduce, all-gather, reduce-scatter,
    all-to-all) in dependency order with a GEMM (grouped MoE GEMMs included): one ends before
    the other starts, within ``max_gap_ns``; a GEMM running beside it on another stream is no
    pair, and an HCCL collective's own tasks are never its neighbours
    (:mod:`tracekit.rules.fusion_pairs`). Only pairs a fused operator fits are reported
    (pattern ``unfused: <GEMM> → <collective>`` or the other way round, the same pair in every
    layer and step being one finding), their advice naming that operator (kinds
    ``unfused_all_reduce`` / ``_all_gather`` / ``_reduce_scatter`` / ``_all_to_all``,
    ``unfused_moe_dispatch`` / ``_combine``); where the GEMM's shapes are in the trace and too
    small for the fused operator to pay off, the pair is *info*, kind ``unfused_small``
    (pattern suffix ``(small shapes)``), its detail giving the bound. Why it matters: the fused
    operator overlaps the communication with the matmul tiles; the unfused pair serialises
    them and adds the collective's full time to the step.

    Impact: for an unfused pair, the time of its collectives summed over every step, rank
    and device (the communication a fused kernel could hide behind the GEMM; an upper
    bound). For a fused operator, its exposed time summed likewise: the part of it during
    which no compute kernel ran on its device — what overlapping it with other work (a shared
    expert, a second micro-batch) could still save; its whole time is in ``stats``. Severity of a
    pair from its share of the summed step time (a fused operator is info); advice by
    collective (all-reduce, all-gather, reduce-scatter, MoE dispatch / combine) and vendor.

    Triggers: ``o_proj`` GEMM then ``ncclDevKernel_AllReduce_Sum_bf16_RING_LL`` on the same
    stream in every layer -> one finding for the pair listing every step, impact the
    all-reduces' time. Clean: ``allreduce_fusion_kernel_oneshot_lamport`` (fused all-reduce +
    RMSNorm) -> no pair; the fused kernel is listed with the time it ran exposed.
    """

    id: ClassVar[str] = "mc2"
    name: ClassVar[str] = "fused and unfused compute-communication"
    options: ClassVar[dict] = {"max_gap_ns": 10_000, "fused": True, **PATTERN_OPTIONS}
    option_help: ClassVar[dict] = {
        "max_gap_ns": "largest idle gap between the GEMM and the collective (ns)",
        "fused": "list each fused compute-communication operator with its exposed time",
        **PATTERN_HELP,
    }

    def run(self, ctx: Context) -> list[Finding]:
        """One finding per unfused GEMM + collective pair and per fused operator."""
        parts = [self._pairs(ctx, vendor_of(ctx.meta))]
        if self.opts["fused"]:
            parts.append(_fused(ctx))
        obs = [p for p in parts if p.height]
        if not obs:
            return []
        obs = pl.concat(obs, how="diagonal_relaxed")
        missing = [pl.lit(None, pl.Int64).alias(m) for m in STATS if m not in obs.columns]
        table = summarise(obs.with_columns(missing), STATS, step_time(ctx))
        return findings(self, ctx, table, _describe, STATS)

    def _pairs(self, ctx: Context, vendor: str | None) -> pl.DataFrame:
        """Observations of the unfused pairs a fused operator fits: one row per (pattern,
        rank, device, step); a pair whose shapes are too small for fusion to pay off is a
        pattern of its own (kind :data:`SMALL`)."""
        pairs = step_pairs(ctx, self.opts["max_gap_ns"])
        if pairs.height == 0:
            return pl.DataFrame()
        gemms = pairs.select("rank", corr="gemm_corr", args="gemm_args")
        ops = launching_op_dims(ctx.rows, gemms)
        pairs = pairs.with_columns(gemm_dims=ops["input_dims"], gemm_op=ops["op"])
        pairs = _judged(labelled(labelled(pairs, "name", "_coll"), "gemm", "_gemm"), vendor)
        if pairs.height == 0:
            return pl.DataFrame()
        first = pl.col("order") == "gemm first"
        pattern = pl.when(first).then(pl.format("unfused: {} → {}", "_gemm", "_coll"))
        pattern = pattern.otherwise(pl.format("unfused: {} → {}", "_coll", "_gemm"))
        small = pl.col("small").is_not_null()
        pattern = pl.when(small).then(pl.format("{} (small shapes)", pattern)).otherwise(pattern)
        return (
            pairs.with_columns(pattern=pattern)
            .sort("ts")
            .group_by("pattern", *KEY)
            .agg(
                impact_ns=pl.col("dur").sum(),
                count=pl.len(),
                collective=pl.col("_coll").first(),
                gemm=pl.col("_gemm").first(),
                order=pl.col("order").first(),
                fit=pl.col("fit").first(),
                small=pl.col("small").first(),
                names=pl.col("name").unique(maintain_order=True),
                gemms=pl.col("gemm").unique(maintain_order=True),
                streams=pl.col("stream").unique().sort(),
                ranges=pl.concat_list("ts", pl.col("ts") + pl.col("dur")),
            )
            .with_columns(collective_ns=pl.col("impact_ns"), fused=pl.lit(False))
        )


def _judged(pairs: pl.DataFrame, vendor: str | None) -> pl.DataFrame:
    """The pairs a fused operator fits, with ``fit`` (their advice kind) and ``small`` (why
    their shapes are too small for it to pay off, null where they are not or are not known);
    decided once per distinct collective, order, GEMM kind and GEMM shapes."""
    keys = pairs.select(
        "name",
        "order",
        "grouped",
        _named=pl.col("args").str.extract(r'("collective":\s*"[^"]*")'),
        _shapes=pl.col("gemm_args").str.extract(ASCEND_SHAPES),
        _dims="gemm_dims",
        _op="gemm_op",
    )
    distinct = keys.unique()
    fit, small = [], []
    for name, order, grouped, named, shapes, dims, op in distinct.iter_rows():
        kind = fused_kind(name, "{" + named + "}" if named else None, order, grouped)
        fit.append(kind)
        small.append(too_small(matmul_shape(shapes, dims, op), kind, vendor))
    judged = distinct.with_columns(
        fit=pl.Series(fit, dtype=pl.String), small=pl.Series(small, dtype=pl.String)
    )
    on = ["name", "order", "grouped", "_named", "_shapes", "_dims", "_op"]
    return (
        pairs.with_columns(keys.select("_named", "_shapes", "_dims", "_op"))
        .join(judged, on=on, how="left", nulls_equal=True, maintain_order="left")
        .filter(pl.col("fit").is_not_null())
        .with_columns(_rank=pl.col("fit").replace_strict(PRIORITY, list(range(len(PRIORITY)))))
        .sort("_rank", pl.col("order") != "gemm first", maintain_order=True)
        .unique("row", keep="first", maintain_order=True)  # one pair per collective
        .drop("_named", "_shapes", "_dims", "_op", "_rank", "row")
    )


def _fused(ctx: Context) -> pl.DataFrame:
    """Observations of the fused operators: one row per (pattern, rank, device, step)."""
    if not ctx.work["is_fused_comm"].any():
        return pl.DataFrame()
    # a fused operator is communication: its rows of the steps' exposure (rule overlap's)
    rows = step_exposure(ctx).filter(pl.col("is_fused_comm"))
    if rows.height == 0:
        return pl.DataFrame()
    rows = labelled(rows, "name", "_op")
    return (
        rows.with_columns(pattern=pl.format("fused: {}", "_op"))
        .sort("ts")
        .group_by("pattern", *KEY)
        .agg(
            impact_ns=(pl.col("dur") - pl.col("overlap_ns")).sum(),
            fused_ns=pl.col("dur").sum(),
            count=pl.len(),
            collective=pl.col("_op").first(),
            names=pl.col("name").cast(pl.String).unique(maintain_order=True),
            streams=pl.col("stream").unique().sort(),
            ranges=pl.concat_list("ts", pl.col("ts") + pl.col("dur")),
        )
        .with_columns(exposed_ns=pl.col("impact_ns"), fused=pl.lit(True))
    )


def _describe(row: dict[str, Any]) -> dict[str, Any]:
    where = (
        f"worst in step {row['step']} (rank {row['rank']}, device {row['device']}): "
        f"{row['count']} instance(s), {row['worst_ns']:,} ns"
    )
    evidence = {"ranges": row["ranges"], "streams": row["streams"], "names": row["names"]}
    if row["fused"]:
        kind = "fused_moe" if collective(row["collective"]) == "all_to_all" else "fused"
        return {
            "kind": kind,
            "severity": "info",  # nothing left to fuse: listed for what overlap could save
            "title": f"fused compute-communication {row['collective']}: {row['impact_ns']:,} ns"
            f" exposed in {len(row['steps']):,} step(s)",
            "detail": "communication fused with compute; the exposed part ran with no compute"
            f" kernel beside it (its whole time: {row['fused_ns']:,} ns in the worst step); "
            f"{where} exposed",
            "metrics": {
                "exposed_ns": row["worst_ns"],
                "fused_ns": row["fused_ns"],
                "count": row["count"],
            },
            "evidence": evidence,
        }
    if row["small"] is not None:
        return {
            "kind": SMALL,
            "severity": "info",  # fusing would not pay off: nothing to advise but to leave it
            "title": f"GEMM + collective too small to fuse, {row['collective']} next to "
            f"{row['gemm']}: {row['impact_ns']:,} ns of collectives in {len(row['steps']):,} "
            "step(s)",
            "detail": f"the collective runs right next to the GEMM ({row['order']}), but "
            f"{row['small']}; {where}",
            "metrics": {"pairs": row["count"], "collective_ns": row["worst_ns"]},
            "evidence": {**evidence, "gemms": row["gemms"]},
        }
    return {
        "kind": row["fit"],
        "title": f"unfused GEMM + collective, {row['collective']} next to {row['gemm']}: "
        f"{row['impact_ns']:,} ns of collectives in {len(row['steps']):,} step(s)",
        "detail": f"the collective runs right after or before the GEMM ({row['order']}), "
        f"not beside it; a fused compute-communication operator would overlap them; {where}",
        "metrics": {"pairs": row["count"], "collective_ns": row["worst_ns"]},
        "evidence": {**evidence, "gemms": row["gemms"]},
    }
