"""Ascend parser on every real sample under $TRACEKIT_REAL_TRACES/ascend.

References are computed here, independently of the parser, with the ``json``, ``csv`` and
``sqlite3`` modules: task counts from the timeline / task_time / TASK rows, per OP Type totals
from op_statistic, step ids from the step files, HCCL operator counts from communication.json.
"""

from __future__ import annotations

import csv
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import tracekit
from tests.conftest import real_file, run_cli, sha256, sql_rows
from tracekit.errors import TraceError
from tracekit.timeline import Timeline

NO_ID = 4294967295
DEVICE_KINDS = ("kernel", "memcpy", "sync", "comm", "marker")
TORCH = "msinsight_torchnpu_910B_2rank"
LEVELS = [(level, rank) for level in ("level0", "level1", "level2") for rank in (0, 1)]
PROF_2DEV = "mindinsight_msprof_PROF_2dev/PROF_000001_20230818142704322_COJGGGCANRMICFBC"
NEW_PROF = {
    "vllm_ascend_tmp_msprof_groupedmatmul_910B": "PROF_000001_20260823165413436_00626258NIRJNPIC",
    "neopan_tilelang_msprof_app_cann85": "PROF_000001_20260605161708478_FRJKORBPFMHQMGLA",
}
# every input a user would pass, and how many rows it must give at least
SAMPLES = [
    *(
        f"{TORCH}/{kind}/{level}"
        for kind in ("text", "db")
        for level in ("level0", "level1", "level2")
    ),
    f"{TORCH}/text/level1/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT",
    f"{TORCH}/text/level2/rank1_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json",
    f"{TORCH}/text/level0/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv",
    f"{TORCH}/db/level1/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_0.db",
    "msprof_analyze_advisor_testdata/test/ut/advisor/advisor_backend/compute_advice/kernel_details.csv",
    "msprof_analyze_advisor_testdata/test/ut/advisor/compute_advice/data/kernel_details.csv",
    "msprof_analyze_advisor_testdata/test/resource/test.csv",
    "msinsight_server_testdata/test_rank_0",
    "msinsight_server_testdata/test_rank_1",
    "msinsight_server_testdata/full_db/msprof_0.db",
    "msinsight_server_testdata/test_kernel_parse/op_summary_1.csv",
    "mindinsight_msprof_PROF_2dev",
    f"{PROF_2DEV}/device_0/timeline/msprof_0_2_3.json",
    *NEW_PROF,
]
REFUSED = {
    "mindinsight_mindspore1x_profiler": "unsupported layout",
    "mindinsight_mindspore1x_profiler/run_2_normal_run_profiler": "unsupported layout",
    f"{TORCH}/db/level1/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/analysis.db": "derived",
    "msinsight_server_testdata/multiDevice/msprof_db/ASCEND_PROFILER_OUTPUT/analysis.dat": (
        "derived"
    ),
    TORCH: "different runs",
    "msinsight_server_testdata": "different runs",
}


def _df(timeline: Timeline) -> pl.DataFrame:
    return timeline.df.with_columns(pl.col(pl.Categorical).cast(pl.String))


def _arg(df: pl.DataFrame, key: str) -> pl.Series:
    return df["args"].str.json_path_match(f"$.{key}")


def _ops(df: pl.DataFrame) -> pl.DataFrame:
    """The HCCL operators: ``comm`` rows that are no operator's task (no ``args.op``)."""
    comm = df.filter(pl.col("kind") == "comm")
    return comm.filter(_arg(comm, "op").is_null())


def _files(path: Path) -> list[Path]:
    return [p for p in sorted(path.rglob("*")) if p.is_file()] if path.is_dir() else [path]


def _csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def _us_ns(text: str) -> int:
    """µs text -> ns, by string arithmetic (independent of the parser's)."""
    whole, _, frac = text.strip().partition(".")
    return int(whole) * 1000 + int((frac + "000")[:3])


