"""Cross-rank metrics on hand-made launches: clock offsets, matching, waits, stragglers."""

from __future__ import annotations

import random

import polars as pl
import pytest

from tracekit.checks.cluster import cluster_checks
from tracekit.metrics.clocks import clock_offsets
from tracekit.metrics.collectives import LAUNCH_COLUMNS
from tracekit.metrics.waits import align, collectives, stragglers, sync_waits

OFFSETS = {0: 0, 1: 5_000_000, 2: -3_000_000}
DUR = 50_000


def _launches(
    late: dict[tuple[int, int], int], instances: int = 10, jitter: int = 0
) -> pl.DataFrame:
    """Ranks 0-2, one all-reduce group, instance i at true time i*1 ms (step i // 5); rank r
    arrives ``late[(r, i)]`` ns late and every rank's launch ends at the same true moment
    (with ``jitter``: ends scattered by up to ±5 × jitter ns, a different amount per rank
    and instance); times as written = true + OFFSETS[rank]."""
    rows = []
    for i in range(instances):
        start = 1_000_000 * i
        arrive = {r: start + late.get((r, i), 0) for r in OFFSETS}
        end = max(arrive.values()) + DUR
        for r, off in OFFSETS.items():
            rows.append(
                {
                    "rank": r,
                    "device": r,
                    "step": i // 5,
                    "group": "all_reduce @ pg 0",
                    "kind": "all_reduce",
                    "instance": f"{i // 5}:{i % 5}",
                    "name": "ncclDevKernel_AllReduce_Sum_bf16_RING_LL",
                    "start": arrive[r] + off,
                    "end": end + off + random.Random(i * 10 + r).randint(-5, 5) * jitter,
                    "bytes": 8_000_000,
                    "group_size": 3,
                }
            )
    return pl.DataFrame(rows, schema=LAUNCH_COLUMNS)


def test_offsets_are_recovered_exactly_from_the_ends() -> None:
    clocks = clock_offsets(_launches({(2, 3): 20_000}))
    assert clocks["offset_ns"].to_list() == [0, 5_000_000, -3_000_000]
    assert clocks["spread_ns"].to_list() == [0, 0, 0]
    assert clocks["instances"].to_list() == [10, 10, 10]
    assert clocks["applied"].to_list() == [False, True, True]
    assert clocks["reference"].to_list() == [0, 0, 0]


def test_waits_and_the_straggler_per_step() -> None:
    table, clocks = align(_launches({(2, 3): 20_000, (1, 7): 30_000, (0, 7): 10_000}))
    waits = sync_waits(table).sort("rank", "step")  # (rank, device, step) that waited
    assert waits.rows() == [
        (0, 0, 0, 20_000),
        (0, 0, 1, 20_000),
        (1, 1, 0, 20_000),
        (2, 2, 1, 30_000),
    ]
    late = stragglers(table)
    assert late.select("step", "rank", "wait_ns", "waiters").rows() == [
        (0, 2, 40_000, 2),
        (1, 1, 50_000, 2),
    ]
    instance = table.filter(pl.col("instance") == "0:3")
    assert instance["skew_ns"].to_list() == [20_000] * 3
    # 8 MB over the 50 µs from the last arrival to the end: 160 GB/s; bus 2(n-1)/n of it
    assert instance["algbw_gbps"].to_list() == pytest.approx([160.0] * 3)
    assert instance["busbw_gbps"].to_list() == pytest.approx([160.0 * 4 / 3] * 3)
    checks = {c.name: c for c in cluster_checks(table, clocks, {}, 3)}
    assert checks["ranks.clocks"].status == "pass"
    assert checks["ranks.matching"].status == "pass"
    assert checks["ranks.matching"].actual == 30


def test_ends_that_disagree_are_not_matched_and_say_so() -> None:
    launches = _launches({(2, 3): 20_000}, jitter=20_000).with_columns(
        group_size=pl.lit(None, pl.Int64)  # unknown: the world size (8) is the bound
    )
    table, clocks = align(launches)
    matched = table.filter(pl.col("matched"))
    # an instance counts only where its own ends agree (within 5 µs here)
    assert (matched["end_spread_ns"].max() or 0) <= 5_000
    assert table.filter(~pl.col("matched")).height >= 20
    assert (table["wait_ns"].is_null() == ~table["matched"]).all()
    checks = {c.name: c for c in cluster_checks(table, clocks, {"world_size": 8}, 3)}
    detail = checks["ranks.matching"].detail
    assert checks["ranks.matching"].status == "warn"
    assert "not counted" in detail and "8 ranks, 3 in the trace" in detail


def test_one_rank_has_no_waits_and_no_cross_rank_checks() -> None:
    launches = _launches({}).filter(pl.col("rank") == 1)
    table, clocks = align(launches)
    assert clocks.rows() == [(1, 1, 0, 0, 0, 0, False)]  # its own reference
    assert table["ranks"].unique().to_list() == [1]
    assert not table["matched"].any()
    assert cluster_checks(table, clocks, {}, 1) == []


def test_launches_alone_in_their_instances_read_as_the_windows_would() -> None:
    """One rank's launches skip the per-instance windows: the same table as the general path
    (forced by giving a copy of one launch a second device of the same rank)."""
    alone = _launches({}, instances=12).filter(pl.col("rank") == 1)
    table, clocks = align(alone)
    twin = alone.head(1).with_columns(device=pl.lit(9, pl.Int32), instance=pl.lit("twin"))
    general = collectives(pl.concat([alone, twin.with_columns(instance=pl.lit("0:0"))]), clocks)
    general = general.filter(pl.col("device") != 9)
    shared = general.filter(pl.col("instance") == "0:0")
    assert shared["end_spread_ns"].to_list() == [0]  # a twin with the same end
    assert table.drop("end_spread_ns").equals(general.drop("end_spread_ns"))
    assert table["algbw_gbps"].to_list() == [8_000_000 / DUR] * 12  # bytes over its span
    assert table["wait_ns"].null_count() == 12 and table["skew_ns"].sum() == 0


def test_ranks_that_share_no_collective_are_aligned_within_their_sets() -> None:
    """Ranks {0, 1} share group A, {2, 3} group B, rank 4 nothing: offsets are relative to
    each set's lowest rank, rank 4 is not aligned, and the check names both."""
    rows = []
    truth = {0: 0, 1: 2_000_000, 2: 5_000_000, 3: 4_300_000, 4: 9_000_000}
    for i in range(6):
        for group, members in (("A", (0, 1)), ("B", (2, 3)), ("C", (4,))):
            for r in members:
                start = 1_000_000 * i + truth[r]
                rows.append(
                    {"rank": r, "device": r, "step": 0, "group": group, "kind": "all_reduce",
                     "instance": f"0:{i}", "name": "allreduce", "start": start,
                     "end": start + DUR, "bytes": None, "group_size": None}
                )  # fmt: skip
    table, clocks = align(pl.DataFrame(rows, schema=LAUNCH_COLUMNS))
    assert clocks.select("rank", "reference", "offset_ns", "instances").rows() == [
        (0, 0, 0, 6),
        (1, 0, 2_000_000, 6),
        (2, 2, 0, 6),
        (3, 2, -700_000, 6),
        (4, 4, 0, 0),
    ]
    check = {c.name: c for c in cluster_checks(table, clocks, {}, 5)}["ranks.clocks"]
    assert check.status == "warn"
    assert "rank 3 -700,000 ns (against rank 2)" in check.detail
    assert "rank 4 share no collective" in check.detail and "2 sets" in check.detail
