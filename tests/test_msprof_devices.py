"""The NPU device index of every Ascend device row, from what each export records.

References are read here without the parser: the memory CSVs' ``NPU:<n>`` with the csv module,
``RANK_DEVICE_MAP`` with sqlite3, the ``device_<n>`` folder names; the fixtures' devices are
the knobs they were written with.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import polars as pl
import pytest

import tracekit
from fixtures.ascend_db_writer import write_torch_npu_db
from fixtures.ascend_scenario import build_ascend_scenario
from fixtures.ascend_text_writer import write_torch_npu
from fixtures.msprof_prof_writer import write_prof
from tests.conftest import real_file, sql_rows
from tracekit.parsers.msprof.device_index import memory_device, packed_device, process_devices
from tracekit.timeline import DEVICE_KINDS, Timeline

TORCH = "msinsight_torchnpu_910B_2rank"
LEVELS = ("level0", "level1", "level2")


def _device_rows(timeline: Timeline) -> pl.DataFrame:
    df = timeline.df.with_columns(pl.col(pl.Categorical).cast(pl.String))
    return df.filter(pl.col("kind").is_in(DEVICE_KINDS))


def _devices_by_rank(timeline: Timeline) -> dict[int, list[int | None]]:
    rows = _device_rows(timeline)
    found = rows.group_by("rank").agg(pl.col("device").unique().sort(nulls_last=True))
    return {rank: devices for rank, devices in found.sort("rank").iter_rows()}


def _npu_of_memory_csv(path: Path) -> int:
    """The device the torch_npu memory_record.csv names (``NPU:<n>``), read with csv."""
    with path.open(newline="") as fh:
        values = {row["Device Type"] for row in csv.DictReader(fh)}
    assert len(values) == 1, values
    return int(values.pop().split(":")[1])


# -- the 2-rank 910B sample: rank 1 ran on device 1 -----------------------------------------------


@pytest.mark.parametrize("level", LEVELS)
def test_910b_text_ranks_on_their_devices(level: str) -> None:
    folder = real_file("ascend", f"{TORCH}/text/{level}")
    timeline = tracekit.load(folder)
    want = {
        rank: _npu_of_memory_csv(
            folder / f"rank{rank}_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "memory_record.csv"
        )
        for rank in (0, 1)
    }
    assert want == {0: 0, 1: 1}
    # every device row, the HCCL operators and plane tasks included, carries its device
    assert _devices_by_rank(timeline) == {0: [0], 1: [1]}
    assert [d["index"] for d in timeline.meta["devices"]] == [0, 1]
    assert {d["name"] for d in timeline.meta["devices"]} == {None}  # no chip in the text export


def test_910b_text_device_is_in_the_pids_not_the_labels() -> None:
    """Rank 1's trace_view.json labels its NPU processes "NPU"; the device is in the pid bits."""
    out = real_file("ascend", f"{TORCH}/text/level1/rank1_ascend_pt/ASCEND_PROFILER_OUTPUT")
    events = json.loads((out / "trace_view.json").read_text())
    meta: dict[int, dict[str, object]] = {}
    for e in events:
        if e.get("ph") == "M" and e["name"] in (
            "process_name",
            "process_labels",
            "process_sort_index",
        ):
            meta.setdefault(e["pid"], {})[e["name"]] = next(iter(e["args"].values()))
    hardware = next(p for p, m in meta.items() if m.get("process_name") == "Ascend Hardware")
    assert hardware == 3170822561 == (3096506 << 10) | (13 << 5) | 1
    assert meta[hardware]["process_labels"] == "NPU" and meta[hardware]["process_sort_index"] == 13
    timeline = tracekit.load(out.parent)
    assert set(_device_rows(timeline)["device"]) == {1}


@pytest.mark.parametrize("level", LEVELS)
def test_910b_db_ranks_on_their_devices(level: str) -> None:
    folder = real_file("ascend", f"{TORCH}/db/{level}")
    for rank in (0, 1):
        db = (
            folder
            / f"rank{rank}_ascend_pt/ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_{rank}.db"
        )
        assert sql_rows(db, "SELECT rankId, deviceId FROM RANK_DEVICE_MAP") == [(rank, rank)]
    timeline = tracekit.load(folder)
    # COMMUNICATION_OP has no deviceId: the operators take their tasks' device
    assert _devices_by_rank(timeline) == {0: [0], 1: [1]}


@pytest.mark.parametrize("rank", [0, 1])
def test_insight_text_output_without_timeline_reads_memory_csv(rank: int) -> None:
    root = real_file("ascend", f"msinsight_server_testdata/test_rank_{rank}")
    want = _npu_of_memory_csv(root / "ASCEND_PROFILER_OUTPUT" / "memory_record.csv")
    assert want == rank
    assert set(_device_rows(tracekit.load(root))["device"]) == {want}


def test_prof_folder_device_and_lone_kernel_details() -> None:
    prof = real_file(
        "ascend", "mindinsight_msprof_PROF_2dev/PROF_000001_20230818142704322_COJGGGCANRMICFBC"
    )
    assert [p.name for p in prof.glob("device_*")] == ["device_0"]
    assert set(_device_rows(tracekit.load(prof))["device"]) == {0}
    # a kernel_details.csv alone records no device: left null, not guessed
    alone = real_file(
        "ascend",
        "msprof_analyze_advisor_testdata/test/ut/advisor/advisor_backend/compute_advice/kernel_details.csv",
    )
    timeline = tracekit.load(alone)
    assert _device_rows(timeline)["device"].null_count() == _device_rows(timeline).height == 591
    assert any("records no device index" in w for w in timeline.meta["warnings"])


# -- fixtures: two ranks on devices 0 and 1, one per export kind ----------------------------------


