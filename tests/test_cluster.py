"""`tracekit cluster`: the same result in this process, on local worker processes and on a
dask LocalCluster; the real multi-rank samples analysed as clusters; errors in one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from fixtures.cluster_scenario import Late, build_cluster
from fixtures.cluster_writers import write_kineto_cluster, write_torch_npu_cluster
from tracekit.cluster import analyze_cluster
from tracekit.cluster.inputs import rank_inputs
from tracekit.errors import TraceError

REAL = os.environ.get("TRACEKIT_REAL_TRACES")
needs_real = pytest.mark.skipif(not REAL, reason="TRACEKIT_REAL_TRACES not set")


@pytest.fixture(scope="module")
def kineto_ranks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """4 Kineto rank files, rank 2 late by 150 µs in every step."""
    cluster = build_cluster(4, steps=3, late=[Late(2, s, 150_000) for s in range(3)])
    return write_kineto_cluster(cluster, tmp_path_factory.mktemp("ranks") / "run")


def _dicts(path: Path, **how: object) -> dict:
    return analyze_cluster(path, **how).to_dict()  # type: ignore[arg-type]


def test_inputs_are_the_rank_files(kineto_ranks: Path, tmp_path: Path) -> None:
    assert [p.name for p in rank_inputs(kineto_ranks)] == [f"rank{r}.json" for r in range(4)]
    cluster = build_cluster(2, vendor="ascend", steps=2)
    folder = write_torch_npu_cluster(cluster, tmp_path / "npu")
    assert [p.name for p in rank_inputs(folder)] == ["rank0_ascend_pt", "rank1_ascend_pt"]
    one = kineto_ranks / "rank0.json"
    assert rank_inputs(one) == [one]


def test_local_processes_equal_one_process(kineto_ranks: Path) -> None:
    here = _dicts(kineto_ranks, workers=1)
    assert _dicts(kineto_ranks, workers=2) == here
    late = [f for f in here["findings"] if f["rule"] == "stragglers"]
    assert [(f["pattern"], f["metrics"]["persistent"]) for f in late] == [("rank 2", True)]
    assert [s["rank"] for s in here["stragglers"]] == [2, 2, 2]


def test_a_dask_local_cluster_equals_the_local_run(kineto_ranks: Path) -> None:
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    ) as cluster:
        cluster.wait_for_workers(2)
        workers = len(cluster.workers)
        on_dask = _dicts(kineto_ranks, scheduler=cluster.scheduler_address)
    assert workers == 2
    assert on_dask == _dicts(kineto_ranks, workers=1)


def test_only_compact_results_travel(kineto_ranks: Path) -> None:
    from tracekit.cluster import Settings, analyse_part

    part = analyse_part(kineto_ranks / "rank1.json", Settings())
    assert part.ranks == [1] and part.events > 400
    assert part.launches.height < part.events / 10
    counts = part.drill.group_by("rank", "device", "step").len()["len"]
    assert counts.max() <= 2_000 and part.drill["step"].n_unique() <= 2
    assert "stragglers" not in {f.rule for f in part.findings}  # it runs on the merge


def test_a_scheduler_that_cannot_be_reached_is_one_line(kineto_ranks: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tracekit", "cluster", str(kineto_ranks)],
        capture_output=True,
        text=True,
        env={**os.environ, "TRACEKIT_SCHEDULER": "tcp://127.0.0.1:9"},
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "cannot connect" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_scheduler_without_workers_fails_instead_of_hanging(
    kineto_ranks: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    distributed = pytest.importorskip("distributed")
    from tracekit.cluster import run

    monkeypatch.setattr(run, "NO_WORKER_TIMEOUT_S", 1)
    with (
        distributed.LocalCluster(n_workers=0, dashboard_address=None) as cluster,
        pytest.raises(TraceError, match="no worker"),
    ):
        analyze_cluster(kineto_ranks, scheduler=cluster.scheduler_address)


def test_a_worker_that_dies_is_reported_in_one_line(kineto_ranks: Path) -> None:
    distributed = pytest.importorskip("distributed")
    from tracekit.cluster.part import Settings
    from tracekit.cluster.run import on_dask

    def die(path: str, settings: Settings) -> None:  # pickled by value to the worker
        import os

        os._exit(3)

    with (
        distributed.LocalCluster(
            n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        pytest.raises(TraceError) as failed,
    ):
        on_dask([str(kineto_ranks / "rank0.json")], Settings(), cluster.scheduler_address, die)
    message = str(failed.value)
    assert "\n" not in message and "KilledWorker" in message


def test_cli_forms(kineto_ranks: Path, tmp_path: Path) -> None:
    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "tracekit", "cluster", str(kineto_ranks), "-w", "1", *args],
            capture_output=True,
            text=True,
            timeout=120,
        )

    data = json.loads(cli("-f", "json").stdout)
    assert data["ranks"] == [0, 1, 2, 3]
    assert {row["step"] for row in data["step_metrics"]} == {0, 1, 2}
    markdown = cli("-f", "md").stdout
    assert "### Per rank" in markdown and "rank 2 is a persistent straggler" in markdown
    page = tmp_path / "cluster.html"
    done = cli("-f", "html", "-o", str(page))
    assert done.returncode == 0 and page.stat().st_size > 1_000_000
    bad = cli("-f", "pdf")
    assert bad.returncode == 2 and "choose term, md, json or html" in bad.stderr


def _nccl_trace(rank: int, seqs: list[int], late_us: int) -> dict:
    """A two-step Kineto trace of one rank: all-reduces with PyTorch's ``Seq``; seq 2 ends at
    the same moment on both ranks, one rank arriving ``late_us`` after the other."""
    events: list[dict] = [
        {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{s}", "pid": 1, "tid": 1,
         "ts": 1_000_000 + s * 10_000, "dur": 9_000}
        for s in range(2)
    ]  # fmt: skip
    for seq in seqs:
        start = 1_000_100 + (seq - 1) * 3_000
        end = start + 1_000 + (500 if seq == 2 else 0)
        args = {
            "device": 0, "stream": 7, "correlation": 100 + seq, "Collective name": "allreduce",
            "In msg nelems": 1024, "Out msg nelems": 1024, "Group size": 2, "dtype": "Float",
            "Process Group Name": "0", "Process Group Ranks": "[0, 1]", "Seq": seq,
        }  # fmt: skip
        start += late_us if seq == 2 else 0
        events.append(
            {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
             "pid": 0, "tid": 7, "ts": start, "dur": end - start, "args": args}
        )  # fmt: skip
    info = {"backend": "nccl", "rank": rank, "world_size": 2}
    return {"schemaVersion": 1, "distributedInfo": info, "traceEvents": events}


def test_seq_numbers_match_across_a_missing_launch(tmp_path: Path) -> None:
    """Rank 1's trace lacks seq 1: by order its first launch would pair with rank 0's seq 1;
    by ``Seq`` it pairs with seq 2, where rank 0 waited 500 µs for it."""
    (tmp_path / "rank0.json").write_text(json.dumps(_nccl_trace(0, [1, 2, 3], 0)))
    (tmp_path / "rank1.json").write_text(json.dumps(_nccl_trace(1, [2, 3], 500)))
    cluster = analyze_cluster(tmp_path, workers=1)
    table = cluster.collectives.sort("instance", "rank")
    assert table["instance"].to_list() == ["seq 1", "seq 2", "seq 2", "seq 3", "seq 3"]
    assert table["matched"].to_list() == [False, True, True, True, True]
    assert table["wait_ns"].to_list() == [None, 500_000, 0, 0, 0]
    matching = next(c for c in cluster.checks if c.name == "ranks.matching")
    assert matching.status == "warn" and "1 launches were seen on one rank only" in matching.detail


REAL_CLUSTERS = {
    # path: (ranks, persistent straggler or None, whether waits were measured)
    "amd/kineto_mi300_ddp4rank_rccl_FUSED/merged_all_events.json.gz": ([0, 1, 2, 3], 3, True),
    "ascend/msinsight_torchnpu_910B_2rank/text/level1": ([0, 1], None, True),
    "ascend/msinsight_torchnpu_910B_2rank/db/level1": ([0, 1], None, True),
    "nvidia/hta-sampled-world128-multistream": ([0, 1], None, False),
}


@needs_real
@pytest.mark.parametrize("path", sorted(REAL_CLUSTERS))
def test_real_multi_rank_samples_analyse_as_clusters(path: str) -> None:
    ranks, persistent, measured = REAL_CLUSTERS[path]
    cluster = analyze_cluster(Path(REAL) / path, workers=1)  # type: ignore[arg-type]
    assert cluster.ranks == ranks
    waits = cluster.step_metrics["sync_wait_ns"]
    late = [f for f in cluster.findings if f.rule == "stragglers"]
    checks = {c.name: c for c in cluster.checks}
    if measured:  # every all-reduce pairs up; small broadcasts' ends legitimately differ
        reduces = cluster.collectives.filter(pl.col("kind") == "all_reduce")
        assert reduces.height and reduces["matched"].all() and waits.sum() > 0
    else:  # 2 of 128 ranks, SendRecv ends 10 ms apart: nothing matched, and it says so
        assert not cluster.collectives["matched"].any() and waits.sum() == 0
        assert checks["ranks.matching"].status == "warn" and not late
        assert "128 ranks, 2 in the trace" in checks["ranks.matching"].detail
    found = [f for f in late if f.metrics["persistent"]]
    assert [f.metrics["rank"] for f in found] == ([persistent] if persistent is not None else [])


@needs_real
def test_the_mi300_straggler_numbers() -> None:
    """Rank 3 of the MI300 DDP run arrives last at every all-reduce and broadcast: the other
    three ranks wait for it; it waits for nobody."""
    path = Path(REAL) / "amd/kineto_mi300_ddp4rank_rccl_FUSED/merged_all_events.json.gz"  # type: ignore[arg-type]
    cluster = analyze_cluster(path, workers=1)
    per_rank = cluster.step_metrics.group_by("rank").agg(pl.col("sync_wait_ns").sum()).sort("rank")
    waits = dict(per_rank.iter_rows())
    assert waits[3] == 0 and min(waits[r] for r in (0, 1, 2)) > 30_000_000
    assert cluster.stragglers["rank"].to_list() == [3, 3, 3]
    assert cluster.collectives.height == 84


def _kineto(tmp: Path, name: str, late: list[Late], steps: int = 3) -> tuple[Path, object]:
    cluster = build_cluster(4, steps=steps, late=late)
    return write_kineto_cluster(cluster, tmp / name), cluster


def test_a_launch_missing_on_one_rank_is_not_mispaired(tmp_path: Path) -> None:
    """Rank 1 lacks the first all-reduce of step 1: by order its second would pair with the
    others' first. Those instances' ends disagree, so they are not counted, and it says so."""
    folder, _ = _kineto(tmp_path, "miss", [Late(2, s, 150_000) for s in range(3)])
    path = folder / "rank1.json"
    trace = json.loads(path.read_text())
    events = trace["traceEvents"]
    steps = sorted(
        (e["ts"], e["ts"] + e["dur"]) for e in events if e.get("name") == "decode_step_1"
    )
    start, end = steps[0]
    first = min(
        (e for e in events if "AllReduce" in e.get("name", "") and start <= e["ts"] <= end),
        key=lambda e: e["ts"],
    )
    trace["traceEvents"] = [e for e in events if e is not first]
    path.write_text(json.dumps(trace))
    cluster = analyze_cluster(folder, workers=1)
    step1 = cluster.collectives.filter((pl.col("step") == 1) & (pl.col("kind") == "all_reduce"))
    assert not step1.filter(pl.col("rank") == 1)["matched"].any()
    matching = next(c for c in cluster.checks if c.name == "ranks.matching")
    assert matching.status == "warn" and "fewer ranks than the rest" in matching.detail
    assert cluster.stragglers["rank"].to_list() == [2, 2, 2]  # still the right rank


def test_steps_numbered_differently_give_no_made_up_waits(tmp_path: Path) -> None:
    """Rank 1's profile starts one step later and its steps have no numbered labels: the
    ranks' step i are different steps. Nothing lines up, so nothing is measured."""
    cluster = build_cluster(4, steps=4)
    events = cluster.events[1]
    first = events.filter(pl.col("name") == "decode_step_1")["ts"].min()
    cluster.events[1] = events.filter(pl.col("ts") >= first)
    folder = write_kineto_cluster(cluster, tmp_path / "shift")
    result = analyze_cluster(folder, workers=1)
    assert result.step_metrics["sync_wait_ns"].sum() == 0
    assert not [f for f in result.findings if f.rule == "stragglers"]
    matching = next(c for c in result.checks if c.name == "ranks.matching")
    assert "do not line up across ranks" in matching.detail


