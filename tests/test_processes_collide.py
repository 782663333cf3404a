"""Two processes of one capture whose correlation ids collide: one rank per process, every
device row in its own process's step, idle time per device as the truth says.

The truth is computed here from the fixture's events alone (launch -> step range of the same
process -> window per device -> union of busy intervals), not by tracekit.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pytest

import tracekit
from fixtures.processes import LAUNCHER_PID, PIDS, SHIFT_NS, two_processes, write_kineto_folder
from fixtures.processes import write_nsys as write_nsys_capture
from tests.conftest import real_root, run_cli
from tracekit.parsers.processes import HOST_ONLY_RANK, scope_ranks
from tracekit.steps import assign
from tracekit.steps.placement import host_lead
from tracekit.timeline import Timeline, build_table, empty_meta

WORK = ("kernel", "comm", "memcpy", "memset")


@pytest.fixture(scope="module")
def capture():  # type: ignore[no-untyped-def]
    return two_processes()


@pytest.fixture(scope="module")
def nsys_path(capture, tmp_path_factory: pytest.TempPathFactory) -> Path:  # type: ignore[no-untyped-def]
    return write_nsys_capture(capture, tmp_path_factory.mktemp("nsys") / "two.sqlite")


@pytest.fixture(scope="module")
def kineto_folder(capture, tmp_path_factory: pytest.TempPathFactory) -> Path:  # type: ignore[no-untyped-def]
    return write_kineto_folder(capture, tmp_path_factory.mktemp("kineto") / "run")


def _truth_rows(events: pl.DataFrame) -> pl.DataFrame:
    """Per device row of the GPU processes: ``rank, device, ts, end, step`` (the step of the
    process's host range that holds its launch; ranges run to the next one's start)."""
    out = []
    for rank, pid in enumerate(PIDS):
        rows = events.filter(pl.col("pid") == pid)
        starts = rows.filter(pl.col("kind") == "range").sort("ts")["ts"].to_numpy()
        launch = rows.filter((pl.col("kind") == "api") & pl.col("corr").is_not_null())
        launch = launch.group_by("corr").agg(launch=pl.col("ts").min())
        dev = rows.filter(pl.col("kind").is_in(WORK) & (pl.col("device") >= 0))
        dev = dev.join(launch, on="corr", how="left")
        step = np.searchsorted(starts, dev["launch"].to_numpy(), side="right") - 1
        out.append(
            dev.select(
                pl.lit(rank, pl.Int32).alias("rank"), "device", "ts", "stream", "name",
                end=pl.col("ts") + pl.col("dur"), launch=pl.col("launch"),
                step=pl.Series(step, dtype=pl.Int64),
            )
        )  # fmt: skip
    return pl.concat(out)


def _union(intervals: list[tuple[int, int]]) -> int:
    total, reach = 0, None
    for start, end in sorted(intervals):
        if reach is None or start > reach:
            total += end - start
            reach = end
        elif end > reach:
            total += end - reach
            reach = end
    return total


def _truth_idle(rows: pl.DataFrame) -> dict[int, tuple[list[tuple[int, int]], int]]:
    """Per device: the step windows (first row of a step to the first row of the next; the
    last step to its last row's end) and idle time, window time minus busy time inside."""
    truth = {}
    for device in sorted(rows["device"].unique().to_list()):
        mine = rows.filter(pl.col("device") == device)
        steps = sorted(mine["step"].unique().to_list())
        firsts = [int(mine.filter(pl.col("step") == s)["ts"].min()) for s in steps]
        last = int(mine.filter(pl.col("step") == steps[-1])["end"].max())
        bounds = list(zip(firsts, [*firsts[1:], last]))
        idle = 0
        for start, end in bounds:
            cut = [(max(a, start), min(b, end)) for a, b in mine.select("ts", "end").iter_rows()]
            idle += (end - start) - _union([(a, b) for a, b in cut if b > a])
        truth[device] = (bounds, idle)
    return truth


def _check_analysis(timeline: tracekit.Timeline, events: pl.DataFrame) -> None:
    truth_rows = _truth_rows(events)
    analysis = tracekit.analyze(timeline)
    assert analysis.steps.ranges.group_by("rank").len().sort("rank").rows() == [(0, 4), (1, 4)]
    # every device row in its own process's step
    work = assign(timeline.df, analysis.steps)
    key = ["rank", "device", "ts", "stream"]
    got = work.select(*key, "step").sort(key)
    want = truth_rows.select(*key, "step").sort(key)
    assert got.height == want.height == 2 * 220  # 208 kernels, 8 copies, 4 fills each
    assert got["rank"].to_list() == want["rank"].to_list()
    assert got["step"].to_list() == want["step"].to_list()
    assert set(work["placed"].cast(pl.String)) == {"launch"}
    # idle per device: step-window time minus busy time
    metrics = analysis.step_metrics.group_by("device").agg(
        pl.col("idle_ns").sum(), pl.col("dur").sum(), pl.col("rank").unique()
    )
    truth = _truth_idle(truth_rows)
    for device, rank, idle, dur in metrics.select("device", "rank", "idle_ns", "dur").iter_rows():
        bounds, truth_idle = truth[device]
        assert rank == [device]  # rank 0 drives device 0, rank 1 device 1
        assert idle == truth_idle
        assert dur == sum(end - start for start, end in bounds)
    # host lead: launch to device start, over both processes' own launches
    lead = (truth_rows["ts"] - truth_rows["launch"]).median()
    assert host_lead(timeline.df, work) == int(lead)


def test_truth_agrees_with_the_scenarios(capture) -> None:  # type: ignore[no-untyped-def]
    """The truth computed here is the scenarios' own (second process shifted)."""
    truth = _truth_idle(_truth_rows(capture.events))
    first, second = capture.scenarios
    assert truth[0][0] == [tuple(w) for w in first.truth["step_windows"]]
    shifted = [(a + SHIFT_NS, b + SHIFT_NS) for a, b in second.truth["step_windows"]]
    assert truth[1][0] == shifted
    assert (truth[0][1], truth[1][1]) == (345_310, 513_871)
    ids = [set(capture.events.filter(pl.col("pid") == p)["corr"].drop_nulls()) for p in PIDS]
    assert len(ids[0] & ids[1]) == len(ids[0]) == 356  # every id of one is an id of the other


def test_nsys_two_processes_are_two_ranks(nsys_path: Path, capture) -> None:  # type: ignore[no-untyped-def]
    timeline = tracekit.load(nsys_path)
    assert timeline.meta["ranks"] == [0, 1]
    assert timeline.meta["rank_source"] == "process"
    assert timeline.meta["processes"] == [
        {"rank": 0, "pid": PIDS[0], "device": 0},
        {"rank": 1, "pid": PIDS[1], "device": 1},
    ]
    by_pid = dict(timeline.df.group_by("pid").agg(pl.col("rank").unique()).iter_rows())
    assert by_pid == {PIDS[0]: [0], PIDS[1]: [1], LAUNCHER_PID: [HOST_ONLY_RANK]}
    _check_analysis(timeline, capture.events)


def test_kineto_folder_of_unranked_processes(kineto_folder: Path, capture) -> None:  # type: ignore[no-untyped-def]
    timeline = tracekit.load(kineto_folder)
    assert timeline.meta["ranks"] == [0, 1]
    assert timeline.meta["rank_source"] == "process"
    said = "2 trace files record no rank; one rank per file, in name order"
    assert said in timeline.meta["warnings"]
    gpu = capture.events.filter(pl.col("pid").is_in(PIDS))
    _check_analysis(timeline, gpu)


def test_joined_without_the_process_the_truth_is_missed(
    nsys_path: Path, capture, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    """The check above can fail: with both processes on rank 0 the steps and idle are wrong."""
    monkeypatch.setattr(sys.modules["tracekit.load"], "scope_ranks", lambda timeline: timeline)
    timeline = tracekit.load(nsys_path)
    assert timeline.meta["ranks"] == [0]
    with pytest.raises(AssertionError):
        _check_analysis(timeline, capture.events)


def test_info_lists_both_ranks_and_their_source(nsys_path: Path) -> None:
    done = run_cli("info", str(nsys_path))
    assert done.returncode == 0, done.stderr
    assert any(
        line.split() == ["ranks", "0,", "1", "(one", "per", "process)"]
        for line in done.stdout.splitlines()
    )
    data = json.loads(run_cli("info", "--json", str(nsys_path)).stdout)
    assert (data["ranks"], data["rank_source"]) == ([0, 1], "process")


def _timeline(pids: list[int], devices: list[int], fmt: str) -> Timeline:
    n = len(pids)
    columns = {
        "ts": list(range(n)), "dur": [1] * n, "kind": ["kernel"] * n, "name": ["k"] * n,
        "device": devices, "rank": [0] * n, "pid": pids, "corr": [1] * n,
    }  # fmt: skip
    meta = empty_meta() | {"format": fmt}
    return Timeline(build_table(columns), meta)


def test_processes_are_numbered_by_device_then_pid() -> None:
    scoped = scope_ranks(_timeline([900, 12, 12, 77, 77], [0, 3, 1, 1, -1], "nsys-sqlite"))
    ranks = scoped.stored.column("rank").to_pylist()
    assert ranks == [0, 1, 1, 2, 2]  # 900 on device 0; 12 and 77 both on 1: lower pid first
    assert scoped.meta["ranks"] == [0, 1, 2]


@pytest.mark.parametrize(
    ("pids", "devices", "fmt", "source"),
    [
        ([5, 5], [0, 1], "nsys-sqlite", "none"),  # one process on two devices: one rank
        ([5, 6], [0, 1], "kineto", "none"),  # a Kineto GPU row's pid is its device
        ([5, 6], [0, -1], "nsys-sqlite", "none"),  # the second process runs no device work
    ],
)
def test_one_rank_stays_one_rank(
    pids: list[int], devices: list[int], fmt: str, source: str
) -> None:
    scoped = scope_ranks(_timeline(pids, devices, fmt))
    assert scoped.stored.column("rank").to_pylist() == [0, 0]
    assert scoped.meta["rank_source"] == source and scoped.meta["ranks"] == [0]


def test_ranks_the_parser_read_stand() -> None:
    timeline = _timeline([5, 6], [0, 1], "nsys-sqlite")
    timeline.meta["rank_source"] = "mpi"
    assert scope_ranks(timeline) is timeline
    assert timeline.stored.column("rank").equals(pa.chunked_array([[0, 0]], pa.int32()))


def test_merged_kineto_ranks_from_event_args() -> None:
    root = real_root()
    if root is None:
        pytest.skip("TRACEKIT_REAL_TRACES not set")
    path = root / "amd/kineto_mi300_ddp4rank_rccl_FUSED/merged_all_events.json.gz"
    timeline = tracekit.load(path)
    assert timeline.meta["ranks"] == [0, 1, 2, 3]
    assert timeline.meta["rank_source"] == "event args"
    kernels = timeline.df.filter(pl.col("kind") == "kernel").group_by("rank").len().sort("rank")
    assert kernels["rank"].to_list() == [0, 1, 2, 3]


def test_a_helper_process_joins_the_rank_of_its_device() -> None:
    """A process with a sliver of device time beside a busy one on the same GPU (an
    autotuning subprocess, a launcher's one memset) is no rank of its own: it is counted with
    the busy process of its device, and a warning names it."""
    pids = [55] + [900] * 40 + [12] * 40  # 55: one kernel on device 0, beside 900's forty
    devices = [0] + [0] * 40 + [1] * 40
    scoped = scope_ranks(_timeline(pids, devices, "nsys-sqlite"))
    ranks = scoped.stored.column("rank").to_pylist()
    assert ranks == [0] + [0] * 40 + [1] * 40
    assert scoped.meta["ranks"] == [0, 1]
    assert [p["pid"] for p in scoped.meta["processes"]] == [900, 12]
    assert any("pid 55 (with 900)" in w for w in scoped.meta["warnings"])
