"""Waits at collectives across ranks: who arrived last, how long the others waited.

After the clocks are aligned (:mod:`.clocks`), a launch's *arrival* is its aligned start:
a collective kernel starts when its stream reaches it and then spins until every rank of
the group has arrived. A launch's ``wait_ns`` is the time from its arrival to the last
rank's arrival, at most its own duration (a launch that ended before the last rank arrived,
a broadcast's root say, did not wait for it: 0); the last rank *caused* the others' waits
(on a tie, the lowest rank). Per (rank, device, step), ``sync_wait_ns`` is the union of the
waits of that rank's launches in the step.
Only the ranks in the trace count: when a group has ranks that were not profiled, the
real last rank may be missing (the ``collectives`` check says so).

A match is only trusted where it holds, instance by instance: an instance's launches count
(``matched``) when it was seen on more than one rank and, after alignment, its ends agree
(``end_spread_ns``, the largest distance of a launch's end from the instance's median end,
at most :data:`END_TOLERANCE` of the group's median duration but no more than
:data:`END_CAP_NS`, and at least :data:`END_SLACK_NS`; for a
broadcast or reduce of three ranks or more the second largest, as its root may end first).
Where they do not (sampled traces, a rank missing a launch so that order no longer pairs
the same collective, ranks whose steps are numbered differently), the launches keep
``wait_ns`` null and count in no sum. Point-to-point launches (``send_recv``) are never
matched: which rank is the peer of which launch is not in the trace.
"""

from __future__ import annotations

import polars as pl

from tracekit.intervals import union_length
from tracekit.metrics import KEY
from tracekit.metrics.clocks import INSTANCE, clock_offsets
from tracekit.metrics.collectives import bus_factor

COLLECTIVE_COLUMNS = (
    "group",
    "kind",
    "instance",
    "rank",
    "device",
    "step",
    "name",
    "start",
    "end",
    "arrival",
    "finish",
    "wait_ns",
    "last_rank",
    "last_device",
    "skew_ns",
    "ranks",
    "matched",
    "end_spread_ns",
    "group_size",
    "bytes",
    "algbw_gbps",
    "busbw_gbps",
)
WAIT_SCHEMA = {"rank": pl.Int32, "device": pl.Int32, "step": pl.Int64, "sync_wait_ns": pl.Int64}
ROOTED = ("broadcast", "reduce")
MIN_MATCHED_SHARE = 0.5
END_TOLERANCE = 0.1
END_CAP_NS = 100_000
END_SLACK_NS = 5_000
STRAGGLER_COLUMNS = {
    "step": pl.Int64,
    "rank": pl.Int32,
    "device": pl.Int32,
    "wait_ns": pl.Int64,
    "waiters": pl.Int64,
    "instances": pl.Int64,
}


def _relative(column: str) -> pl.Expr:
    """``column`` (epoch ns) minus its minimum: small enough for exact float medians."""
    return pl.col(column) - pl.col(column).min()


def collectives(launches: pl.DataFrame, clocks: pl.DataFrame) -> pl.DataFrame:
    """The launches matched across ranks with aligned times and their waits (columns
    :data:`COLLECTIVE_COLUMNS`): ``arrival``/``finish`` in the lowest rank's clock,
    ``wait_ns``, the instance's ``last_rank`` and arrival ``skew_ns``, how many ``ranks``
    launched it, and algorithm / bus bandwidth in GB/s (bytes over the time from the last
    arrival to the launch's end) where sizes are known."""
    rows = launches.join(clocks.select("rank", "offset_ns"), on="rank", how="left").with_columns(
        arrival=pl.col("start") - pl.col("offset_ns").fill_null(0),
        finish=pl.col("end") - pl.col("offset_ns").fill_null(0),
    )
    if rows.height == rows.select(INSTANCE).n_unique():
        return _alone(rows)
    last = pl.col("arrival").max().over(INSTANCE)
    rows = rows.with_columns(
        ranks=pl.col("rank").n_unique().over(INSTANCE).cast(pl.Int64),
        _rel=_relative("finish"),
    ).with_columns(_off_end=(pl.col("_rel") - pl.col("_rel").median().over(INSTANCE)).abs())
    shared = pl.col("ranks") > 1
    # A rooted collective's root may end before the others (it only sends): with three
    # ranks or more, its ends agree when all but one do.
    rooted = pl.col("kind").is_in(ROOTED) & (pl.col("ranks") >= 3)
    spread = (
        pl.when(rooted)
        .then(pl.col("_off_end").top_k(2).min().over(INSTANCE))
        .otherwise(pl.col("_off_end").max().over(INSTANCE))
    )
    typical = pl.col("end").sub(pl.col("start")).filter(shared).median().over("group")
    tolerance = pl.max_horizontal(
        pl.min_horizontal(typical * END_TOLERANCE, pl.lit(END_CAP_NS)), pl.lit(END_SLACK_NS)
    )
    rows = rows.with_columns(end_spread_ns=spread.round(0).cast(pl.Int64)).with_columns(
        matched=shared
        & (pl.col("kind") != "send_recv").fill_null(True)
        & (pl.col("end_spread_ns") <= tolerance).fill_null(False)
    )
    wait = pl.min_horizontal(
        pl.max_horizontal(last - pl.col("arrival"), 0), pl.col("end") - pl.col("start")
    )
    finished_first = pl.col("finish") < last  # did not wait for the last rank
    latest = ["arrival", "rank", "device"]
    order = {"descending": [False, True, True]}  # the last of ties: the lowest rank
    rows = rows.with_columns(
        skew_ns=last - pl.col("arrival").min().over(INSTANCE),
        wait_ns=pl.when("matched").then(pl.when(finished_first).then(0).otherwise(wait)),
        last_rank=pl.col("rank").sort_by(latest, **order).last().over(INSTANCE),
        last_device=pl.col("device").sort_by(latest, **order).last().over(INSTANCE),
        _transfer=pl.col("finish") - last,
    )
    return _with_bandwidth(rows)


