"""Rule ``overlap``: communication that ran exposed where it is usually hidden, one finding
per collective."""

from __future__ import annotations

from typing import Any, ClassVar

import polars as pl

from tracekit.intervals import subtract
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

STATS = ("exposed_ns", "count")


def exposed_instances(
    work: pl.DataFrame, min_ns: int, exposed_below: float, usually_above: float
) -> pl.DataFrame:
    """Communication rows (in steps, at least ``min_ns``) that ran with less than
    ``exposed_below`` of their time beside compute while the median instance of the same
    name is overlapped at least ``usually_above``; with ``ratio`` and ``usual``."""
    rows = comm_exposure(work.lazy().filter(pl.col("step").is_not_null()))
    rows = rows.filter(pl.col("dur") >= min_ns).with_columns(
        ratio=pl.col("overlap_ns") / pl.col("dur"), name=pl.col("name").cast(pl.String)
    )
    usual = rows.group_by("name").agg(usual=pl.col("ratio").median())
    return rows.join(usual, on="name").filter(
        (pl.col("ratio") < exposed_below) & (pl.col("usual") >= usually_above)
    )


def clusters(rows: pl.DataFrame) -> pl.DataFrame:
    """Rows that overlap or touch in time on a (rank, device, step) as one cluster (an MC²
    operator and its AI CPU communication row are one transfer): ``_cluster``, its start
    ``_cstart`` and ``collective``, the name of its main row (a fused operator before a plain
    one, a kernel before a communication task, then the longest)."""
    rows = rows.sort(*KEY, "ts", maintain_order=True).with_columns(
        _end=pl.col("ts") + pl.col("dur")
    )
    rows = rows.with_columns(_reach=pl.col("_end").cum_max().over(KEY))
    before = pl.col("_reach").shift(1).over(KEY)
    rows = rows.with_columns(_cluster=(before.is_null() | (pl.col("ts") > before)).cum_sum())
    main = rows.sort(
        "is_fused_comm",
        pl.col("kind") == "kernel",
        "dur",
        "name",
        descending=[True, True, True, False],
    ).unique(subset="_cluster", keep="first")
    return rows.join(main.select("_cluster", collective="name"), on="_cluster").with_columns(
        _cstart=pl.col("ts").min().over("_cluster")
    )


class Overlap(Rule):
    """Communication that ran exposed although the same kernel is normally hidden: one
    finding per collective.

    Per step and stream it measures busy time, the union across streams, pairwise stream
    overlap and the compute-communication overlap (|comm ∩ compute| / |comm|); these are
    in ``Analysis.step_metrics`` and ``Analysis.stream_overlap``. It reports the instances
    of a communication kernel (all-to-all dispatch, all-reduce, ...) that ran with almost no
    concurrent compute while the same kernel is overlapped in most of its other instances:
    the schedule that hides it broke there (a missing event wait, a serialising sync, a
    stream priority issue). The pattern is the collective (its short name; an MC² operator
    and its AI CPU communication row count as one); the finding lists the steps where it ran
    exposed. Why it matters: exposed communication adds its full duration to the step on
    every rank.

    Impact: the exposed time of those instances summed over their steps, ranks and devices
    (the time in which they ran and no compute did: what restoring the overlap could save).
    Severity from its share of the summed step time; advice by collective (all-to-all
    dispatch / combine, all-reduce, all-gather, reduce-scatter) and vendor.

    Triggers: ``deep_ep::internode_ll::dispatch`` overlapped by the shared expert in every
    layer but one, where it runs alone -> one finding for the dispatch, listing that step,
    impact its exposed ns. Clean: every dispatch overlapped -> nothing. (A kernel that is
    never overlapped, such as a combine with nothing left to hide it, shows in
    ``exposed_comm_ns`` but is not reported: there is no broken schedule to point at.)
    """

    id: ClassVar[str] = "overlap"
    name: ClassVar[str] = "exposed communication"
    options: ClassVar[dict] = {
        "exposed_below": 0.1,
        "usually_above": 0.5,
        "min_ns": 5_000,
        **PATTERN_OPTIONS,
    }
    option_help: ClassVar[dict] = {
        "exposed_below": "an instance is exposed when its overlap ratio is below this",
        "usually_above": "... and the kernel's median overlap ratio is at least this",
        "min_ns": "ignore communication rows shorter than this (ns)",
        **PATTERN_HELP,
    }

    def run(self, ctx: Context) -> list[Finding]:
        """One finding per collective that ran exposed where it is usually hidden."""
        o = self.opts
        exposed = exposed_instances(ctx.work, o["min_ns"], o["exposed_below"], o["usually_above"])
        if exposed.height == 0:
            return []
        exposed = clusters(exposed)
        # Exposed time: the union of the instances minus compute, each piece credited to the
        # cluster it lies in (an MC² operator and its AI CPU row cover the same stretch once).
        compute = ctx.work.lazy().filter(IS_COMPUTE)  # of the steps with exposed instances
        compute = compute.join(exposed.lazy().select(KEY).unique(), on=KEY, how="semi")
        pieces = subtract(exposed, compute, KEY).sort("start")
        starts = exposed.select(*KEY, "_cstart", "_cluster").unique().sort("_cstart")
        alone = (
            pieces.join_asof(
                starts, left_on="start", right_on="_cstart", by=KEY, check_sortedness=False
            )
            .group_by("_cluster")
            .agg(ns=(pl.col("end") - pl.col("start")).sum())
        )
        exposed = labelled(exposed, "collective", "pattern")
        per_cluster = exposed.group_by("_cluster").agg(pl.col("pattern", *KEY).first())
        impact = (
            per_cluster.join(alone, on="_cluster", how="left")
            .group_by("pattern", *KEY)
            .agg(impact_ns=pl.col("ns").fill_null(0).sum(), count=pl.len())
        )
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
        obs = (
            impact.join(evidence, on=["pattern", *KEY])
            .with_columns(exposed_ns=pl.col("impact_ns"))
            .join(
                ctx.step_metrics.select(*KEY, "exposed_comm_ns", "comm_overlap_ratio"),
                on=KEY,
                how="left",
            )
        )
        table = summarise(obs, STATS, step_time(ctx))
        return findings(self, ctx, table, _describe, STATS)


def _describe(row: dict[str, Any]) -> dict[str, Any]:
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