@pytest.mark.parametrize("rel", SAMPLES)
def test_every_sample_loads_and_is_left_unchanged(rel: str) -> None:
    path = real_file("ascend", rel)
    before = {p: sha256(p) for p in _files(path)}
    timeline = tracekit.load(path)
    assert timeline.validate() == []
    assert len(timeline) > 0
    assert timeline.meta["format"] in ("msprof", "msprof-db")
    assert {p: sha256(p) for p in _files(path)} == before
    df = _df(timeline)
    assert df.filter(pl.col("kind").is_in(DEVICE_KINDS)).height > 0
    assert df.filter((pl.col("kind") == "kernel") & pl.col("name").is_null()).height == 0


@pytest.mark.parametrize("rel", sorted(REFUSED))
def test_refused_inputs_say_why_in_one_line(rel: str) -> None:
    path = real_file("ascend", rel)
    with pytest.raises(TraceError) as info:
        tracekit.load(path)
    assert REFUSED[rel] in str(info.value)
    done = run_cli("info", str(path))
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr


# -- torch_npu text export (910B, 2 ranks, Level0/1/2) --------------------------------------------


def _trace(path: Path) -> dict[str, Any]:
    """Counts and keys from trace_view.json with the json module."""
    events = json.loads(path.read_text())
    procs = {
        e["pid"]: e["args"]["name"]
        for e in events
        if e.get("ph") == "M" and e.get("name") == "process_name"
    }
    threads = {
        (e["pid"], e["tid"]): e["args"]["name"]
        for e in events
        if e.get("ph") == "M" and e.get("name") == "thread_name"
    }
    x = [e for e in events if e.get("ph") == "X"]
    hw = [
        e
        for e in x
        if procs.get(e["pid"]) == "Ascend Hardware"
        and not threads.get((e["pid"], e["tid"]), "").startswith("Step Trace")
    ]
    hccl = [e for e in x if procs.get(e["pid"]) == "HCCL"]
    planes = [e for e in hccl if threads[(e["pid"], e["tid"])].startswith("Plane")]
    ops = [e for e in hccl if "Communication" in threads[(e["pid"], e["tid"])]]
    hw_keys = Counter(
        (e["args"]["Physic Stream Id"], e["args"]["Task Id"], e["args"]["Subtask Id"], e["ts"])
        for e in hw
    )
    plane_keys = Counter(
        (e["args"]["stream id"], e["args"]["task id"], e["args"]["context id"], e["ts"])
        for e in planes
    )
    op_corrs = {e["args"]["connection_id"] for e in ops}
    return {
        "hw": len(hw),
        "op_tasks": sum(1 for e in hw if e["args"].get("connection_id") in op_corrs),
        "ops": [e["name"] for e in ops],
        "planes": len(planes),
        "matched": sum((hw_keys & plane_keys).values()),
        "procs": procs,
        "cann_x": sum(1 for e in x if procs.get(e["pid"]) == "CANN"),
    }


