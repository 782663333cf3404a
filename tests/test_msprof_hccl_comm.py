"""The hardware tasks of an HCCL operator are communication: they count in a step's
communication, never as compute or as other work beside it.

A hand-written trace puts one all-reduce alone between two kernels and checks the step's
numbers against sums written out here; the scenario's exposed all-to-all, written as the
exports that list the HCCL tasks without plane details (torch_npu Level0, text and db), is
checked against ``fixtures.step_truth``.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import tracekit
from fixtures.ascend_db_writer import write_torch_npu_db
from fixtures.ascend_scenario import build_ascend_scenario
from fixtures.ascend_text_writer import write_torch_npu
from fixtures.step_truth import step_truth

US = 1_000  # ns
EPOCH_US = 1_736_408_883_000_000
HOST = 3096506
HW, HCCL = (HOST << 10) | (13 << 5) | 1, (HOST << 10) | (15 << 5) | 1  # device 1
OP = "hcom_allReduce__868_0_1"
# (name, Task Type, stream, start µs, end µs, connection id): two kernels on stream 2, the
# all-reduce's tasks on stream 4 between them (one of them a reduction on the AI Cores), and
# a copy of another stream running meanwhile (not the operator's)
TASKS = [
    ("aclnnMatmul_MatMulV3Common_MatMulV3", "AI_CORE", 2, 0, 100, 10),
    ("Notify Wait", "Notify Wait", 4, 100, 180, 50),
    ("SDMA", "SDMA", 4, 180, 250, 50),
    ("ReduceSum_AddN", "AI_CORE", 4, 250, 290, 50),
    ("Write Value", "Write Value", 4, 290, 300, 50),
    ("MEMCPY_ASYNC", "PCIE_DMA_SQE", 3, 150, 170, 12),
    ("aclnnAdd_AddAiCore_Add", "AI_CORE", 2, 300, 400, 11),
]


def _meta(pid: int, name: str, sort: int) -> list[dict[str, Any]]:
    return [
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


def _trace(path: Path, connection_ids: bool) -> Path:
    """A trace_view.json with :data:`TASKS` and the operator (connection ids optional, as
    MindSpore graph mode and torch_npu output without launch links write it)."""
    corr = (lambda c: c) if connection_ids else (lambda c: None)
    events = [*_meta(HW, "Ascend Hardware", 13), *_meta(HCCL, "HCCL", 15)]
    events.append(
        {
            "ph": "M",
            "name": "thread_name",
            "pid": HCCL,
            "tid": 0,
            "args": {"name": "Group 0 Communication"},
        }
    )
    for task_id, (name, task_type, stream, start, end, conn) in enumerate(TASKS):
        events.append(
            {
                "ph": "X",
                "name": name,
                "pid": HW,
                "tid": stream,
                "ts": f"{EPOCH_US + start}.000",
                "dur": float(end - start),
                "args": {
                    "Model Id": 4294967295,
                    "Task Type": task_type,
                    "Physic Stream Id": stream,
                    "Task Id": task_id,
                    "Batch Id": 0,
                    "Subtask Id": 4294967295,
                    "connection_id": corr(conn),
                },
            }
        )
    events.append(
        {
            "ph": "X",
            "name": OP,
            "pid": HCCL,
            "tid": 0,
            "ts": f"{EPOCH_US + 100}.000",
            "dur": 200.0,
            "args": {
                "connection_id": corr(50),
                "model id": 4294967295,
                "data_type": "FP32",
                "alg_type": "MESH-RING",
                "count": 4097000,
            },
        }
    )
    path.write_text(json.dumps(events))
    return path


@pytest.mark.parametrize("connection_ids", [True, False], ids=["linked", "by time"])
def test_hccl_tasks_alone_between_compute(tmp_path: Path, connection_ids: bool) -> None:
    timeline = tracekit.load(_trace(tmp_path / "trace_view.json", connection_ids))
    df = timeline.df.with_columns(pl.col(pl.Categorical).cast(pl.String))
    tasks = df.filter(pl.col("args").str.contains(f'"op":"{OP}"', literal=True))
    assert sorted(tasks["name"]) == ["Notify Wait", "ReduceSum_AddN", "SDMA", "Write Value"]
    assert set(tasks["kind"]) == {"comm"} and set(tasks["device"]) == {1}
    engines = dict(zip(tasks["name"], tasks["engine"]))
    assert engines == {
        "Notify Wait": "comm",
        "SDMA": "sdma",
        "ReduceSum_AddN": "comm",
        "Write Value": "comm",
    }
    copy = df.filter(pl.col("name") == "MEMCPY_ASYNC").row(0, named=True)
    assert (copy["kind"], copy["engine"]) == ("memcpy", "copy")  # another stream's copy
    [m] = tracekit.analyze(timeline).step_metrics.to_dicts()
    # truth, in ns: compute = the two kernels; communication = the operator's window,
    # 100-300 µs, all of it exposed; alone = that window less the copy (150-170 µs)
    assert (m["device"], m["dur"], m["busy_ns"]) == (1, 400 * US, 400 * US)
    assert m["compute_ns"] == (100 + 100) * US
    assert m["comm_ns"] == m["exposed_comm_ns"] == 200 * US
    assert m["comm_overlap_ratio"] == 0.0
    assert m["comm_bubble_ns"] == (200 - 20) * US
    assert m["idle_ns"] == m["bubble_ns"] == 0


WRITERS = {
    "text Level0": lambda ev, out: write_torch_npu(ev, out, level="Level0"),
    "db Level0": lambda ev, out: write_torch_npu_db(ev, out, level="Level0"),
    "text Level1": lambda ev, out: write_torch_npu(ev, out),
    "db Level1": lambda ev, out: write_torch_npu_db(ev, out),
}
KNOBS = {
    "steps": 4,
    "layers": 4,
    "fallback_kernel": False,
    "hccl_all_to_all_layers": 4,
    "exposed_all_to_all": True,
    "mc2_aicpu": False,
    "device": 1,
    "rank": 1,
}


@pytest.mark.parametrize("writer", list(WRITERS))
def test_exposed_hccl_all_to_all_equals_the_truth(tmp_path: Path, writer: str) -> None:
    """Every dispatch / combine is an HCCL all-to-all; in step 2 one runs alone."""
    scenario = build_ascend_scenario(**KNOBS)
    timeline = tracekit.load(WRITERS[writer](scenario.events, tmp_path))
    df = timeline.df.with_columns(pl.col(pl.Categorical).cast(pl.String))
    comm = df.filter(pl.col("kind") == "comm")
    ops = comm.filter(pl.col("name").str.starts_with("hcom_alltoAllV_"))
    tasks = comm.filter(pl.col("args").str.contains('"op":', literal=True))
    assert Counter(tasks["args"].str.json_path_match("$.op")) == dict.fromkeys(ops["name"], 4)
    analysis = tracekit.analyze(timeline)
    rows = analysis.step_metrics.to_dicts()
    truth = step_truth(scenario, kernel_roles=("memset",))
    assert len(rows) == len(truth) == 4
    [(start, end)] = scenario.truth["exposed_dispatch"]
    assert truth[2]["exposed_comm_ns"] >= end - start > 0  # the lone dispatch among them
    for got, want in zip(rows, truth):
        for key in (
            "comm_ns",
            "exposed_comm_ns",
            "comm_bubble_ns",
            "compute_ns",
            "busy_ns",
            "bubble_ns",
            "device",
            "rank",
        ):
            assert got[key] == want[key], (want["step"], key)
