"""Rule ``stragglers`` and the waits under it, on the multi-rank fixture (Kineto per-rank
files and torch_npu rank folders) with clock offsets and planted late ranks: every rank's
``sync_wait_ns`` per step within 1 µs of the truth after alignment, the straggler per step,
the persistent straggler; the same through :func:`tracekit.cluster.analyze_cluster`."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

import tracekit
from fixtures.cluster_scenario import Cluster, Late, build_cluster
from fixtures.cluster_writers import write_kineto_cluster, write_torch_npu_cluster
from tracekit.cluster import analyze_cluster

WORLD, STEPS = 4, 4
PERSISTENT, ONCE = 3, 1
# rank 3 is late by 200 µs in every step; in step 2 rank 1 is later still (500 µs), so it
# is that step's straggler and rank 3 waits 300 µs too.
LATE = [*(Late(PERSISTENT, s, 200_000) for s in range(STEPS)), Late(ONCE, 2, 500_000)]
TOLERANCE_NS = 1_000
WRITERS = {"nvidia": write_kineto_cluster, "ascend": write_torch_npu_cluster}


def _written(tmp: Path, vendor: str, late: list[Late]) -> tuple[Cluster, Path]:
    cluster = build_cluster(WORLD, vendor=vendor, steps=STEPS, late=late)
    return cluster, WRITERS[vendor](cluster, tmp / vendor)


@pytest.fixture(scope="module", params=sorted(WRITERS))
def planted(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    cluster, folder = _written(tmp_path_factory.mktemp("late"), request.param, LATE)
    return cluster, folder, tracekit.analyze(tracekit.load(folder))


def _waits(metrics: pl.DataFrame) -> dict[tuple[int, int], int]:
    return {(r, s): w for r, s, w in metrics.select("rank", "step", "sync_wait_ns").iter_rows()}


def _assert_waits(metrics: pl.DataFrame, cluster: Cluster) -> None:
    found = _waits(metrics)
    assert set(found) == set(cluster.truth.sync_wait_ns)
    off = {k: found[k] - v for k, v in cluster.truth.sync_wait_ns.items()}
    assert max(abs(d) for d in off.values()) <= TOLERANCE_NS, off


def test_clocks_are_aligned_to_the_planted_offsets(planted) -> None:
    cluster, _, analysis = planted
    offsets = dict(analysis.clocks.select("rank", "offset_ns").iter_rows())
    base = cluster.offsets_ns[0]
    for rank, planted_ns in cluster.offsets_ns.items():
        assert abs(offsets[rank] - (planted_ns - base)) <= TOLERANCE_NS
    checks = {c.name: c.status for c in analysis.checks}
    assert checks["ranks.clocks"] == "pass"
    assert checks["ranks.matching"] == "pass"


def test_sync_wait_per_rank_and_step_equals_the_truth(planted) -> None:
    cluster, _, analysis = planted
    _assert_waits(analysis.step_metrics, cluster)
    assert cluster.truth.sync_wait_ns[(0, 2)] == 500_000  # the truth is what we think
    assert cluster.truth.sync_wait_ns[(PERSISTENT, 2)] == 300_000


def test_the_straggler_of_every_step_and_the_persistent_one(planted) -> None:
    cluster, _, analysis = planted
    late = dict(
        tracekit.metrics.waits.stragglers(analysis.collectives).select("step", "rank").iter_rows()
    )
    truth = {s: r for s, r in cluster.truth.straggler.items() if r is not None}
    assert late == truth == {0: PERSISTENT, 1: PERSISTENT, 2: ONCE, 3: PERSISTENT}
    found = [f for f in analysis.findings if f.rule == "stragglers"]
    assert [f.pattern for f in found] == [f"rank {PERSISTENT}", f"rank {ONCE}"]
    persistent, once = found
    assert persistent.metrics["persistent"] is True and once.metrics["persistent"] is False
    assert cluster.truth.persistent == PERSISTENT
    assert persistent.steps == [0, 1, 3] and once.steps == [2]
    # impact: the waits each caused (3 waiting ranks × 200 µs × 3 steps; 500+500+300 µs),
    # each wait within the tolerance
    assert abs(persistent.impact_ns - 3 * 3 * 200_000) <= 9 * TOLERANCE_NS
    assert abs(once.impact_ns - 1_300_000) <= 3 * TOLERANCE_NS
    assert persistent.advice and persistent.severity in ("warning", "error")


def test_the_cluster_run_gives_the_same_numbers(planted) -> None:
    cluster, folder, analysis = planted
    merged = analyze_cluster(folder, workers=1)
    assert merged.ranks == list(range(WORLD))
    assert merged.step_metrics.equals(analysis.step_metrics)
    assert merged.collectives.equals(analysis.collectives)
    assert merged.clocks.equals(analysis.clocks)
    _assert_waits(merged.step_metrics, cluster)
    mine = [(f.pattern, f.steps, f.impact_ns) for f in merged.findings if f.rule == "stragglers"]
    theirs = [
        (f.pattern, f.steps, f.impact_ns) for f in analysis.findings if f.rule == "stragglers"
    ]
    assert mine == theirs


@pytest.mark.parametrize("vendor", sorted(WRITERS))
def test_no_late_rank_no_finding(tmp_path: Path, vendor: str) -> None:
    cluster, folder = _written(tmp_path, vendor, [])
    analysis = tracekit.analyze(tracekit.load(folder))
    assert not [f for f in analysis.findings if f.rule == "stragglers"]
    assert set(cluster.truth.sync_wait_ns.values()) == {0}
    _assert_waits(analysis.step_metrics, cluster)