@pytest.mark.parametrize(("level", "rank"), LEVELS)
def test_torch_npu_text_counts(level: str, rank: int) -> None:
    root = real_file("ascend", f"{TORCH}/text/{level}/rank{rank}_ascend_pt")
    out = root / "ASCEND_PROFILER_OUTPUT"
    ref = _trace(out / "trace_view.json")
    kd = _csv(out / "kernel_details.csv")
    timeline = tracekit.load(root)
    df = _df(timeline)
    device = df.filter(pl.col("kind").is_in(DEVICE_KINDS))
    # each hardware task once: plane tasks listed on their stream too are counted once
    assert device.height == ref["hw"] + len(ref["ops"]) + ref["planes"] - ref["matched"]
    assert ref["matched"] == ref["planes"]
    hccl = [r for r in kd if r["Accelerator Core"] == "HCCL"]
    assert df.filter(pl.col("kind") == "kernel").height == len(kd) - len(hccl)
    comm = df.filter(pl.col("kind") == "comm")
    ops = _ops(df)
    assert sorted(ops["name"]) == sorted(r["Name"] for r in hccl) == sorted(ref["ops"])
    assert ops["stream"].to_list() == [4] * len(hccl)  # the stream of their tasks
    # every task of an operator (its connection id) is a communication row naming it, once:
    # Level0 lists the hardware rows only, Level1/2 their plane rows too
    tasks = comm.filter(_arg(comm, "op").is_not_null())
    assert tasks.height == ref["op_tasks"] + ref["planes"] - ref["matched"] > 0
    assert set(_arg(tasks, "op")) == set(ref["ops"])
    assert df.filter(pl.col("kind") == "api").height == ref["cann_x"] + sum(
        1
        for r in json.loads((out / "trace_view.json").read_text())
        if r.get("cat") in ("enqueue", "dequeue") and r.get("ph") == "X"
    )
    assert timeline.meta["ranks"] == [rank]
    assert (
        timeline.meta["producer"]["level"]
        == {"level0": "Level0", "level1": "Level1", "level2": "Level2"}[level]
    )


@pytest.mark.parametrize(("level", "rank"), LEVELS)
def test_torch_npu_text_steps_and_overlap(level: str, rank: int) -> None:
    out = real_file("ascend", f"{TORCH}/text/{level}/rank{rank}_ascend_pt/ASCEND_PROFILER_OUTPUT")
    timeline = tracekit.load(out.parent)
    steps = _csv(out / "step_trace_time.csv")
    kd = _csv(out / "kernel_details.csv")
    assert timeline.meta["steps"] == sorted({int(r["Step Id"]) for r in kd})
    assert timeline.meta["steps"] == [int(r["Step"]) for r in steps] == [50]
    kernels = _df(timeline).filter(pl.col("kind") == "kernel")
    assert set(_arg(kernels, "step").cast(pl.Int64).to_list()) == {50}
    # Overlap Analysis threads, matched by name, give step_trace_time's totals
    overlap = timeline.meta["overlap_analysis_ns"]
    for key in ("Computing", "Communication", "Communication(Not Overlapped)", "Free"):
        assert abs(overlap[key] - float(steps[0][key]) * 1000) < 1000, key


@pytest.mark.parametrize(("level", "rank"), [x for x in LEVELS if x[0] != "level0"])
def test_torch_npu_text_op_statistic_and_communication(level: str, rank: int) -> None:
    out = real_file("ascend", f"{TORCH}/text/{level}/rank{rank}_ascend_pt/ASCEND_PROFILER_OUTPUT")
    df = _df(tracekit.load(out.parent))
    kernels = df.filter(pl.col("kind") == "kernel").with_columns(
        op_type=_arg(df.filter(pl.col("kind") == "kernel"), "op_type"),
        core=_arg(df.filter(pl.col("kind") == "kernel"), "core"),
    )
    mine = {
        (t, c): (n, ns)
        for t, c, n, ns in kernels.group_by("op_type", "core")
        .agg(pl.len(), pl.col("dur").sum())
        .iter_rows()
    }
    stats = _csv(out / "op_statistic.csv")
    assert len(mine) == len(stats)
    for row in stats:
        count, total = mine[(row["OP Type"], row["Core Type"])]
        assert count == int(row["Count"])
        # the timeline's float µs durations against the table's 3-decimal ones: < 1 ns each
        assert abs(total - round(float(row["Total Time(us)"]) * 1000)) <= count
    comm = json.loads((out / "communication.json").read_text())
    ops = [
        k.split("@")[0]
        for step in comm.values()
        for kind in step.values()
        for k in kind
        if k != "Total Op Info"
    ]
    assert sorted(_ops(df)["name"]) == sorted(ops)


