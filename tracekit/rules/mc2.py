"""Rule ``mc2``: fused compute-communication operators, and unfused pairs worth fusing; one
finding per operator and per pair."""

from __future__ import annotations

from typing import Any, ClassVar

import polars as pl

from tracekit.intervals import same_group, sort_key
from tracekit.metrics import IS_COMPUTE, KEY
from tracekit.metrics.streams import comm_exposure
from tracekit.model import Context, Finding
from tracekit.rules.base import Rule
from tracekit.rules.patterns import (
    PATTERN_HELP,
    PATTERN_OPTIONS,
    collective,
    findings,
    labelled,
    step_time,
    summarise,
)

_KERNEL_LIKE = ("kernel", "comm")
STATS = ("collective_ns", "fused_ns", "exposed_ns", "count")


def unfused_pairs(work: pl.DataFrame | pl.LazyFrame, max_gap_ns: int) -> pl.DataFrame:
    """Collectives (communication, not fused) that directly follow or precede a GEMM.

    "Directly" means the neighbouring kernel on the same stream, or the neighbouring kernel
    on the device when the collective runs on a stream of its own, within ``max_gap_ns``.
    Columns: the collective row, ``gemm`` (the neighbour's name) and ``order`` ("gemm first"
    or "collective first").
    """
    kernels = work.lazy().filter(pl.col("kind").is_in(_KERNEL_LIKE)).with_row_index("_i")
    # Neighbours are found on a narrow copy (index, keys, times, GEMM or not, name code);
    # only the collectives' rows are gathered whole.
    probe = kernels.select(
        "_i",
        "rank",
        "device",
        "stream",
        "ts",
        "name",
        "is_fused_comm",
        _end=pl.col("ts") + pl.col("dur"),
        _gemm=pl.col("category") == "gemm",
    ).collect()
    before, after = _beside_gemm(probe, ["rank", "device"], max_gap_ns)
    on_stream = _beside_gemm(probe, ["rank", "device", "stream"], max_gap_ns)
    before = on_stream[0].fill_null(before)  # same stream wins over the device-wide neighbour
    after = on_stream[1].fill_null(after)
    collective = (
        pl.col("is_comm") & ~pl.col("is_fused_comm") & ~pl.col("is_part")
    )  # tasks: their op's
    beside = before.is_not_null() | after.is_not_null()
    rows = kernels.filter(collective & pl.lit(beside)).collect()
    at = rows["_i"]
    rows = rows.with_columns(
        _before=before.gather(at), _after=after.gather(at), _end=probe["_end"].gather(at)
    )
    fused = probe.filter("is_fused_comm")
    found = _outside_fused(rows, fused)
    return found.with_columns(
        name=pl.col("name").cast(pl.String),
        gemm=pl.coalesce("_before", "_after").cast(pl.String),
        order=pl.when(pl.col("_before").is_not_null())
        .then(pl.lit("gemm first"))
        .otherwise(pl.lit("collective first")),
    ).select(pl.exclude("^_.*$"))


def _beside_gemm(probe: pl.DataFrame, over: list[str], gap: int) -> tuple[pl.Series, pl.Series]:
    """Per row of ``probe`` (in its order): the name of the GEMM right before it and right
    after it among the rows of its group ``over``, within ``gap`` ns; null where none."""
    same_prev, same_next = same_group(over, 1), same_group(over, -1)
    prev_hit = (
        same_prev & pl.col("_gemm").shift(1) & (pl.col("ts") - pl.col("_end").shift(1) <= gap)
    )
    next_hit = (
        same_next & pl.col("_gemm").shift(-1) & (pl.col("ts").shift(-1) - pl.col("_end") <= gap)
    )
    found = (
        probe.sort(sort_key(probe, over, "ts"), maintain_order=True)  # _i ascending: ties
        .select(
            "_i",
            _b=pl.when(prev_hit).then(pl.col("name").shift(1)),
            _a=pl.when(next_hit).then(pl.col("name").shift(-1)),
        )
        .sort("_i")
    )
    return found["_b"], found["_a"]


