"""Rule ``overlap``: communication that ran exposed where it is usually hidden, and
collectives that are never overlapped; one finding per collective."""

from __future__ import annotations

from typing import Any, ClassVar

import polars as pl

from tracekit.metrics import KEY
from tracekit.model import Context, Finding
from tracekit.rules.base import Rule
from tracekit.rules.exposure import step_exposure
from tracekit.rules.mc2 import Mc2
from tracekit.rules.never_overlapped import NEVER, credited, never_overlapped
from tracekit.rules.patterns import (
    PATTERN_HELP,
    PATTERN_OPTIONS,
    collective,
    findings,
    step_time,
    summarise,
)

STATS = ("exposed_ns", "count", "wait_ns", "peer_wait_ns")
NEVER_COLUMNS = ("comm_ns", "overlap_ratio", "usual")


def exposure(ctx: Context, min_ns: int) -> pl.DataFrame:
    """The communication rows in steps of at least ``min_ns`` with ``overlap_ns``
    (:func:`step_exposure`), ``ratio`` (its share of ``dur``) and ``name`` as text."""
    rows = step_exposure(ctx)
    return rows.filter(pl.col("dur") >= min_ns).with_columns(
        ratio=pl.col("overlap_ns") / pl.col("dur"), name=pl.col("name").cast(pl.String)
    )


def exposed_instances(
    rows: pl.DataFrame, exposed_below: float, usually_above: float
) -> pl.DataFrame:
    """The rows of :func:`exposure` that ran with less than ``exposed_below`` of their time
    beside compute while the median instance of the same name is overlapped at least
    ``usually_above``; with ``usual``."""
    usual = rows.group_by("name").agg(usual=pl.col("ratio").median())
    return rows.join(usual, on="name").filter(
        (pl.col("ratio") < exposed_below) & (pl.col("usual") >= usually_above)
    )