def test_torch_npu_text_quirks() -> None:
    out = real_file("ascend", f"{TORCH}/text/level1/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT")
    timeline = tracekit.load(out.parent)
    df = _df(timeline)
    kd = _csv(out / "kernel_details.csv")
    first = kd[0]
    assert first["Start Time(us)"].endswith("\t")  # the trailing TAB is in the file ...
    row = df.filter(pl.col("name") == first["Name"]).sort("ts").row(0, named=True)
    assert row["ts"] + timeline.meta["origin_ns"] == _us_ns(
        first["Start Time(us)"]
    )  # ... not in ts
    raw = (out / "kernel_details.csv").read_text()
    assert '"""32,3,224,224"""' in raw  # shapes wrapped in an extra pair of quotes ...
    args = json.loads(row["args"])
    assert args["input_shapes"] == "32,3,224,224" and args["block_dim"] == 32  # ... taken off
    assert first["Model ID"] == str(NO_ID)  # single-op mode: no model id is recorded
    assert not df["args"].drop_nulls().str.contains('"model_id"').any()
    assert timeline.meta["stream_id_key"] == ["Physic Stream Id"]
    # HCCL plane tasks: counted once, with their link details
    plane = df.filter(pl.col("name") == "Memcpy")
    assert plane.height and set(_arg(plane, "transport")) == {"SDMA"}
    assert set(_arg(plane, "hw_type")) == {"SDMA"} and plane["stream"].unique().to_list() == [4]


def test_torch_npu_level0_without_cann_process_name() -> None:
    out = real_file("ascend", f"{TORCH}/text/level0/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT")
    ref = _trace(out / "trace_view.json")
    assert "CANN" not in ref["procs"].values()
    timeline = tracekit.load(out.parent)
    assert any("no process_name event; read as CANN" in w for w in timeline.meta["warnings"])
    df = _df(timeline)
    assert df.filter(pl.col("kind") == "kernel").height == 187
    engines = df.filter(pl.col("kind") == "kernel")["engine"]
    # Level0 names no core type: only the SQE types that say it (DSA_SQE, MIX_AIV) give one
    assert Counter(engines.drop_nulls()) == {"mix": 13, "dsa": 2}


# -- torch_npu db export --------------------------------------------------------------------------

_PARENTS = (
    "SELECT count(*) FROM TASK t WHERE t.contextId = 4294967295 AND EXISTS (SELECT 1 FROM TASK s"
    " WHERE s.streamId = t.streamId AND s.taskId = t.taskId AND s.connectionId = t.connectionId"
    " AND s.deviceId = t.deviceId AND s.contextId != 4294967295)"
)


@pytest.mark.parametrize(("level", "rank"), LEVELS)
def test_torch_npu_db_counts(level: str, rank: int) -> None:
    db = real_file(
        "ascend",
        f"{TORCH}/db/{level}/rank{rank}_ascend_pt/ASCEND_PROFILER_OUTPUT/"
        f"ascend_pytorch_profiler_{rank}.db",
    )
    timeline = tracekit.load(db.parent.parent)
    df = _df(timeline)
    one = lambda sql: sql_rows(db, sql)[0][0]  # noqa: E731
    tasks, parents = one("SELECT count(*) FROM TASK"), one(_PARENTS)
    ops = _ops(df)
    assert df.filter(pl.col("kind").is_in(DEVICE_KINDS)).height - ops.height == tasks - parents
    assert ops.height == one("SELECT count(*) FROM COMMUNICATION_OP")
    # the operators' tasks: with plane details (Level1/2) or without (Level0), comm rows
    comm = df.filter(pl.col("kind") == "comm")
    assert comm.height - ops.height == one("SELECT count(*) FROM COMMUNICATION_TASK_INFO") > 0
    assert df.filter(pl.col("kind") == "kernel").height == one(
        "SELECT count(*) FROM COMPUTE_TASK_INFO"
    )
    assert df.filter(pl.col("kind") == "op").height == one(
        "SELECT count(*) FROM PYTORCH_API WHERE type = 50001"
    )
    assert df.filter(pl.col("kind") == "api").height == one("SELECT count(*) FROM CANN_API") + one(
        "SELECT count(*) FROM PYTORCH_API WHERE type = 50002"
    )
    assert timeline.meta["steps"] == [r[0] for r in sql_rows(db, "SELECT id FROM STEP_TIME")]
    assert timeline.meta["devices"][0]["name"] == one("SELECT name FROM NPU_INFO")
    assert timeline.meta["ranks"] == [rank]


