"""The multi-rank cluster fixture (``fixtures.cluster_scenario``, ``fixtures.cluster_writers``):
its ground truth in numbers, the planted shifts row by row, and round trips through tracekit
(Kineto rank files, torch_npu ``rank{r}_ascend_pt`` folders) that keep every rank's clock
offset to the ns and the collectives' true ends equal across ranks."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import polars as pl
import pytest

import tracekit
from fixtures.ascend_names import OPS
from fixtures.ascend_text_writer import EPOCH_NS
from fixtures.cluster_scenario import Cluster, Late, build_cluster, default_offsets
from fixtures.cluster_writers import write_kineto_cluster, write_torch_npu_cluster
from fixtures.kineto_writer import DEFAULT_BASE_TIME_NS, PROFILE_MARGIN_NS
from fixtures.scenario import KERNELS
from tracekit.timeline import is_part

WORLD, STEPS, LAYERS = 4, 4, 2
OFFSETS = (0, 1_700_000, -2_300_000, 412_345)
ONE_LATE = (Late(rank=2, step=1, delay_ns=300_000),)
PERSISTENT = tuple(Late(rank=3, step=s, delay_ns=200_000) for s in range(STEPS))
VENDORS = ("nvidia", "ascend")


@cache
def cluster(vendor: str, late: tuple[Late, ...] = ONE_LATE) -> Cluster:
    return build_cluster(
        WORLD, vendor=vendor, steps=STEPS, layers=LAYERS, offsets_ns=OFFSETS, late=late
    )


def waits(values: dict[int, dict[int, int]]) -> dict[tuple[int, int], int]:
    """Every (rank, step) of the cluster, ``values[step][rank]`` where given, else 0."""
    return {(r, s): values.get(s, {}).get(r, 0) for r in range(WORLD) for s in range(STEPS)}


@pytest.mark.parametrize("vendor", VENDORS)
def test_one_late_arrival(vendor: str) -> None:
    truth = cluster(vendor).truth
    assert truth.sync_wait_ns == waits({1: {0: 300_000, 1: 300_000, 3: 300_000}})
    assert truth.straggler == {0: None, 1: 2, 2: None, 3: None}
    assert truth.caused_ns == {0: 0, 1: 900_000, 2: 0, 3: 0}
    assert truth.persistent is None
    assert cluster(vendor).offsets_ns == dict(enumerate(OFFSETS))
    # per layer an all-reduce, dispatch and combine; on Ascend layer 1's dispatch and combine
    # are MC² operators: a kernel and an AI CPU comm row each (see test_torch_npu_round_trip)
    per_step = {"nvidia": 3 * LAYERS, "ascend": 8}[vendor]
    assert set(truth.comm_rows.values()) == {per_step}
    # layer 1's all-reduce comes after layer 0's all-reduce, dispatch and combine
    assert truth.delayed == {s: per_step * s + 3 for s in range(STEPS)}


@pytest.mark.parametrize("vendor", VENDORS)
def test_persistent_straggler(vendor: str) -> None:
    truth = cluster(vendor, PERSISTENT).truth
    assert truth.sync_wait_ns == waits({s: {0: 200_000, 1: 200_000, 2: 200_000} for s in range(4)})
    assert truth.straggler == dict.fromkeys(range(STEPS), 3)
    assert truth.caused_ns == dict.fromkeys(range(STEPS), 600_000)
    assert truth.persistent == 3


def test_several_late_ranks_in_one_step() -> None:
    late = (Late(1, 2, 100_000), Late(2, 2, 250_000), Late(0, 0, 50_000))
    truth = cluster("nvidia", late).truth
    assert truth.sync_wait_ns == waits(
        {0: {1: 50_000, 2: 50_000, 3: 50_000}, 2: {0: 250_000, 1: 150_000, 3: 250_000}}
    )
    assert truth.straggler == {0: 0, 1: None, 2: 2, 3: None}
    assert truth.caused_ns == {0: 150_000, 1: 0, 2: 650_000, 3: 0}
    assert truth.persistent is None  # two of four steps is not more than half
    coll = truth.collectives.filter(pl.col("instance") == truth.delayed[2])
    assert coll["end_ns"].n_unique() == 1
    starts = dict(coll.select("rank", "start_ns").iter_rows())
    assert starts[1] - starts[0] == 100_000 and starts[2] - starts[0] == 250_000


def _true(c: Cluster, rank: int) -> pl.DataFrame:
    return c.events[rank].with_columns(pl.col("ts") - c.offsets_ns[rank])


@pytest.mark.parametrize("vendor", VENDORS)
def test_rows_shift_as_planted(vendor: str) -> None:
    planted, clean = cluster(vendor), cluster(vendor, ())
    d = 300_000
    for rank in range(WORLD):
        now, was = _true(planted, rank), _true(clean, rank)
        assert now.height == was.height and now.drop("ts", "dur").equals(was.drop("ts", "dur"))
        assert set((now["ts"] - was["ts"]).unique()) <= {0, d}
        assert set((now["dur"] - was["dur"]).unique()) <= {0, d}
        ranges = now.filter(pl.col("kind").is_in(["range", "op"]) & (pl.col("device") < 0))
        before = was.filter(pl.col("kind").is_in(["range", "op"]) & (pl.col("device") < 0))
        steps = ranges.filter(pl.col("name").str.contains(r"^(decode_step_|ProfilerStep#)"))
        grew = (
            steps["dur"] - before.filter(pl.col("name").is_in(steps["name"].to_list()))["dur"]
        ).to_list()
        assert grew == [0, d, 0, 0]  # the step's host range spans the delay on every rank
    coll = planted.truth.collectives
    target = coll.filter(pl.col("instance") == planted.truth.delayed[1]).sort("rank")
    base = clean.truth.collectives.filter(pl.col("instance") == planted.truth.delayed[1])
    start, end = int(base["start_ns"][0]), int(base["end_ns"][0])
    assert target["start_ns"].to_list() == [start, start, start + d, start]
    assert target["end_ns"].to_list() == [end + d] * WORLD
    # the late rank's o_proj (the kernel before it on the stream) ran D longer
    late = _true(planted, 2)
    kernels = late.filter(pl.col("kind") == "kernel", pl.col("stream") == 7)
    prior = kernels.filter((pl.col("ts") + pl.col("dur")) <= start + d).tail(1)
    o_proj = OPS["o_proj"].name if vendor == "ascend" else KERNELS["o_proj"].name
    assert prior["name"].to_list() == [o_proj]
    grown = late.join(_true(clean, 2), on=["name", "corr", "kind"], suffix="_was")
    assert grown.filter(pl.col("name") == o_proj, pl.col("dur") != pl.col("dur_was")).height == 1
    # every other instance starts and ends at one moment on every rank
    others = coll.filter(pl.col("instance") != planted.truth.delayed[1])
    spread = others.group_by("instance").agg(pl.col("start_ns", "end_ns").n_unique())
    assert spread["start_ns"].max() == 1 and spread["end_ns"].max() == 1


def test_notify_wait_absorbs_the_wait() -> None:
    c, d = cluster("ascend"), 300_000
    name = c.truth.collectives.filter(pl.col("instance") == c.truth.delayed[1])["name"][0]
    for rank, grows in ((0, d), (2, 0)):
        tasks = _true(c, rank).filter(pl.col("args").str.contains(f'"op":"{name}"', literal=True))
        op = _true(c, rank).filter(pl.col("name") == name)
        ends = (tasks["ts"] + tasks["dur"]).to_list()
        assert tasks["name"].to_list() == [
            "Notify_Record",
            "Notify_Wait",
            "Memcpy",
            "Reduce_Inline",
        ]
        assert tasks["ts"].to_list()[1:] == ends[:-1]  # the tasks tile the operator
        assert (tasks["ts"][0], ends[-1]) == (op["ts"][0], op["ts"][0] + op["dur"][0])
        base = cluster("ascend", ()).events[rank]
        was = base.filter(pl.col("args").str.contains(f'"op":"{name}"', literal=True))
        assert (tasks["dur"] - was["dur"]).to_list() == [0, grows, 0, 0]


def _loaded_comm(analysis: tracekit.Analysis) -> pl.DataFrame:
    return analysis.work.filter(pl.col("is_comm") & ~is_part()).with_columns(
        pl.col("name").cast(pl.String)
    )


def _check_round_trip(c: Cluster, folder: Path, base_ns: int) -> pl.DataFrame:
    """Everything both vendors share; returns the loaded collective rows in true time."""
    timeline = tracekit.load(folder)
    assert timeline.meta["ranks"] == list(range(WORLD))
    analysis = tracekit.analyze(timeline)
    metrics = analysis.step_metrics
    for rank in range(WORLD):
        mine = metrics.filter(pl.col("rank") == rank)
        assert mine["step"].to_list() == list(range(STEPS))
        assert mine["device"].unique().to_list() == [rank]
    origin = timeline.meta["origin_ns"]
    comm = _loaded_comm(analysis).with_columns(
        start=pl.col("ts") + origin - base_ns - pl.col("rank").replace_strict(c.offsets_ns)
    )
    counts = comm.group_by("rank", "step").len()
    assert {(r, s): n for r, s, n in counts.iter_rows()} == c.truth.comm_rows
    comm = comm.sort("rank", "start", "dur", "name").with_columns(
        instance=pl.int_range(pl.len()).over("rank"), end=pl.col("start") + pl.col("dur")
    )
    truth = c.truth.collectives
    for rank in range(WORLD):
        got = comm.filter(pl.col("rank") == rank).select("start", "end").rows()
        want = truth.filter(pl.col("rank") == rank).select("start_ns", "end_ns").rows()
        assert sorted(got) == sorted(want)
    ends = comm.group_by("instance").agg(pl.col("end").n_unique())
    assert ends["end"].max() == 1  # true ends agree on every rank once offsets are removed
    wait = pl.min_horizontal(pl.col("start").max().over("instance") - pl.col("start"), "dur")
    sums = comm.with_columns(wait=wait).group_by("rank", "step").agg(pl.col("wait").sum())
    assert {(r, s): w for r, s, w in sums.iter_rows()} == c.truth.sync_wait_ns
    return comm


@pytest.mark.parametrize("late", [ONE_LATE, PERSISTENT], ids=["one", "persistent"])
def test_kineto_round_trip(tmp_path: Path, late: tuple[Late, ...]) -> None:
    c = cluster("nvidia", late)
    folder = write_kineto_cluster(c, tmp_path / "run")
    assert sorted(p.name for p in folder.iterdir()) == [f"rank{r}.json" for r in range(WORLD)]
    head = json.loads((folder / "rank3.json").read_text())
    assert head["distributedInfo"]["rank"] == 3 and head["distributedInfo"]["world_size"] == 4
    comm = _check_round_trip(c, folder, DEFAULT_BASE_TIME_NS)
    nccl = comm.filter(pl.col("name").str.starts_with("ncclDevKernel_AllReduce"))
    assert nccl.height == WORLD * STEPS * LAYERS and not nccl["is_fused_comm"].any()
    args = [json.loads(a) for a in nccl["args"]]
    assert {
        (a["collective"], a["pg_name"], a["in_nelems"], a["dtype"], a["group_size"]) for a in args
    } == {("allreduce", "0", 64 * 7168, "BFloat16", WORLD)}
    deep_ep = comm.filter(pl.col("name").str.contains("deep_ep::internode_ll::"))
    assert deep_ep.height == 2 * WORLD * STEPS * LAYERS and deep_ep["is_fused_comm"].all()
    for rank in range(WORLD):  # one file alone: absolute times are the written ones, to the ns
        alone = tracekit.load(folder / f"rank{rank}.json")
        df, origin = alone.df, alone.meta["origin_ns"]
        written = c.events[rank]
        first = DEFAULT_BASE_TIME_NS + written["ts"].min() - PROFILE_MARGIN_NS
        assert df["ts"].min() + origin == first  # the profiler window opens 100 µs early
        host = (pl.col("name").cast(pl.String) == "decode_step_1") & (pl.col("device") < 0)
        step = df.filter(host)
        want = written.filter(pl.col("name") == "decode_step_1")
        assert (step["ts"][0] + origin, step["dur"][0]) == (
            DEFAULT_BASE_TIME_NS + want["ts"][0],
            want["dur"][0],
        )


@pytest.mark.parametrize("late", [ONE_LATE, PERSISTENT], ids=["one", "persistent"])
def test_torch_npu_round_trip(tmp_path: Path, late: tuple[Late, ...]) -> None:
    c = cluster("ascend", late)
    folder = write_torch_npu_cluster(c, tmp_path / "run")
    assert sorted(p.name for p in folder.iterdir()) == [f"rank{r}_ascend_pt" for r in range(WORLD)]
    comm = _check_round_trip(c, folder, EPOCH_NS)
    step0 = comm.filter(pl.col("rank") == 0, pl.col("step") == 0)
    kinds = step0.group_by(pl.col("name").str.replace(r"__\d+_\d+_\d+$", "")).agg(
        pl.len(), pl.col("is_fused_comm").all()
    )
    assert sorted(kinds.rows()) == sorted(
        [
            (OPS["combine"].name, 1, True),  # MC² kernels: fused communication
            (OPS["dispatch"].name, 1, True),
            ("MoeDistributeCombineV2Aicpu", 1, False),  # ... and their AI CPU comm rows
            ("MoeDistributeDispatchV2Aicpu", 1, False),
            ("hcom_allReduce", 2, False),
            ("hcom_alltoAllV", 2, False),
        ]
    )
    for rank in range(WORLD):
        alone = tracekit.load(folder / f"rank{rank}_ascend_pt")
        first = alone.df["ts"].min() + alone.meta["origin_ns"]
        assert first == EPOCH_NS + c.events[rank]["ts"].min()


def test_default_offsets_and_bad_input() -> None:
    assert default_offsets(4) == [0, 287_557, -146_920, 1_349_213]
    assert default_offsets(64)[:4] == default_offsets(4)
    assert build_cluster(2, steps=1, layers=2).offsets_ns == {0: 0, 1: 287_557}
    for late in ([Late(4, 0, 1)], [Late(0, 4, 1)], [Late(0, 0, 0)], [Late(1, 1, 5)] * 2):
        with pytest.raises(ValueError):
            build_cluster(WORLD, late=late)
    with pytest.raises(ValueError):
        build_cluster(WORLD, offsets_ns=[0, 1])
    with pytest.raises(ValueError):
        build_cluster(WORLD, vendor="amd")
    with pytest.raises(ValueError):
        write_torch_npu_cluster(cluster("nvidia"), Path("unused"))
