"""Rule ``overlap``: stream overlap per step, and communication that ran exposed."""

from __future__ import annotations

from itertools import combinations
from typing import ClassVar

import polars as pl

from tracekit.intervals import intersect, lengths, merge, subtract
from tracekit.metrics import IS_COMPUTE, KEY
from tracekit.rules.base import Context, Finding, Rule
from tracekit.timeline import is_part

DEVICE = ["rank", "device"]


def stream_busy(rows: pl.DataFrame) -> pl.DataFrame:
    """Busy ns per (rank, device, step, stream) of work rows cut to their step's window."""
    return lengths(merge(rows, [*KEY, "stream"]), [*KEY, "stream"], "busy_ns").sort(
        [*KEY, "stream"]
    )


def pair_overlap(rows: pl.DataFrame, windows: pl.DataFrame) -> pl.DataFrame:
    """Overlap ns per (rank, device, step, stream_a < stream_b) of work rows cut to their
    step's window: both streams busy."""
    rows = rows.filter(pl.col("stream").is_not_null())
    streams = rows.select("rank", "device", "stream").unique()
    pairs = []
    for (rank, device), group in streams.group_by(DEVICE):
        here = (pl.col("rank") == rank) & (pl.col("device") == device)
        mine, steps = rows.filter(here), windows.filter(here).select(KEY)
        for a, b in combinations(sorted(group["stream"].to_list()), 2):
            both = intersect(
                mine.filter(pl.col("stream") == a), mine.filter(pl.col("stream") == b), KEY
            )
            ns = steps.join(lengths(both, KEY, "overlap_ns"), on=KEY, how="left")
            pairs.append(
                ns.with_columns(
                    pl.col("overlap_ns").fill_null(0),
                    stream_a=pl.lit(a, pl.Int64),
                    stream_b=pl.lit(b, pl.Int64),
                )
            )
    if not pairs:
        return pl.DataFrame(
            schema={
                **dict.fromkeys(KEY, pl.Int64),
                "stream_a": pl.Int64,
                "stream_b": pl.Int64,
                "overlap_ns": pl.Int64,
            }
        )
    return (
        pl.concat(pairs, how="diagonal_relaxed")
        .select(*KEY, "stream_a", "stream_b", "overlap_ns")
        .sort([*KEY, "stream_a", "stream_b"])
    )


def comm_exposure(work: pl.DataFrame) -> pl.DataFrame:
    """Each communication row with ``overlap_ns``: how much of it ran beside compute kernels.

    Covered length of the compute union up to time t is ``prefix + clamp(t - start)`` of the
    last merged compute interval starting at or before t (an as-of join, O(n log n)).
    """
    compute = work.filter(IS_COMPUTE)
    # an HCCL task is judged with its collective, not as one more exposed kernel
    comm = work.filter(pl.col("is_comm") & ~is_part()).with_columns(
        _end=pl.col("ts") + pl.col("dur")
    )
    merged = merge(compute, DEVICE).sort(*DEVICE, "start")
    merged = merged.with_columns(
        _prefix=(pl.col("end") - pl.col("start")).cum_sum().over(DEVICE)
        - (pl.col("end") - pl.col("start"))
    )

    def covered_until(at: str) -> pl.DataFrame:
        probe = comm.select(pl.int_range(pl.len()).alias("_i"), *DEVICE, pl.col(at)).sort(at)
        found = probe.join_asof(
            merged.sort("start"),
            left_on=at,
            right_on="start",
            by=DEVICE,
            strategy="backward",
            check_sortedness=False,
        )
        span = pl.col("end") - pl.col("start")
        upto = pl.col("_prefix") + pl.min_horizontal(
            pl.max_horizontal(pl.col(at) - pl.col("start"), 0), span
        )
        return found.select("_i", upto.fill_null(0).alias(at)).sort("_i")

    done = covered_until("_end")["_end"] - covered_until("ts")["ts"]
    return comm.drop("_end").with_columns(overlap_ns=done)


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
        alone = lengths(subtract(exposed, compute, KEY), KEY, "ns")
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