def _alone(rows: pl.DataFrame) -> pl.DataFrame:
    """:func:`collectives` of launches each alone in its instance (one rank's trace): none
    matched, none waited, each its own last arrival; the same columns without a window per
    instance (0.5 s at 200,000 launches)."""
    rows = rows.with_columns(
        wait_ns=pl.lit(None, pl.Int64),
        last_rank=pl.col("rank"),
        last_device=pl.col("device"),
        skew_ns=pl.lit(0, pl.Int64),
        ranks=pl.lit(1, pl.Int64),
        matched=pl.lit(False),
        end_spread_ns=pl.lit(0, pl.Int64),
        _transfer=pl.col("finish") - pl.col("arrival"),
    )
    return _with_bandwidth(rows)


def _with_bandwidth(rows: pl.DataFrame) -> pl.DataFrame:
    """The table of :func:`collectives`: ``rows`` with algorithm and bus bandwidth (bytes over
    ``_transfer``, the time from the last arrival to the launch's end), in its columns and
    order."""
    algbw = pl.when(pl.col("_transfer") > 0).then(pl.col("bytes") / pl.col("_transfer"))
    n = pl.coalesce("group_size", "ranks")
    rows = rows.with_columns(algbw_gbps=algbw).with_columns(
        busbw_gbps=pl.col("algbw_gbps") * bus_factor(pl.col("kind"), n)
    )
    return rows.select(COLLECTIVE_COLUMNS).sort("group", "instance", "rank", maintain_order=True)


def sync_waits(table: pl.DataFrame) -> pl.DataFrame:
    """``sync_wait_ns`` per (rank, device, step): how long the rank's launches in the step
    waited, as the union of their waits (each from the launch's arrival), so that two
    launches waiting at once (two streams, or a fused operator and its AI CPU shadow) count
    the time once."""
    waiting = table.filter(
        pl.col("step").is_not_null() & pl.col("matched") & (pl.col("wait_ns") > 0)
    )
    if waiting.height == 0:
        return pl.DataFrame(schema=WAIT_SCHEMA)
    spans = waiting.select(*KEY, ts=pl.col("arrival"), dur=pl.col("wait_ns"))
    return (
        union_length(spans, KEY)
        .rename({"busy": "sync_wait_ns"})
        .with_columns(pl.col("sync_wait_ns").cast(pl.Int64))
    )


def stragglers(table: pl.DataFrame) -> pl.DataFrame:
    """Per step, the rank (and its device) whose late arrivals caused the most waiting
    (columns :data:`STRAGGLER_COLUMNS`): ``wait_ns`` it caused over the step's launches
    (each wait counted in the step of the waiting launch), how many launches ``waiters``
    waited on it, in how many ``instances``. Steps where nobody waited have no row."""
    waited = table.filter(pl.col("step").is_not_null() & (pl.col("wait_ns") > 0))
    if waited.height == 0:
        return pl.DataFrame(schema=STRAGGLER_COLUMNS)
    per_rank = waited.group_by("step", "last_rank", "last_device").agg(
        wait_ns=pl.col("wait_ns").sum(),
        waiters=pl.len(),
        instances=pl.struct(INSTANCE).n_unique(),
    )
    top = per_rank.sort(["step", "wait_ns", "last_rank"], descending=[False, True, False])
    top = top.group_by("step", maintain_order=True).first()
    top = top.rename({"last_rank": "rank", "last_device": "device"})
    return top.select([pl.col(c).cast(t) for c, t in STRAGGLER_COLUMNS.items()]).sort("step")


def align(launched: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The launches matched and aligned, and the clock offsets: offsets first from every
    collective seen on several ranks, then again from the instances whose ends agreed (so
    that point-to-point sends or mispaired launches cannot pull the clocks). When fewer than
    :data:`MIN_MATCHED_SHARE` of the launches seen on several ranks line up, none counts."""
    clocks = clock_offsets(launched)
    table = collectives(launched, clocks)
    loose = table.filter(~pl.col("matched") & (pl.col("ranks") > 1))
    if loose.height and table["matched"].any():
        trusted = table.filter(pl.col("matched")).select(INSTANCE).unique()
        clocks = clock_offsets(launched.join(trusted, on=INSTANCE, how="semi"))
        table = collectives(launched, clocks)
    pairable = table.filter((pl.col("ranks") > 1) & (pl.col("kind") != "send_recv"))
    if pairable.height and pairable["matched"].mean() < MIN_MATCHED_SHARE:  # type: ignore[operator]
        # Most pairs disagree: the few that agree are more likely chance than collectives.
        table = table.with_columns(matched=pl.lit(False), wait_ns=pl.lit(None, pl.Int64))
    return table, clocks