def _two_ranks(folder: Path, write: object) -> Timeline:
    for rank in (0, 1):
        events = build_ascend_scenario(
            steps=2, layers=2, unfused_collective=True, rank=rank, device=rank, seed=rank
        ).events
        write(events, folder / f"rank{rank}")  # type: ignore[operator]
    return tracekit.load(folder)


WRITERS = {
    "torch_npu text Level1": lambda ev, out: write_torch_npu(ev, out),
    "torch_npu text, labels without the device": lambda ev, out: write_torch_npu(
        ev, out, label_device=False
    ),
    "torch_npu text Level0": lambda ev, out: write_torch_npu(ev, out, level="Level0"),
    "torch_npu db": lambda ev, out: write_torch_npu_db(ev, out),
    "torch_npu db Level0": lambda ev, out: write_torch_npu_db(ev, out, level="Level0"),
    "msprof PROF_": lambda ev, out: write_prof(ev, out),
    "msprof PROF_ CSV only": lambda ev, out: write_prof(ev, out, csv_only=True),
    "msprof PROF_ CANN 6/7": lambda ev, out: write_prof(ev, out, layout="legacy"),
}


@pytest.mark.parametrize("kind", list(WRITERS))
def test_fixture_ranks_on_devices_0_and_1(tmp_path: Path, kind: str) -> None:
    timeline = _two_ranks(tmp_path, WRITERS[kind])
    assert timeline.meta["ranks"] == [0, 1]
    assert _devices_by_rank(timeline) == {0: [0], 1: [1]}
    comm = _device_rows(timeline).filter(pl.col("kind") == "comm")
    assert comm.height and comm["device"].null_count() == 0


def test_fixture_device_knob_packs_the_pids(tmp_path: Path) -> None:
    events = build_ascend_scenario(steps=1, layers=1, device=5, rank=2).events
    out = write_torch_npu(events, tmp_path, level="Level0")
    trace = json.loads((out / "ASCEND_PROFILER_OUTPUT" / "trace_view.json").read_text())
    labels = {e["pid"]: e["args"]["labels"] for e in trace if e.get("name") == "process_labels"}
    npu = [pid for pid, label in labels.items() if label == "NPU"]
    assert npu and {pid & 0x1F for pid in npu} == {5}
    assert set(_device_rows(tracekit.load(out))["device"]) == {5}


# -- the decoder ----------------------------------------------------------------------------------


def test_packed_pid_decoding() -> None:
    assert packed_device(3170822561, 13) == 1  # 910B rank 1, Ascend Hardware
    assert packed_device(3170822561, 14) is None  # middle bits are not its sort index
    assert packed_device((3096506 << 10) | (7 << 5) | 31, 7) is None  # the host slot
    assert packed_device(4376751100, 11) is None  # CANN 7 decimal pid: & 31 would say 28
    assert packed_device(800, 8) is None and packed_device("3170822561", 13) is None
    hw, hccl, cann = ((9 << 10) | (13 << 5) | 2, (9 << 10) | (15 << 5) | 2, (9 << 10) | (7 << 5))
    labels = {hw: "NPU", hccl: "NPU", 3: "NPU 6", cann: "CPU"}
    sort = {hw: 13, hccl: 15, 3: 1, cann: 7}
    assert process_devices(labels, sort, [hw, hccl, 3, cann]) == {hw: 2, hccl: 2, 3: 6}
    # one unnumbered process whose pid is not packed: none of the pids is trusted
    mixed = process_devices({hw: "NPU", 1003611: "NPU"}, {hw: 13, 1003611: 11}, [hw, 1003611])
    assert mixed == {}


def test_memory_csv_device(tmp_path: Path) -> None:
    record = tmp_path / "memory_record.csv"
    record.write_text("Component,Timestamp(us),Device Type\nAPP,1.0\t,NPU:3\nAPP,2.0\t,NPU:3\n")
    module = tmp_path / "npu_module_mem.csv"
    module.write_text("Component,Timestamp(us),Total Reserved(MB),Device\nSLOG,1.0,0.0,CPU\n")
    assert memory_device([record, module]) == 3
    other = tmp_path / "operator_memory.csv"
    other.write_text("Name,Device Type\naten::empty,NPU:4\n")
    assert memory_device([record, other]) is None  # two devices: none is the one


def test_one_trace_with_two_devices_gives_each_row_its_own(tmp_path: Path) -> None:
    """Current msprof writes one Ascend Hardware process per device into one file."""
    host = 4242

    def process(device: int, sort: int, name: str) -> tuple[int, list[dict]]:
        pid = (host << 10) | (sort << 5) | device
        return pid, [
            {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": name}},
            {"ph": "M", "name": "process_labels", "pid": pid, "tid": 0, "args": {"labels": "NPU"}},
            {
                "ph": "M",
                "name": "process_sort_index",
                "pid": pid,
                "tid": 0,
                "args": {"sort_index": sort},
            },
        ]

    events: list[dict] = []
    for device in (0, 3):
        pid, meta = process(device, 13, "Ascend Hardware")
        events += meta
        events.append(
            {
                "ph": "X",
                "name": f"aclnnAdd_{device}",
                "pid": pid,
                "tid": 2,
                "ts": f"1736408883{device}00000.000",
                "dur": 5.0,
                "args": {
                    "Task Type": "AI_CORE",
                    "Physic Stream Id": 2,
                    "Task Id": 1,
                    "Subtask Id": 4294967295,
                    "Model Id": 4294967295,
                    "connection_id": device,
                },
            }
        )
    path = tmp_path / "msprof_20260101000000.json"
    path.write_text(json.dumps(events))
    df = _device_rows(tracekit.load(path))
    assert dict(zip(df["name"], df["device"])) == {"aclnnAdd_0": 0, "aclnnAdd_3": 3}