def test_torch_npu_db_pytorch_api_text_times() -> None:
    db = real_file(
        "ascend",
        f"{TORCH}/db/level2/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_0.db",
    )
    ((start, end),) = sql_rows(
        db,
        "SELECT p.startNs, p.endNs FROM PYTORCH_API p JOIN STRING_IDS s "
        "ON s.id = p.name WHERE s.value = 'ProfilerStep#50'",
    )
    assert isinstance(start, str)  # PYTORCH_API keeps its times as TEXT
    timeline = tracekit.load(db)
    row = _df(timeline).filter(pl.col("name") == "ProfilerStep#50").row(0, named=True)
    assert (row["ts"] + timeline.meta["origin_ns"], row["dur"]) == (
        int(start),
        int(end) - int(start),
    )
    step = _df(timeline).filter(pl.col("name") == "Step 50").row(0, named=True)
    assert step["kind"] == "range"


def test_torch_npu_db_plane_tasks() -> None:
    db = real_file(
        "ascend",
        f"{TORCH}/db/level1/rank1_ascend_pt/ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_1.db",
    )
    df = _df(tracekit.load(db))
    rows = sql_rows(
        db,
        "SELECT s.value, count(*) FROM COMMUNICATION_TASK_INFO c JOIN STRING_IDS s"
        " ON s.id = c.taskType GROUP BY 1",
    )
    for name, count in rows:
        plane = df.filter(pl.col("name") == name)
        assert plane.height == count
        assert _arg(plane, "op").str.starts_with("hcom_allReduce").all()
    sdma = sql_rows(
        db,
        "SELECT count(*) FROM COMMUNICATION_TASK_INFO c JOIN ENUM_HCCL_TRANSPORT_TYPE"
        " e ON e.id = c.transportType WHERE e.name = 'SDMA'",
    )[0][0]
    assert (_arg(df, "transport") == "SDMA").sum() == sdma


def _normal(name: str) -> str:
    return re.sub(r"^(hcom_\w+?__)\d+_", r"\1N_", name)


@pytest.mark.parametrize(("level", "rank"), LEVELS)
def test_text_and_db_exports_give_the_same_device_rows(level: str, rank: int) -> None:
    text = _df(tracekit.load(real_file("ascend", f"{TORCH}/text/{level}/rank{rank}_ascend_pt")))
    db = _df(tracekit.load(real_file("ascend", f"{TORCH}/db/{level}/rank{rank}_ascend_pt")))
    keys = ["kind", "name", "stream"] + ([] if level == "level0" else ["engine"])

    def rows(df: pl.DataFrame) -> Counter:
        device = df.filter(pl.col("kind").is_in(DEVICE_KINDS))
        return Counter((*r[:1], _normal(r[1]), *r[2:]) for r in device.select(keys).iter_rows())

    assert rows(text) == rows(db)
    assert sum(rows(text).values()) == 537 + 2 * (level != "level0")


def test_rank_folder_reads_as_one_timeline() -> None:
    folder = real_file("ascend", f"{TORCH}/text/level1")
    timeline = tracekit.load(folder)
    df = _df(timeline)
    assert timeline.meta["ranks"] == [0, 1]
    for rank in (0, 1):
        alone = tracekit.load(folder / f"rank{rank}_ascend_pt")
        assert df.filter(pl.col("rank") == rank).height == len(alone)
    assert set(timeline.meta["overlap_analysis_ns"]) == {"0", "1"}


