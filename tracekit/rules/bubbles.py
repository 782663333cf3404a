"""Rule ``bubbles``: device idle stretches inside a step, each attributed to a cause."""

from __future__ import annotations

from typing import ClassVar

import polars as pl

from tracekit.intervals import gaps
from tracekit.metrics import KEY, MIN_BUBBLE_NS
from tracekit.rules.base import Context, Finding, Rule

SYNC_API = r"(?i)synchroni[sz]e|EventSynchronize|StreamWait|aclrtSynchronize"


def attributed_bubbles(ctx: Context, min_bubble_ns: int) -> pl.DataFrame:
    """Idle gaps (``*KEY, start, end, ns``) with ``cause``: host-bound launch, host-bound
    sync, communication, or unknown; and the rows ``before`` / ``after`` the gap."""
    rows = ctx.in_windows
    idle = gaps(rows, KEY).with_columns(ns=pl.col("end") - pl.col("start"))
    idle = idle.filter(pl.col("ns") >= min_bubble_ns).sort("start")
    if idle.height == 0:
        return idle.with_columns(
            cause=pl.lit(None, pl.String),
            before=pl.lit(None, pl.String),
            after=pl.lit(None, pl.String),
        )
    dev = ["rank", "device"]
    work = rows.with_columns(
        _end=pl.col("ts") + pl.col("dur"), _name=pl.col("name").cast(pl.String)
    ).select(*dev, "ts", "_end", "_name", "is_comm", "corr")
    before = idle.join_asof(
        work.sort("_end").select(*dev, "_end", _bname="_name", _bcomm="is_comm"),
        left_on="start",
        right_on="_end",
        by=dev,
        strategy="backward",
        check_sortedness=False,
    )
    after = before.sort("end").join_asof(
        work.sort("ts").select(*dev, "ts", "corr", _aname="_name", _acomm="is_comm"),
        left_on="end",
        right_on="ts",
        by=dev,
        strategy="forward",
        check_sortedness=False,
    )
    api = ctx.rows.filter(pl.col("kind").cast(pl.String) == "api").with_columns(
        pl.col("rank").fill_null(0).cast(pl.Int32), _api_end=pl.col("ts") + pl.col("dur")
    )
    launches = api.filter(pl.col("corr").is_not_null()).select("rank", "corr", "_api_end")
    launches = launches.unique(subset=["rank", "corr"], keep="first")
    found = after.join(launches, on=["rank", "corr"], how="left")
    # Some sync call overlaps the gap iff, among the calls starting before the gap ends, the
    # latest end (a running maximum) is after the gap starts: one as-of join, no cross join.
    syncs = (
        api.filter(pl.col("name").cast(pl.String).str.contains(SYNC_API))
        .sort("ts")
        .select("rank", _s="ts", _reach=pl.col("_api_end").cum_max().over("rank"))
    )
    found = (
        found.sort("end")
        .join_asof(
            syncs,
            left_on="end",
            right_on="_s",
            by="rank",
            strategy="backward",
            check_sortedness=False,
        )
        .with_columns(_sync=(pl.col("_s") < pl.col("end")) & (pl.col("_reach") > pl.col("start")))
    )
    cause = (
        pl.when(pl.col("_api_end") > pl.col("start"))
        .then(pl.lit("host-bound: launch"))
        .when(pl.col("_sync").fill_null(False))
        .then(pl.lit("host-bound: sync"))
        .when(pl.col("_bcomm").fill_null(False) | pl.col("_acomm").fill_null(False))
        .then(pl.lit("communication"))
        .otherwise(pl.lit("unknown"))
    )
    return (
        found.with_columns(cause=cause, before=pl.col("_bname"), after=pl.col("_aname"))
        .select(*KEY, "start", "end", "ns", "cause", "before", "after")
        .sort(*KEY, "start")
    )


class Bubbles(Rule):
    """Device idle stretches inside a decode step, attributed to a cause.

    Inside each step's window, every stretch of at least ``min_bubble_ns`` where no kernel,
    copy or collective runs on the device is a bubble (``bubble_ns``, ``bubble_count`` and
    ``largest_bubble_ns`` in ``Analysis.step_metrics``). A step is reported when its largest
    bubble reaches ``report_ns`` or its bubbles reach ``report_share`` of the step. Each
    bubble is attributed: *host-bound: launch* (the launch of the work after it was still
    being issued when the device went idle), *host-bound: sync* (the host sat in a
    synchronize call), *communication* (the device waits next to a collective), or
    *unknown*. Why it matters: idle device time in decode is pure latency; its cause tells
    whether to fix the host (CUDA graphs, fewer syncs) or the communication schedule.

    Triggers: the host stalls 150 µs before a layer -> the step's finding lists one 150,000 ns
    bubble, host-bound: launch. Clean: back-to-back launches with 1-8 µs gaps -> nothing.
    """

    id: ClassVar[str] = "bubbles"
    name: ClassVar[str] = "idle bubbles"
    options: ClassVar[dict] = {
        "min_bubble_ns": MIN_BUBBLE_NS,
        "report_ns": 20_000,
        "report_share": 0.05,
    }
    option_help: ClassVar[dict] = {
        "min_bubble_ns": "shortest idle stretch counted as a bubble (ns)",
        "report_ns": "report a step whose largest bubble reaches this (ns)",
        "report_share": "... or whose bubbles reach this share of the step",
    }

    def run(self, ctx: Context) -> list[Finding]:
        """One finding per (rank, device, step) with large bubbles."""
        found = attributed_bubbles(ctx, self.opts["min_bubble_ns"])
        if found.height == 0:
            return []
        ordered = found.sort("ns", descending=True)
        per_step = (
            ordered.group_by(KEY, maintain_order=True)
            .agg(
                total=pl.col("ns").sum(),
                largest=pl.col("ns").max(),
                count=pl.len(),
                starts=pl.col("start"),
                ends=pl.col("end"),
                causes=pl.col("cause"),
                before=pl.col("before").first(),
                after=pl.col("after").first(),
            )
            .join(ctx.windows.select(*KEY, "dur"), on=KEY)
        )
        by_cause = ordered.group_by(*KEY, "cause").agg(pl.col("ns").sum()).sort("cause")
        by_cause = by_cause.group_by(KEY).agg(causes_ns=pl.struct("cause", "ns"))
        loud = (
            per_step.filter(
                (pl.col("largest") >= self.opts["report_ns"])
                | (pl.col("total") >= self.opts["report_share"] * pl.col("dur"))
            )
            .join(by_cause, on=KEY, how="left")
            .sort(KEY)
        )
        findings = []
        for row in loud.iter_rows(named=True):
            share = row["total"] / row["dur"] if row["dur"] else None
            findings.append(
                self.at_step(
                    row,
                    "warning",
                    f"{row['count']} idle bubble(s), {row['total']:,} ns; "
                    f"largest {row['largest']:,} ns",
                    f"largest bubble is {row['causes'][0]}: "
                    f"between {row['before']} and {row['after']}",
                    metrics={
                        "bubble_ns": row["total"],
                        "bubble_count": row["count"],
                        "largest_bubble_ns": row["largest"],
                        "bubble_share": share,
                        **{f"{c['cause']}_ns": c["ns"] for c in row["causes_ns"]},
                    },
                    evidence={
                        "ranges": list(zip(row["starts"], row["ends"])),
                        "causes": row["causes"],
                        "names": [row["before"], row["after"]],
                    },
                )
            )
        return findings
