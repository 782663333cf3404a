"""Clock offsets between ranks, estimated from the collectives they share.

Each profiler stamps events with its own host's clock, so two ranks' times of the same
moment can differ by microseconds (one host, different processes) to milliseconds (hosts
synchronised by NTP only). A collective cannot finish before its last rank arrives and
then finishes on all ranks at nearly the same moment: the ends of matched instances are the
common reference. The estimator is robust: per rank, the median over instances of its end
minus the instance's median end (after the previous round's offsets), three rounds, the
lowest rank of each set of connected ranks (ranks sharing collectives, directly or through
others) as zero: ranks that share nothing cannot be related, and their offsets are relative
to their own set's lowest rank (``reference``). An offset is applied only when it stands out
from its own spread (the median distance of that rank's aligned ends from the instance's
median end): clocks that already agree are left as they are.
"""

from __future__ import annotations

import polars as pl

ROUNDS = 3
MIN_OFFSET_NS = 1_000  # smaller offsets are clock noise, not a different time base
SIGNIFICANCE = 3.0  # an offset is applied when larger than this many spreads
INSTANCE = ["group", "instance"]
CLOCK_COLUMNS = {
    "rank": pl.Int32,
    "reference": pl.Int32,
    "offset_ns": pl.Int64,
    "estimate_ns": pl.Int64,
    "spread_ns": pl.Int64,
    "instances": pl.Int64,
    "applied": pl.Boolean,
}


def shared(launches: pl.DataFrame) -> pl.DataFrame:
    """The launches of instances seen on more than one rank."""
    return launches.filter(pl.col("rank").n_unique().over(INSTANCE) > 1)


def _median_end(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.with_columns(_mid=pl.col("_end").median().over(INSTANCE))


def components(rows: pl.DataFrame, ranks: pl.Series) -> pl.DataFrame:
    """Per rank, ``reference``: the lowest rank it is connected to through shared instances
    (ranks that share no collective, directly or through others, cannot be aligned to each
    other; a rank that shares none is its own reference)."""
    label = pl.DataFrame({"rank": ranks, "reference": ranks})
    links = rows.select("rank", *INSTANCE)
    for _ in range(len(ranks)):
        per_instance = (
            links.join(label, on="rank").group_by(INSTANCE).agg(pl.col("reference").min())
        )
        spread = (
            links.join(per_instance, on=INSTANCE)
            .group_by("rank")
            .agg(pl.col("reference").min().alias("_new"))
        )
        updated = (
            label.join(spread, on="rank", how="left")
            .with_columns(reference=pl.min_horizontal("reference", "_new"))
            .drop("_new")
        )
        if updated.sort("rank").equals(label.sort("rank")):
            break
        label = updated
    return label.sort("rank")


def clock_offsets(launches: pl.DataFrame) -> pl.DataFrame:
    """Per rank (columns :data:`CLOCK_COLUMNS`): ``estimate_ns`` (its clock minus the clock
    of its ``reference``, the lowest rank it shares collectives with, directly or through
    others), ``spread_ns``, the ``instances`` it rests on, and ``offset_ns`` (the estimate
    where ``applied``, else 0) to subtract from its times."""
    ranks = launches.select(pl.col("rank").unique().sort()).to_series()
    rows = shared(launches).select("rank", *INSTANCE, "end")
    # epoch ns (~1.8e18) are beyond float64's exact integers: work relative to the first end
    rows = rows.with_columns(pl.col("end") - pl.col("end").min())
    reference = components(rows, ranks)
    if rows.height == 0:
        frame = reference.with_columns(
            offset_ns=0, estimate_ns=0, spread_ns=0, instances=0, applied=False
        )
        return frame.select([pl.col(c).cast(t) for c, t in CLOCK_COLUMNS.items()])
    offsets = reference.with_columns(_off=pl.lit(0.0))
    for _ in range(ROUNDS):
        aligned = rows.join(offsets, on="rank").with_columns(_end=pl.col("end") - pl.col("_off"))
        aligned = _median_end(aligned)
        estimate = aligned.group_by("rank").agg(_off=(pl.col("end") - pl.col("_mid")).median())
        offsets = reference.join(estimate, on="rank", how="left").with_columns(
            pl.col("_off").fill_null(0.0)
        )
        base = offsets.select("rank", _base="_off").rename({"rank": "reference"})
        offsets = (
            offsets.join(base, on="reference")
            .with_columns(_off=pl.col("_off") - pl.col("_base"))
            .drop("_base")
        )
    aligned = _median_end(
        rows.join(offsets, on="rank").with_columns(_end=pl.col("end") - pl.col("_off"))
    )
    spread = aligned.group_by("rank").agg(
        spread_ns=(pl.col("_end") - pl.col("_mid")).abs().median(),
        instances=pl.len(),
    )
    out = offsets.join(spread, on="rank", how="left").with_columns(
        estimate_ns=pl.col("_off").round(0),
        spread_ns=pl.col("spread_ns").fill_null(0).round(0),
        instances=pl.col("instances").fill_null(0),
    )
    significant = (pl.col("estimate_ns").abs() >= MIN_OFFSET_NS) & (
        pl.col("estimate_ns").abs() > SIGNIFICANCE * pl.col("spread_ns")
    )
    out = out.with_columns(applied=significant).with_columns(
        offset_ns=pl.when("applied").then("estimate_ns").otherwise(0)
    )
    return out.select([pl.col(c).cast(t) for c, t in CLOCK_COLUMNS.items()]).sort("rank")