class Overlap(Rule):
    """Communication that ran exposed: a collective that is normally hidden behind compute
    but ran alone, or one that is never overlapped and costs a share of the step; one
    finding per collective.

    Per step and stream it measures busy time, the union across streams, pairwise stream
    overlap and the compute-communication overlap (|comm ∩ compute| / |comm|); these are
    in ``Analysis.step_metrics`` and ``Analysis.stream_overlap``. It reports two kinds of
    pattern, keyed by the collective (its short name; an MC² operator and its AI CPU
    communication row count as one):

    * **Exposed where usually hidden**: the instances of a communication kernel (all-to-all
      dispatch, all-reduce, ...) that ran with almost no concurrent compute (overlap ratio
      below ``exposed_below``) while the same kernel is overlapped (``usually_above``) in
      most of its other instances: the schedule that hides it broke there (a missing event
      wait, a serialising sync, a stream priority issue). The finding lists the steps where
      it ran exposed.
    * **Never overlapped**: a collective whose median instance has less than
      ``exposed_below`` of its time beside compute (a data-parallel gradient all-reduce
      after the backward pass, a tensor-parallel all-reduce between two layers) and whose
      exposed time is at least ``min_share`` of the summed step time. Its detail gives the
      exposed ns per step, the overlap ratio, and how much of the exposed time the trace
      shows as waiting rather than moving data: on Ascend the stretches where one of the
      collective's own HCCL tasks (``is_part`` rows naming it) is a ``Notify_Wait`` and none
      of its copies or reductions runs (``wait_ns``); elsewhere the cross-rank wait of its
      launches matched across ranks (``peer_wait_ns``, as in ``sync_wait_ns``). Where
      neither is in the trace it says so: the exposed time is then an upper bound on the
      link time. Two things are left to rule ``mc2``, so that no time is reported twice:
      fused compute-communication operators and the rows that start inside one (mc2 lists
      each operator with its exposed time), and the collective instances that mc2 reports
      as an unfused GEMM + collective pair. Those are found the way mc2 finds them, by
      :func:`tracekit.rules.fusion_pairs.unfused_pairs` on the same work with the gap
      ``pair_gap_ns`` (mc2's ``max_gap_ns``), kept where a fused operator fits, and removed
      instance by instance before the median is taken: a tensor-parallel all-reduce after
      every ``o_proj`` is mc2's finding alone, while a gradient all-reduce of the same
      kernel name at the end of the step, next to no GEMM, is still this rule's. Checking the
      pairs directly, rather than reading mc2's findings, keeps the rules independent of
      their order; excluding every collective next to a GEMM would also drop pairs that mc2
      does not report (no fused operator fits them, e.g. an all-reduce feeding a GEMM).

    Why it matters: exposed communication adds its full duration to the step on every rank.

    Impact: the exposed time summed over the steps, ranks and devices (the time in which the
    collective ran and no compute kernel did: what overlapping it could save; for the never
    overlapped kind that includes any wait for peers, which the detail separates). Severity
    from its share of the summed step time; advice by collective (all-to-all dispatch /
    combine, all-reduce, all-gather, reduce-scatter; kinds ``exposed_<collective>`` for the
    never-overlapped kind), vendor and software stack.

    Triggers: ``deep_ep::internode_ll::dispatch`` overlapped by the shared expert in every
    layer but one, where it runs alone -> one finding for the dispatch, listing that step,
    impact its exposed ns. A gradient all-reduce (``ncclDevKernel_AllReduce_Sum_f32_RING_LL``,
    HCCL ``hcom_allReduce_``) at the end of every step with the compute stream waiting on it,
    4 % of the step -> one never-overlapped finding, impact its summed time, the Notify_Wait
    quarter of each HCCL instance as ``wait_ns``. Clean: every dispatch overlapped, and the
    same all-reduce running beside the LM head GEMM -> nothing; an
    ``ncclDevKernel_AllReduce_Sum_bf16_RING_LL`` right after the ``o_proj`` GEMM is rule
    mc2's unfused pair, not this rule's.
    """

    id: ClassVar[str] = "overlap"
    name: ClassVar[str] = "exposed communication"
    options: ClassVar[dict] = {
        "exposed_below": 0.1,
        "usually_above": 0.5,
        "min_ns": 5_000,
        "min_share": 0.02,
        "pair_gap_ns": Mc2.options["max_gap_ns"],
        **PATTERN_OPTIONS,
    }
    option_help: ClassVar[dict] = {
        "exposed_below": "an instance is exposed when its overlap ratio is below this",
        "usually_above": "... and the kernel's median overlap ratio is at least this",
        "min_ns": "ignore communication rows shorter than this (ns)",
        "min_share": "a collective never overlapped (median overlap ratio below exposed_below) "
        "is reported from this share of the summed step time on",
        "pair_gap_ns": "... unless rule mc2 reports it as an unfused GEMM + collective pair "
        "found with this gap (keep it equal to mc2.max_gap_ns)",
        **PATTERN_HELP,
    }

    def run(self, ctx: Context) -> list[Finding]:
        """One finding per collective that ran exposed where it is usually hidden, and per
        collective never overlapped that holds ``min_share`` of the step time."""
        o = self.opts
        rows = exposure(ctx, o["min_ns"])
        if rows.height == 0:
            return []
        broken = _broken(ctx, exposed_instances(rows, o["exposed_below"], o["usually_above"]))
        never = never_overlapped(ctx, rows, o, set(broken["pattern"]) if broken.height else set())
        parts = [p for p in (broken, never) if p.height]
        if not parts:
            return []
        obs = pl.concat(parts, how="diagonal_relaxed").join(
            ctx.step_metrics.select(*KEY, "exposed_comm_ns", "comm_overlap_ratio", step_ns="dur"),
            on=KEY,
            how="left",
        )
        missing = [c for c in (*STATS, *NEVER_COLUMNS) if c not in obs.columns]
        obs = obs.with_columns(pl.lit(None, pl.Int64).alias(c) for c in missing)
        table = summarise(obs, STATS, step_time(ctx))
        small = (pl.col("mode") == NEVER) & ~(pl.col("impact_share") >= o["min_share"])
        table = table.filter(~small)
        return findings(self, ctx, table, _describe, STATS)


