"""Rule ``overlap``: stream overlap per step, and communication that ran exposed."""

from __future__ import annotations

from typing import ClassVar

import polars as pl

from tracekit.metrics import IS_COMPUTE, KEY
from tracekit.metrics.streams import comm_exposure, exposed_ns
from tracekit.model import Context, Finding
from tracekit.rules.base import Rule


class Overlap(Rule):
    """Communication that ran exposed although the same kernel is normally hidden.

    Per step and stream it measures busy time, the union across streams, pairwise stream
    overlap and the compute-communication overlap (|comm ∩ compute| / |comm|); these are
    in ``Analysis.step_metrics`` and ``Analysis.stream_overlap``. It reports the instances
    of a communication kernel (all-to-all dispatch, all-reduce, ...) that ran with almost no
    concurrent compute while the same kernel is overlapped in most of its other instances:
    the schedule that hides it broke there (a missing event wait, a serialising sync, a
    stream priority issue). Why it matters: exposed communication adds its full duration to
    the step on every rank.

    Triggers: ``deep_ep::internode_ll::dispatch`` overlapped by the shared expert in every
    layer but one, where it runs alone -> one finding for that step with the exposed ns.
    Clean: every dispatch overlapped -> nothing. (A kernel that is never overlapped, such as
    a combine with nothing left to hide it, shows in ``exposed_comm_ns`` but is not reported:
    there is no broken schedule to point at.)
    """

    id: ClassVar[str] = "overlap"
    name: ClassVar[str] = "exposed communication"
    options: ClassVar[dict] = {"exposed_below": 0.1, "usually_above": 0.5, "min_ns": 5_000}
    option_help: ClassVar[dict] = {
        "exposed_below": "an instance is exposed when its overlap ratio is below this",
        "usually_above": "... and the kernel's median overlap ratio is at least this",
        "min_ns": "ignore communication rows shorter than this (ns)",
    }

    def run(self, ctx: Context) -> list[Finding]:
        """One finding per (rank, device, step) holding exposed, usually-hidden comm rows."""
        rows = comm_exposure(ctx.work.filter(pl.col("step").is_not_null()))
        rows = rows.filter(pl.col("dur") >= self.opts["min_ns"]).with_columns(
            ratio=pl.col("overlap_ns") / pl.col("dur"), name=pl.col("name").cast(pl.String)
        )
        usual = rows.group_by("name").agg(usual=pl.col("ratio").median())
        exposed = rows.join(usual, on="name").filter(
            (pl.col("ratio") < self.opts["exposed_below"])
            & (pl.col("usual") >= self.opts["usually_above"])
        )
        # Exposed time: the union of the instances minus compute (an MC² operator and its
        # AI CPU communication row cover the same stretch once).
        compute = ctx.work.filter(IS_COMPUTE)
        alone = exposed_ns(exposed, compute, "ns")
        per_step = (
            exposed.sort("ts")
            .group_by(KEY, maintain_order=True)
            .agg(
                count=pl.len(),
                usual=pl.col("usual").first(),
                names=pl.col("name").unique(maintain_order=True),
                streams=pl.col("stream").unique(),
                starts=pl.col("ts"),
                ends=pl.col("ts") + pl.col("dur"),
            )
            .join(alone, on=KEY, how="left")
            .join(
                ctx.step_metrics.select(*KEY, "exposed_comm_ns", "comm_overlap_ratio"),
                on=KEY,
                how="left",
            )
        )
        findings = []
        for row in per_step.iter_rows(named=True):
            findings.append(
                self.at_step(
                    row,
                    "warning",
                    f"{row['count']} communication kernel(s) ran exposed: {row['ns']:,} ns",
                    f"{row['names'][0]} is usually overlapped with compute "
                    f"({row['usual']:.0%} median) but ran alone here",
                    metrics={
                        "exposed_ns": row["ns"],
                        "count": row["count"],
                        "exposed_comm_ns": row["exposed_comm_ns"],
                        "comm_overlap_ratio": row["comm_overlap_ratio"],
                    },
                    evidence={
                        "ranges": list(zip(row["starts"], row["ends"])),
                        "streams": row["streams"],
                        "names": row["names"],
                    },
                )
            )
        return findings
