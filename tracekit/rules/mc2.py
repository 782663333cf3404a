"""Rule ``mc2``: fused compute-communication operators, and unfused pairs worth fusing."""

from __future__ import annotations

from typing import ClassVar

import polars as pl

from tracekit.metrics import KEY
from tracekit.model import Context, Finding
from tracekit.rules.base import Rule
from tracekit.timeline import is_part

_KERNEL_LIKE = ("kernel", "comm")


def unfused_pairs(work: pl.DataFrame, max_gap_ns: int) -> pl.DataFrame:
    """Collectives (communication, not fused) that directly follow or precede a GEMM.

    "Directly" means the neighbouring kernel on the same stream, or the neighbouring kernel
    on the device when the collective runs on a stream of its own, within ``max_gap_ns``.
    Columns: the collective row, ``gemm`` (the neighbour's name) and ``order`` ("gemm first"
    or "collective first").
    """
    rows = work.filter(pl.col("kind").cast(pl.String).is_in(_KERNEL_LIKE)).sort("ts")
    rows = rows.with_columns(name=pl.col("name").cast(pl.String), _end=pl.col("ts") + pl.col("dur"))

    def neighbours(over: list[str], tag: str) -> list[pl.Expr]:
        return [
            pl.col("category").shift(1).over(over).alias(f"_pcat{tag}"),
            pl.col("name").shift(1).over(over).alias(f"_pname{tag}"),
            (pl.col("ts") - pl.col("_end").shift(1).over(over)).alias(f"_pgap{tag}"),
            pl.col("category").shift(-1).over(over).alias(f"_ncat{tag}"),
            pl.col("name").shift(-1).over(over).alias(f"_nname{tag}"),
            (pl.col("ts").shift(-1).over(over) - pl.col("_end")).alias(f"_ngap{tag}"),
        ]

    rows = rows.with_columns(
        *neighbours(["rank", "device", "stream"], "s"), *neighbours(["rank", "device"], "d")
    )
    gap = max_gap_ns
    before = pl.lit(None, pl.String)
    after = pl.lit(None, pl.String)
    for tag in ("d", "s"):  # same stream wins over the device-wide neighbour
        hit = (pl.col(f"_pcat{tag}") == "gemm") & (pl.col(f"_pgap{tag}") <= gap)
        before = pl.when(hit).then(pl.col(f"_pname{tag}")).otherwise(before)
        hit = (pl.col(f"_ncat{tag}") == "gemm") & (pl.col(f"_ngap{tag}") <= gap)
        after = pl.when(hit).then(pl.col(f"_nname{tag}")).otherwise(after)
    collective = pl.col("is_comm") & ~pl.col("is_fused_comm") & ~is_part()  # tasks: their op's
    collectives = _outside_fused(rows.filter(collective), rows)
    found = collectives.with_columns(_before=before, _after=after).filter(
        pl.col("_before").is_not_null() | pl.col("_after").is_not_null()
    )
    return found.with_columns(
        gemm=pl.coalesce("_before", "_after"),
        order=pl.when(pl.col("_before").is_not_null())
        .then(pl.lit("gemm first"))
        .otherwise(pl.lit("collective first")),
    ).select(pl.exclude("^_.*$"))


def _outside_fused(collectives: pl.DataFrame, rows: pl.DataFrame) -> pl.DataFrame:
    """Collectives that do not start inside a fused operator on their device (an MC²
    operator's AI CPU communication side is part of the fused operator, not a pair)."""
    dev = ["rank", "device"]
    fused = rows.filter(pl.col("is_fused_comm")).sort("ts")
    fused = fused.select(*dev, _fs="ts", _reach=pl.col("_end").cum_max().over(dev))
    found = collectives.sort("ts").join_asof(
        fused, left_on="ts", right_on="_fs", by=dev, strategy="backward", check_sortedness=False
    )
    inside = pl.col("_reach").is_not_null() & (pl.col("_reach") > pl.col("ts"))
    return found.filter(~inside).drop("_fs", "_reach")


class Mc2(Rule):
    """Collectives next to the GEMM they feed: fusion opportunities (MC², ar_fusion, ...).

    Fused compute-communication operators (Ascend MoeDistributeDispatch/Combine(V2),
    MatmulAllReduce, AllGatherMatmul, MatmulReduceScatter; DeepEP and NVSHMEM
    dispatch/combine; TensorRT-LLM all-reduce fusion; MegaMoE) are classified by the
    taxonomy; their time per step is ``fused_comm_ns`` in ``Analysis.step_metrics``. This
    rule reports the opposite: a plain collective (NCCL/RCCL/HCCL all-reduce, all-gather,
    reduce-scatter) that directly follows or precedes a GEMM, with nothing in between. Why it
    matters: the fused operator overlaps the communication with the matmul tiles; the unfused
    pair serialises them and adds the collective's full time to the step.

    Triggers: ``o_proj`` GEMM then ``ncclDevKernel_AllReduce_Sum_bf16_RING_LL`` on the same
    stream in every layer -> one finding per step with the pairs and the collective time.
    Clean: ``allreduce_fusion_kernel_oneshot_lamport`` (fused all-reduce + RMSNorm) -> nothing.
    """

    id: ClassVar[str] = "mc2"
    name: ClassVar[str] = "unfused compute-communication"
    options: ClassVar[dict] = {"max_gap_ns": 10_000}
    option_help: ClassVar[dict] = {
        "max_gap_ns": "largest idle gap between the GEMM and the collective (ns)",
    }

    def run(self, ctx: Context) -> list[Finding]:
        """One finding per (rank, device, step) with unfused GEMM + collective pairs."""
        pairs = unfused_pairs(
            ctx.work.filter(pl.col("step").is_not_null()), self.opts["max_gap_ns"]
        )
        per_step = (
            pairs.sort("ts")
            .group_by(KEY, maintain_order=True)
            .agg(
                pairs=pl.len(),
                ns=pl.col("dur").sum(),
                order=pl.col("order").first(),
                names=pl.col("name").unique(maintain_order=True),
                gemms=pl.col("gemm").unique(maintain_order=True),
                streams=pl.col("stream").unique(),
                starts=pl.col("ts"),
                ends=pl.col("ts") + pl.col("dur"),
            )
        )
        findings = []
        for row in per_step.iter_rows(named=True):
            findings.append(
                self.at_step(
                    row,
                    "warning",
                    f"{row['pairs']} unfused GEMM + collective pair(s): {row['ns']:,} ns of "
                    "collectives",
                    f"{row['names'][0]} runs right next to {row['gemms'][0]} ({row['order']}); "
                    "a fused compute-communication kernel would overlap them",
                    metrics={"pairs": row["pairs"], "collective_ns": row["ns"]},
                    evidence={
                        "ranges": list(zip(row["starts"], row["ends"])),
                        "streams": row["streams"],
                        "names": row["names"],
                        "gemms": row["gemms"],
                    },
                )
            )
        return findings