def _broken(ctx: Context, exposed: pl.DataFrame) -> pl.DataFrame:
    """Observations of the exposed instances of usually overlapped collectives: one row per
    (``pattern``, rank, device, step) with their exposed ns (:func:`credited`)."""
    if exposed.height == 0:
        return pl.DataFrame()
    exposed, impact, _ = credited(exposed, ctx.work)
    evidence = (
        exposed.sort("ts")
        .group_by("pattern", *KEY)
        .agg(
            usual=pl.col("usual").first(),
            names=pl.col("name").unique(maintain_order=True),
            streams=pl.col("stream").unique().sort(),
            ranges=pl.concat_list("ts", "_end"),
        )
    )
    return impact.join(evidence, on=["pattern", *KEY]).with_columns(
        exposed_ns=pl.col("impact_ns"), mode=pl.lit("broken")
    )


def _describe(row: dict[str, Any]) -> dict[str, Any]:
    if row["mode"] == NEVER:
        return _describe_never(row)
    return {
        "kind": collective(row["pattern"]) or "default",
        "title": f"{row['pattern']} ran exposed: {row['impact_ns']:,} ns in "
        f"{len(row['steps']):,} step(s)",
        "detail": f"usually overlapped with compute ({row['usual']:.0%} median) but ran alone; "
        f"worst in step {row['step']} (rank {row['rank']}, device {row['device']}): "
        f"{row['count']} instance(s), {row['worst_ns']:,} ns exposed",
        "metrics": {
            "exposed_ns": row["worst_ns"],
            "count": row["count"],
            "exposed_comm_ns": row["exposed_comm_ns"],
            "comm_overlap_ratio": row["comm_overlap_ratio"],
        },
        "evidence": {"ranges": row["ranges"], "streams": row["streams"], "names": row["names"]},
    }


def _describe_never(row: dict[str, Any]) -> dict[str, Any]:
    kind = collective(row["pattern"])
    step_ns = row["step_ns"]
    of_step = f", {row['worst_ns'] / step_ns:.0%} of that step" if step_ns else ""
    if row["wait_ns"] is not None:
        waits = (
            f"{row['wait_ns']:,} ns of that only waited on notifies (Notify_Wait tasks inside it "
            "with none of its copies or reductions running): time for its peers (or its own "
            "planes) to be ready, not link time"
        )
    elif row["peer_wait_ns"] is not None:
        waits = f"{row['peer_wait_ns']:,} ns of that waited for the last rank to arrive"
    else:
        waits = (
            "the trace does not show how much of that waited for peers (no launch matched "
            "across ranks, no notify tasks): part of it may be waiting, not link time"
        )
    return {
        "kind": f"exposed_{kind}" if kind else "exposed",
        "title": f"{row['pattern']} never overlapped with compute: {row['impact_ns']:,} ns "
        f"exposed in {len(row['steps']):,} step(s)",
        "detail": f"no compute runs beside it ({row['usual']:.0%} of the median instance "
        f"overlapped), so its time adds to the step: {row['exposed_ns_median']:,.0f} ns "
        f"exposed per step (median); worst in step {row['step']} (rank {row['rank']}, device "
        f"{row['device']}): {row['count']} instance(s), {row['comm_ns']:,} ns, "
        f"{row['overlap_ratio']:.0%} overlapped, {row['worst_ns']:,} ns exposed{of_step}; " + waits,
        "metrics": {
            "exposed_ns": row["worst_ns"],
            "count": row["count"],
            "comm_ns": row["comm_ns"],
            "overlap_ratio": row["overlap_ratio"],
            "wait_ns": row["wait_ns"],
            "peer_wait_ns": row["peer_wait_ns"],
            "exposed_comm_ns": row["exposed_comm_ns"],
            "comm_overlap_ratio": row["comm_overlap_ratio"],
        },
        "evidence": {"ranges": row["ranges"], "streams": row["streams"], "names": row["names"]},
    }