# -- msprof command line --------------------------------------------------------------------------


@pytest.mark.parametrize("sample", sorted(NEW_PROF))
def test_msprof_prof_csv_counts(sample: str) -> None:
    prof = real_file("ascend", f"{sample}/{NEW_PROF[sample]}")
    out = prof / "mindstudio_profiler_output"
    task_time = _csv(next(out.glob("task_time_*.csv")))
    summary = _csv(next(out.glob("op_summary_*.csv")))
    stats = _csv(next(out.glob("op_statistic_*.csv")))
    timeline = tracekit.load(prof)
    df = _df(timeline)
    assert df.height == len(task_time)
    kernels = df.filter(pl.col("kind") == "kernel")
    assert kernels.height == len(summary)
    assert sorted(kernels["name"]) == sorted(r["Op Name"] for r in summary)
    by_type = kernels.group_by(_arg(kernels, "op_type").alias("t")).agg(
        pl.len(), pl.col("dur").sum()
    )
    mine = {t: (n, ns) for t, n, ns in by_type.iter_rows()}
    for row in stats:  # op_statistic sums the same durations, rounded to the ns per task
        count, total = mine[row["OP Type"]]
        assert count == int(row["Count"])
        assert abs(total - round(float(row["Total Time(us)"]) * 1000)) <= count
    block = "Block Num" if "Block Num" in summary[0] else "Block Dim"
    assert sorted(_arg(kernels, "block_dim").cast(pl.Int64)) == sorted(
        int(r[block]) for r in summary
    )
    markers = df.filter(pl.col("kind") == "marker")["name"].to_list()
    assert {"PROFILING_ENABLE", "PROFILING_DISABLE"} <= set(markers)
    assert set(df["device"]) == {int(task_time[0]["Device_id"])}
    first = min(_us_ns(r["task_start(us)"]) for r in task_time)
    assert timeline.meta["origin_ns"] == min(
        first, *(_us_ns(r["Task Start Time(us)"]) for r in summary)
    )


def test_msprof_block_num_and_chip() -> None:
    prof = real_file(
        "ascend",
        f"vllm_ascend_tmp_msprof_groupedmatmul_910B/{NEW_PROF['vllm_ascend_tmp_msprof_groupedmatmul_910B']}",
    )
    timeline = tracekit.load(prof)
    assert timeline.meta["devices"][0]["name"] == "Ascend910B"  # platform_version "5"
    df = _df(timeline)
    gmm = df.filter(pl.col("name").str.contains("GroupedMatmul")).row(0, named=True)
    assert (gmm["engine"], json.loads(gmm["args"])["block_dim"]) == ("mix", 20)
    assert json.loads(gmm["args"])["kernel_name"].startswith("GroupedMatmul_")