def _outside_fused(collectives: pl.DataFrame, fused: pl.DataFrame) -> pl.DataFrame:
    """Collectives that do not start inside a fused operator on their device (an MC²
    operator's AI CPU communication side is part of the fused operator, not a pair);
    ``fused`` has the fused rows' ``rank, device, ts, _end``."""
    dev = ["rank", "device"]
    fused = fused.sort("ts").select(*dev, _fs="ts", _reach=pl.col("_end").cum_max().over(dev))
    found = collectives.sort("ts").join_asof(
        fused, left_on="ts", right_on="_fs", by=dev, strategy="backward", check_sortedness=False
    )
    inside = pl.col("_reach").is_not_null() & (pl.col("_reach") > pl.col("ts"))
    return found.filter(~inside).drop("_fs", "_reach")


class Mc2(Rule):
    """Fused compute-communication operators in use, and collectives next to the GEMM they
    feed (fusion opportunities: MC², ar_fusion, ...): one finding per operator and per pair.

    Fused compute-communication operators (Ascend MoeDistributeDispatch/Combine(V2),
    MatmulAllReduce, AllGatherMatmul, MatmulReduceScatter; DeepEP and NVSHMEM
    dispatch/combine; TensorRT-LLM all-reduce fusion; MegaMoE) are classified by the
    taxonomy; their time per step is ``fused_comm_ns`` in ``Analysis.step_metrics``. Each
    fused operator (pattern ``fused: <name>``) is listed with its exposed time (option
    ``fused``), as *info*: there is nothing left to fuse. The rule also reports the
    opposite: a plain collective (NCCL/RCCL/HCCL all-reduce, all-gather, reduce-scatter)
    that directly follows or precedes a GEMM, with nothing in between (pattern
    ``unfused: <GEMM> → <collective>`` or the other way round, the same pair in every layer
    and step being one finding). Why it matters: the fused
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
        work = ctx.work.lazy().filter(pl.col("step").is_not_null())
        parts = [self._pairs(work)]
        if self.opts["fused"]:
            parts.append(_fused(work))
        obs = [p for p in parts if p.height]
        if not obs:
            return []
        obs = pl.concat(obs, how="diagonal_relaxed")
        missing = [pl.lit(None, pl.Int64).alias(m) for m in STATS if m not in obs.columns]
        table = summarise(obs.with_columns(missing), STATS, step_time(ctx))
        return findings(self, ctx, table, _describe, STATS)

    def _pairs(self, work: pl.LazyFrame) -> pl.DataFrame:
        """Observations of the unfused pairs: one row per (pattern, rank, device, step)."""
        pairs = unfused_pairs(work, self.opts["max_gap_ns"])
        if pairs.height == 0:
            return pl.DataFrame()
        pairs = labelled(labelled(pairs, "name", "_coll"), "gemm", "_gemm")
        first = pl.col("order") == "gemm first"
        pattern = pl.when(first).then(pl.format("unfused: {} → {}", "_gemm", "_coll"))
        pattern = pattern.otherwise(pl.format("unfused: {} → {}", "_coll", "_gemm"))
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
                names=pl.col("name").unique(maintain_order=True),
                gemms=pl.col("gemm").unique(maintain_order=True),
                streams=pl.col("stream").unique().sort(),
                ranges=pl.concat_list("ts", pl.col("ts") + pl.col("dur")),
            )
            .with_columns(collective_ns=pl.col("impact_ns"), fused=pl.lit(False))
        )


def _fused(work: pl.LazyFrame) -> pl.DataFrame:
    """Observations of the fused operators: one row per (pattern, rank, device, step)."""
    if not work.select(pl.col("is_fused_comm").any()).collect().item():
        return pl.DataFrame()
    # the fused rows and the compute rows they may overlap: exposure of nothing else
    mine = work.lazy().filter(pl.col("step").is_not_null() & (pl.col("is_fused_comm") | IS_COMPUTE))
    rows = labelled(comm_exposure(mine), "name", "_op")
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
    kind = collective(row["collective"])
    return {
        "kind": f"unfused_{kind}" if kind and kind != "all_to_all" else "unfused",
        "title": f"unfused GEMM + collective, {row['collective']} next to {row['gemm']}: "
        f"{row['impact_ns']:,} ns of collectives in {len(row['steps']):,} step(s)",
        "detail": f"the collective runs right next to the GEMM ({row['order']}); a fused "
        f"compute-communication kernel would overlap them; {where}",
        "metrics": {"pairs": row["count"], "collective_ns": row["worst_ns"]},
        "evidence": {**evidence, "gemms": row["gemms"]},
    }
