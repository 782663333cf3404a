"""Streams and communication: busy time per stream, overlap per pair of streams, and how
much of the communication ran beside compute (its exposure)."""

from __future__ import annotations

from itertools import combinations

import polars as pl

from tracekit.intervals import intersect, lengths, merge, subtract
from tracekit.metrics import DEVICE, IS_COMPUTE, KEY


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


def exposed_ns(comm: pl.DataFrame, compute: pl.DataFrame, name: str) -> pl.DataFrame:
    """Per (rank, device, step): the ns (column ``name``) in which the ``comm`` rows ran
    and no ``compute`` row did."""
    return lengths(subtract(comm, compute, KEY), KEY, name)


def comm_exposure(work: pl.DataFrame | pl.LazyFrame) -> pl.DataFrame:
    """Each communication row with ``overlap_ns``: how much of it ran beside compute kernels.

    Covered length of the compute union up to time t is ``prefix + clamp(t - start)`` of the
    last merged compute interval starting at or before t (an as-of join, O(n log n)). Lazy
    input is filtered before it is gathered: only the communication rows are copied whole.
    """
    compute = work.lazy().filter(IS_COMPUTE)
    # an HCCL task is judged with its collective, not as one more exposed kernel
    comm = (
        work.lazy()
        .filter(pl.col("is_comm") & ~pl.col("is_part"))
        .with_columns(_end=pl.col("ts") + pl.col("dur"))
        .collect()
    )
    merged = merge(compute, DEVICE)  # sorted by device and start already
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