def test_msprof_legacy_per_device_timelines() -> None:
    prof = real_file("ascend", PROF_2DEV)
    device = prof / "device_0"
    timeline = tracekit.load(prof.parent)
    df = _df(timeline)
    hw = planes = ops = matched = 0
    steps = set()
    for path in sorted((device / "timeline").glob("msprof_*.json")):
        ref = json.loads(path.read_text())
        procs = {e["pid"]: e["args"]["name"] for e in ref if e.get("name") == "process_name"}
        threads = {
            (e["pid"], e["tid"]): e["args"]["name"] for e in ref if e.get("name") == "thread_name"
        }
        x = [e for e in ref if e.get("ph") == "X"]
        hw_rows = [
            e
            for e in x
            if procs.get(e["pid"]) == "Ascend Hardware"
            and not threads[(e["pid"], e["tid"])].startswith("Step Trace")
        ]
        plane_rows = [e for e in x if threads.get((e["pid"], e["tid"]), "").startswith("Plane")]
        hw += len(hw_rows)
        planes += len(plane_rows)
        ops += sum(1 for e in x if threads.get((e["pid"], e["tid"])) == "Communication Kernel")
        keys = Counter((e["args"]["Stream Id"], e["args"]["Task Id"], e["ts"]) for e in hw_rows)
        matched += sum(
            (
                keys
                & Counter(
                    (e["args"]["stream id"], e["args"]["task id"], e["ts"]) for e in plane_rows
                )
            ).values()
        )
        steps |= {e["args"]["Iteration ID"] for e in x if e.get("cat") == "Iteration Time"}
    assert df.filter(pl.col("kind").is_in(DEVICE_KINDS)).height == hw + ops + planes - matched
    assert timeline.meta["steps"] == sorted(steps) == list(range(1, 11))
    # float device-monotonic µs, put on the epoch through start_info.0
    start = json.loads((device / "start_info.0").read_text())
    end = json.loads((device / "end_info.0").read_text())
    assert int(start["collectionTimeBegin"]) * 1000 < timeline.meta["origin_ns"]
    assert timeline.meta["origin_ns"] + df["ts"].max() < int(end["collectionTimeEnd"]) * 1000
    assert timeline.meta["stream_id_key"] == ["Stream Id"]
    kernels = df.filter(pl.col("kind") == "kernel")
    assert Counter(kernels["engine"]) == {"aic": 1370, "ai_cpu": 20}  # Ascend910: no vector cores
    assert timeline.meta["devices"][0] == {
        "index": 0,
        "name": "Ascend910",
        "vendor": "Huawei",
        "cores": 32,
        "vector_cores": 0,
        "ai_cpu_cores": 14,
        "aic_mhz": 1000,
    }
    comm = _ops(df)
    assert comm.height == 10 and comm["stream"].null_count() == 0


# -- single tables and the msprof-analyze / Insight test data -------------------------------------


def test_kernel_details_alone() -> None:
    path = real_file(
        "ascend",
        "msprof_analyze_advisor_testdata/test/ut/advisor/advisor_backend/compute_advice/kernel_details.csv",
    )
    rows = _csv(path)
    df = _df(tracekit.load(path))
    assert df.height == len(rows) == 591
    cores = Counter(r["Accelerator Core"] for r in rows)
    comm = df.filter(pl.col("kind") == "comm")
    assert comm.height == cores["HCCL"] and comm["stream"].null_count() == comm.height  # N/A
    assert (df["engine"] == "ai_cpu").sum() == cores["AI_CPU"] == 7
    assert (df["engine"] == "aiv").sum() == cores["AI_VECTOR_CORE"]
    assert set(_arg(df.filter(pl.col("kind") == "kernel"), "step")) == {"1"}


def test_insight_rank_and_op_summary_header() -> None:
    rank0 = real_file("ascend", "msinsight_server_testdata/test_rank_0")
    kd = _csv(rank0 / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv")
    df = _df(tracekit.load(rank0))
    assert df.height == len(kd)
    summary = _df(
        tracekit.load(
            real_file("ascend", "msinsight_server_testdata/test_kernel_parse/op_summary_1.csv")
        )
    )
    assert summary.select("ts", "dur", "kind", "name").equals(
        df.select("ts", "dur", "kind", "name")
    )


def test_msprof_db_fixture_of_insight() -> None:
    db = real_file("ascend", "msinsight_server_testdata/full_db/msprof_0.db")
    timeline = tracekit.load(db)
    df = _df(timeline)
    one = lambda sql: sql_rows(db, sql)[0][0]  # noqa: E731
    device = df.filter(pl.col("kind").is_in(DEVICE_KINDS))
    assert device.height == one("SELECT count(*) FROM TASK") - one(_PARENTS)
    assert df.filter(pl.col("kind") == "api").height == one("SELECT count(*) FROM CANN_API")
    assert df.filter(pl.col("kind").is_in(["range", "marker"])).height == one(
        "SELECT count(*) FROM MSTX_EVENTS"
    )
    assert timeline.meta["devices"][0]["index"] == 2