def test_ranks_late_together_blame_the_lowest(tmp_path: Path) -> None:
    late = [Late(r, s, 150_000) for s in range(3) for r in (1, 2)]
    folder, cluster = _kineto(tmp_path, "tie", late)
    result = analyze_cluster(folder, workers=1)
    truth = {s: r for s, r in cluster.truth.straggler.items()}  # type: ignore[attr-defined]
    assert dict(result.stragglers.select("step", "rank").iter_rows()) == truth == {0: 1, 1: 1, 2: 1}


def test_file_names_give_ranks_when_the_traces_do_not(tmp_path: Path) -> None:
    """Per-rank files without distributedInfo take their rank from their names, as reading the
    folder at once does (rank10 is rank 10, not the third file)."""
    folder, _ = _kineto(tmp_path, "names", [Late(3, s, 150_000) for s in range(3)])
    for rank, name in ((0, "rank0"), (1, "rank1"), (2, "rank2"), (3, "rank10")):
        trace = json.loads((folder / f"rank{rank}.json").read_text())
        trace.pop("distributedInfo")
        (folder / f"rank{rank}.json").unlink()
        (folder / f"{name}.json").write_text(json.dumps(trace))
    result = analyze_cluster(folder, workers=1)
    assert result.ranks == [0, 1, 2, 10]
    assert not [c for c in result.checks if c.name == "ranks.numbering"]
    late = [f for f in result.findings if f.rule == "stragglers"]
    assert [(f.metrics["rank"], f.metrics["persistent"]) for f in late] == [(10, True)]
