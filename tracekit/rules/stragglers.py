"""Rule ``stragglers``: the rank whose late arrival at collectives made the others wait."""

from __future__ import annotations

from typing import Any, ClassVar

import polars as pl

from tracekit.metrics import KEY
from tracekit.metrics.waits import stragglers
from tracekit.model import Context, Finding
from tracekit.rules.base import Rule
from tracekit.rules.patterns import (
    PATTERN_HELP,
    PATTERN_OPTIONS,
    findings,
    step_time,
    summarise,
)

STATS = ("wait_ns", "waiters")
EXPLAINS = 0.1  # a cause names an excess of at least this share of the wait it caused
# What can make a rank late, as the step metrics show it: (column, kind, words).
CAUSES = (
    ("compute_ns", "compute", "longer compute"),
    ("bubble_ns", "host_bound", "host-bound gaps (device idle)"),
    ("fallback_ns", "fallback", "fallback kernels"),
    ("_comm_ns", "slow_collective", "slower collectives of its own"),
)


def late_reasons(metrics: pl.DataFrame, late: pl.DataFrame) -> pl.DataFrame:
    """Per straggler step (``late``: ``step, rank, device``): the straggler's excess over
    the median of the other ranks in the same step, for each of :data:`CAUSES`, and the
    largest one as ``cause`` when it is at least :data:`EXPLAINS` of the wait the rank
    caused in that step (null otherwise: the trace does not show why)."""
    cols = [c for c, _, _ in CAUSES]
    rows = metrics.with_columns(_comm_ns=pl.col("comm_ns") - pl.col("sync_wait_ns")).select(
        *KEY, *cols
    )
    others = (
        rows.join(late.select("step", _r="rank", _d="device"), on="step")
        .filter((pl.col("rank") != pl.col("_r")) | (pl.col("device") != pl.col("_d")))
        .group_by("step")
        .agg(pl.col(cols).median().name.suffix("_peer"))
    )
    own = late.select("step", "rank", "device").join(rows, on=KEY, how="left")
    excess = own.join(others, on="step", how="left").select(
        "step",
        *(
            (pl.col(c).cast(pl.Float64) - pl.col(f"{c}_peer")).clip(0).alias(f"{k}_excess")
            for c, k, _ in CAUSES
        ),
    )
    kinds = [f"{k}_excess" for _, k, _ in CAUSES]
    best = pl.concat_list(kinds).list.arg_max()
    named = pl.lit([k for _, k, _ in CAUSES]).list.get(best)
    largest = pl.max_horizontal(kinds).fill_null(0)
    explains = largest >= EXPLAINS * pl.col("wait_ns")
    return (
        excess.join(late.select("step", "wait_ns"), on="step")
        .with_columns(
            cause=pl.when(explains & (largest > 0)).then(named),
            cause_ns=pl.when(explains).then(largest.round(0).cast(pl.Int64)).otherwise(0),
        )
        .drop("wait_ns")
    )


class Stragglers(Rule):
    """Ranks that arrive late at collectives, making every other rank of the group wait:
    one finding per late rank, listing the steps where it was the straggler.

    Collectives are matched across ranks (``Analysis.collectives``) and the ranks' clocks
    aligned from their ends (``Analysis.clocks``); a launch waits from its arrival until the
    group's last rank arrives. Per step, the straggler is the rank whose late arrivals
    caused the most waiting; a rank that is the straggler in more than ``persistent_share``
    of the steps with waits is a *persistent* straggler. Why it was late comes from its step
    metrics against the median of the other ranks: longer compute, host-bound gaps,
    fallback kernels or slower collectives of its own. Why it matters: a collective ends when
    its last rank arrives, so one late rank adds its delay to the step of every rank; the
    waiting ranks' profiles show it as communication time that no kernel tuning removes.

    Impact: the summed wait the rank caused (every other rank's waiting time on it), at
    least ``min_wait_ns`` per step to count.

    Triggers: 8 ranks, rank 5 starts each decode step's dispatch 300 µs after the others
    (its grouped GEMM ran longer): a persistent-straggler finding for rank 5, impact
    7 × 300 µs per step. Clean: every rank arrives within a few µs; or one rank's trace.
    """

    id = "stragglers"
    name = "Late ranks at collectives"
    options: ClassVar[dict[str, Any]] = {
        "min_wait_ns": 1_000,
        "persistent_share": 0.5,
        **PATTERN_OPTIONS,
    }
    option_help: ClassVar[dict[str, str]] = {
        "min_wait_ns": "a step's straggler must have caused at least this much waiting",
        "persistent_share": "a rank late in more than this share of the steps with waits is"
        " a persistent straggler",
        **PATTERN_HELP,
    }

    def run(self, ctx: Context) -> list[Finding]:
        """One finding per late rank, ranked by the wait it caused."""
        if ctx.collectives.height == 0:
            return []
        late = stragglers(ctx.collectives).filter(pl.col("wait_ns") >= self.opts["min_wait_ns"])
        if late.height == 0:
            return []
        multi_device = ctx.step_metrics.select("rank", "device").unique().height > (
            ctx.step_metrics["rank"].n_unique()
        )
        who = pl.format("rank {} device {}", "rank", "device") if multi_device else None
        obs = late.join(late_reasons(ctx.step_metrics, late), on="step", how="left")
        obs = obs.with_columns(
            pattern=who if who is not None else pl.format("rank {}", "rank"),
            impact_ns=pl.col("wait_ns"),
        )
        table = summarise(obs, STATS, step_time(ctx))
        waited_steps = late["step"].n_unique()
        causes = obs.group_by("pattern", "cause").agg(pl.len(), pl.col("cause_ns").sum())
        share = self.opts["persistent_share"]

        def build(row: dict[str, Any]) -> dict[str, Any]:
            n = len(row["steps"])
            persistent = n > share * waited_steps and waited_steps > 1
            why = _why(causes.filter(pl.col("pattern") == row["pattern"]))
            kind = "persistent" if persistent else "occasional"
            title = (
                f"{row['pattern']} is a persistent straggler: last to arrive in {n} of "
                f"{waited_steps} steps, the others waited {row['impact_ns']:,} ns"
                if persistent
                else f"{row['pattern']} arrived last in {n} step{'s' * (n != 1)}: the others"
                f" waited {row['impact_ns']:,} ns"
            )
            return {
                "title": title,
                "detail": f"every other rank of its collectives' groups waited for it; {why}",
                "metrics": {
                    "rank": row["rank"],
                    "wait_ns": row["worst_ns"],
                    "late_steps": n,
                    "persistent": persistent,
                    "cause": row["cause"],
                    "cause_ns": row["cause_ns"],
                },
                "evidence": {"waiters": row["waiters"], "instances": row["instances"]},
                "kind": kind,
            }

        return findings(self, ctx, table, build, STATS)


def _why(causes: pl.DataFrame) -> str:
    """Why the rank was late, in words: its most frequent cause over its late steps."""
    known = causes.filter(pl.col("cause").is_not_null()).sort(["len", "cause_ns"], descending=True)
    if known.height == 0:
        return "its step metrics do not show why (a late launch or work outside the trace)"
    cause, steps, ns = known.row(0)[1:4]
    words = dict((k, w) for _, k, w in CAUSES)[cause]
    return f"in {steps} of its late steps it had {words}: {ns:,} ns more than the other ranks"
