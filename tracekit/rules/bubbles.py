"""Rule ``bubbles``: device idle stretches inside a step, each attributed to a cause."""

from __future__ import annotations

from typing import ClassVar

import polars as pl

from tracekit.metrics import KEY, MIN_BUBBLE_NS
from tracekit.metrics.bubbles import attributed_bubbles
from tracekit.model import Context, Finding
from tracekit.rules.base import Rule


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
        found = attributed_bubbles(ctx.in_windows, ctx.rows, self.opts["min_bubble_ns"])
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
