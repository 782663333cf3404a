"""The Ascend scenario and its writers (torch_npu text export, msprof PROF_ folders): the
scenario's own counts, the writers' shape against the real samples, round trips through the
parser (scenario -> writer -> parser -> rows equal the scenario as that layout records it),
and one test per format quirk the parser handles."""

from __future__ import annotations

import csv
import json
import sqlite3
from collections import Counter
from pathlib import Path

import polars as pl
import pytest

from fixtures.ascend_db_writer import write_torch_npu_db
from fixtures.ascend_expected import LAYOUTS, args_subset, expected_rows
from fixtures.ascend_scenario import build_ascend_scenario
from fixtures.ascend_text_writer import EPOCH_NS, write_torch_npu, write_torch_npu_ranks
from fixtures.ascend_trace_json import OVERLAP_ORDER
from fixtures.msprof_prof_writer import write_prof
from tests.conftest import real_file
from tracekit.parsers.msprof import MSPROF
from tracekit.parsers.probe import Probe
from tracekit.timeline import Timeline

COLUMNS = ["ts", "dur", "kind", "name", "device", "stream", "corr", "engine"]
KNOBS = [
    {},
    {"steps": 2, "layers": 3, "unfused_collective": True, "hccl_all_to_all_layers": 2},
    {
        "steps": 3,
        "layers": 2,
        "exposed_all_to_all": True,
        "idle_bubble_ns": 75_000,
        "mc2_aicpu": False,
        "fallback_kernel": False,
    },
    {"steps": 1, "layers": 1, "device": 3, "rank": 5, "hccl_all_to_all_layers": 0},
    {
        "steps": 2,
        "layers": 2,
        "device": 1,
        "rank": 1,
        "hccl_flows": False,
        "unfused_collective": True,
    },
]
TORCH = "msinsight_torchnpu_910B_2rank/text"


def write(events: pl.DataFrame, folder: Path, layout: str) -> Path:
    """Write ``events`` in ``layout`` under ``folder``; return what a user would pass."""
    if layout == "torch_npu":
        return write_torch_npu(events, folder)
    if layout == "torch_npu-level0":
        return write_torch_npu(events, folder, level="Level0")
    if layout == "torch_npu-db":
        return write_torch_npu_db(events, folder)
    if layout == "msprof":
        return write_prof(events, folder)
    if layout == "msprof-csv":
        return write_prof(events, folder, csv_only=True)
    return write_prof(events, folder, layout="legacy")


def canonical(df: pl.DataFrame) -> pl.DataFrame:
    df = df.with_columns(pl.col(pl.Categorical).cast(pl.String))
    df = df.select(*COLUMNS, "args").with_columns(
        pl.col("device").cast(pl.Int32), pl.col("ts") - pl.col("ts").min()
    )
    return df.sort(COLUMNS, nulls_last=True)


def check_round_trip(timeline: Timeline, events: pl.DataFrame, layout: str) -> None:
    assert timeline.validate() == []
    got, want = canonical(timeline.df), canonical(expected_rows(events, layout))
    assert got.drop("args").equals(want.drop("args"))
    mismatched = [(w, g) for w, g in zip(want["args"], got["args"]) if not args_subset(w, g)]
    assert mismatched == []


# -- the scenario ---------------------------------------------------------------------------------


def test_ascend_scenario_holds_mc2_ai_cpu_and_hccl_all_to_all() -> None:
    scenario = build_ascend_scenario(steps=3, layers=4)
    ev = scenario.events
    names = Counter(ev["name"])
    assert (
        names["aclnnMoeDistributeDispatchV2_MoeDistributeDispatchV2_MoeDistributeDispatchV2"] == 9
    )
    assert names["aclnnMoeDistributeCombineV2_MoeDistributeCombineV2_MoeDistributeCombineV2"] == 9
    assert names["MoeDistributeDispatchV2Aicpu"] == names["MoeDistributeCombineV2Aicpu"] == 9
    alltoall = ev.filter(pl.col("name").str.starts_with("hcom_alltoAllV__"))
    assert alltoall.height == 6 and set(alltoall["kind"]) == {"comm"}  # layer 0, 3 steps
    ai_cpu = ev.filter(pl.col("engine") == "ai_cpu")
    assert Counter(ai_cpu["kind"]) == {"kernel": 9, "comm": 30, "range": 60}
    # AI CPU kernels: the fallback chain, 3 per step; the Aicpu side of 30 MC² ops
    # (dispatch + combine in layers 1-3, MatmulAllReduceAddRmsNorm in every layer), 2 phases each
    assert ev.filter(pl.col("kind") == "kernel")["engine"].null_count() == 0
    # four plane tasks tile each HCCL operator's window
    for op in alltoall.iter_rows(named=True):
        tasks = ev.filter(pl.col("args").str.contains(op["name"], literal=True))
        assert tasks.height == 4 and tasks["dur"].sum() == op["dur"]
        assert tasks["ts"].min() == op["ts"]
    assert scenario.truth["ascend"]["mc2:MoeDistributeDispatchV2"] == 9
    assert scenario.truth["ascend"]["hccl:hcom_alltoAllV_"] == 6
    assert scenario.truth["ascend_counts"] == dict(Counter(ev["kind"]))


def test_scenario_is_deterministic() -> None:
    assert build_ascend_scenario(seed=4).events.equals(build_ascend_scenario(seed=4).events)


# -- round trips ----------------------------------------------------------------------------------


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("knobs", KNOBS, ids=lambda k: ",".join(k) or "default")
def test_round_trip_equals_scenario(tmp_path: Path, layout: str, knobs: dict) -> None:
    events = build_ascend_scenario(**knobs).events
    path = write(events, tmp_path, layout)
    assert MSPROF.sniff(Probe(path))
    timeline = MSPROF.parse(path)
    check_round_trip(timeline, events, layout)
    assert timeline.meta["ranks"] == [knobs.get("rank", 0)]
    assert timeline.meta["origin_ns"] == EPOCH_NS + int(expected_rows(events, layout)["ts"].min())


def test_mc2_metadata_matches_the_scenario(tmp_path: Path) -> None:
    scenario = build_ascend_scenario(steps=2, layers=3, unfused_collective=True)
    timeline = MSPROF.parse(write_torch_npu(scenario.events, tmp_path))
    truth = scenario.truth["ascend"]
    kernels = {k.split(":", 1)[1]: v for k, v in truth.items() if k.startswith("mc2:")}
    assert timeline.meta["mc2"] == {"kernels": kernels, "aicpu_comm_rows": truth["aicpu_comm"]}
    df = timeline.df.with_columns(pl.col(pl.Categorical).cast(pl.String))
    phases = df.filter(pl.col("args").str.contains('"mc2_phase"', literal=True))
    assert phases.height == 2 * truth["aicpu_comm"] and set(phases["kind"]) == {"range"}
    hcom = df.filter(pl.col("name").str.starts_with("hcom_"))
    assert hcom.height == truth["hccl:hcom_alltoAllV_"] + truth["hccl:hcom_allReduce_"]


def test_rank_folders_read_as_one_timeline(tmp_path: Path) -> None:
    per_rank = {r: build_ascend_scenario(steps=1, layers=2, rank=r, seed=r).events for r in (0, 1)}
    write_torch_npu_ranks(per_rank, tmp_path, epoch_ns=EPOCH_NS)
    timeline = MSPROF.parse(tmp_path)
    assert timeline.meta["ranks"] == [0, 1]
    df = timeline.df
    for rank, events in per_rank.items():
        mine = df.filter(pl.col("rank") == rank).drop("rank")
        want = expected_rows(events, "torch_npu")
        assert canonical(mine).drop("args").equals(canonical(want).drop("args"))
    # one clock: rank 1's rows keep their offset from rank 0's
    first = {r: int(e["ts"].min()) for r, e in per_rank.items()}
    start = df.group_by("rank").agg(pl.col("ts").min()).sort("rank")["ts"].to_list()
    assert start[1] - start[0] == first[1] - first[0]


def test_op_summary_slices_read_as_one_table(tmp_path: Path) -> None:
    events = build_ascend_scenario(steps=2, layers=2).events
    prof = write_prof(events, tmp_path, csv_only=True, slices=3)
    assert len(list((prof / "mindstudio_profiler_output").glob("op_summary_slice_*.csv"))) == 3
    check_round_trip(MSPROF.parse(prof), events, "msprof-csv")


def test_async_npu_flows_give_python_ops_their_launch(tmp_path: Path) -> None:
    """A cpu_op whose async_npu flow reaches a task gets the task's connection id."""
    events = [
        {"ph": "M", "name": "process_name", "pid": 7, "tid": 0, "args": {"name": "Python"}},
        {
            "ph": "M",
            "name": "process_name",
            "pid": 9,
            "tid": 0,
            "args": {"name": "Ascend Hardware"},
        },
        {
            "ph": "X",
            "name": "aten::add",
            "pid": 7,
            "tid": 7,
            "ts": "1736408883000000.000",
            "dur": 30.0,
            "cat": "cpu_op",
            "args": {"Sequence number": 12},
        },
        {
            "ph": "X",
            "name": "aten::add_inner",
            "pid": 7,
            "tid": 7,
            "ts": "1736408883000000.000",
            "dur": 10.0,
            "cat": "cpu_op",
            "args": {},
        },
        {
            "ph": "s",
            "bp": "e",
            "name": "torch_to_npu",
            "id": 1736408883000050000,
            "pid": 7,
            "tid": 7,
            "ts": "1736408883000000.000",
            "cat": "async_npu",
        },
        {
            "ph": "f",
            "bp": "e",
            "name": "torch_to_npu",
            "id": 1736408883000050000,
            "pid": 9,
            "tid": 2,
            "ts": "1736408883000050.000",
            "cat": "async_npu",
        },
        {
            "ph": "X",
            "name": "aclnnAdd_AddAiCore_Add",
            "pid": 9,
            "tid": 2,
            "ts": "1736408883000050.000",
            "dur": 2.5,
            "args": {
                "Task Type": "AI_CORE",
                "Physic Stream Id": 2,
                "Task Id": 3,
                "Subtask Id": 4294967295,
                "Model Id": 4294967295,
                "connection_id": 812,
            },
        },
    ]
    path = tmp_path / "trace_view.json"
    path.write_text(json.dumps(events))
    df = MSPROF.parse(path).df.with_columns(pl.col(pl.Categorical).cast(pl.String))
    corr = dict(zip(df["name"], df["corr"]))
    assert corr == {"aten::add": None, "aten::add_inner": 812, "aclnnAdd_AddAiCore_Add": 812}
    assert df.filter(pl.col("name") == "aten::add")["args"].item() == '{"seq":12}'


def test_writers_refuse_overwrite_and_unknown_kinds(tmp_path: Path) -> None:
    events = build_ascend_scenario(steps=1, layers=1).events
    write_torch_npu(events, tmp_path)
    with pytest.raises(FileExistsError):
        write_torch_npu(events, tmp_path)
    write_prof(events, tmp_path)
    with pytest.raises(FileExistsError):
        write_prof(events, tmp_path)
    memset = events.with_columns(kind=pl.lit("memset"))
    with pytest.raises(ValueError, match="no Ascend form"):
        write_torch_npu(memset, tmp_path / "other")


# -- quirks, one test each ------------------------------------------------------------------------


def _out(folder: Path) -> Path:
    return folder / "ASCEND_PROFILER_OUTPUT"


def test_quirk_trailing_tab_in_timestamps(tmp_path: Path) -> None:
    events = build_ascend_scenario(steps=1, layers=1).events
    rank_dir = write_torch_npu(events, tmp_path)
    raw = (_out(rank_dir) / "kernel_details.csv").read_text()
    start = next(csv.DictReader(raw.splitlines()))["Start Time(us)"]
    assert start.endswith("\t")
    timeline = MSPROF.parse(rank_dir)
    first_kernel = events.filter(pl.col("kind") == "kernel").row(0, named=True)
    got = timeline.df.filter(pl.col("name").cast(pl.String) == first_kernel["name"]).row(
        0, named=True
    )
    assert got["ts"] + timeline.meta["origin_ns"] == EPOCH_NS + first_kernel["ts"]


@pytest.mark.parametrize("block_key", ["Block Dim", "Block Num"])
def test_quirk_block_dim_or_block_num(tmp_path: Path, block_key: str) -> None:
    events = build_ascend_scenario(steps=1, layers=1).events
    prof = write_prof(events, tmp_path, csv_only=True, block_key=block_key)
    header = next(iter((prof / "mindstudio_profiler_output").glob("op_summary_*.csv"))).read_text()
    assert block_key in header.splitlines()[0]
    df = MSPROF.parse(prof).df.with_columns(pl.col(pl.Categorical).cast(pl.String))
    kernels = df.filter(pl.col("kind") == "kernel").sort("ts")
    want = events.filter(pl.col("kind") == "kernel").sort("ts")
    blocks = kernels["args"].str.json_path_match("$.block_dim").cast(pl.Int64)
    assert (
        blocks.to_list() == want["args"].str.json_path_match("$.block_dim").cast(pl.Int64).to_list()
    )


def test_quirk_shapes_in_extra_quotes(tmp_path: Path) -> None:
    events = build_ascend_scenario(steps=1, layers=1).events
    rank_dir = write_torch_npu(events, tmp_path)
    assert '"""64,7168;64,7168;7168"""' in (_out(rank_dir) / "kernel_details.csv").read_text()
    df = MSPROF.parse(rank_dir).df.with_columns(pl.col(pl.Categorical).cast(pl.String))
    norm = df.filter(pl.col("name").str.contains("AddRmsNorm")).row(0, named=True)
    assert json.loads(norm["args"])["input_shapes"] == "64,7168;64,7168;7168"


def test_quirk_model_id_4294967295_is_no_model(tmp_path: Path) -> None:
    events = build_ascend_scenario(steps=1, layers=1).events
    rank_dir = write_torch_npu(events, tmp_path)
    rows = list(csv.DictReader((_out(rank_dir) / "kernel_details.csv").read_text().splitlines()))
    assert {r["Model ID"] for r in rows} == {"4294967295"}
    trace = (_out(rank_dir) / "trace_view.json").read_text()
    assert '"Model Id":4294967295' in trace
    df = MSPROF.parse(rank_dir).df
    assert not df["args"].drop_nulls().str.contains('"model_id"').any()


def test_quirk_na_streams_of_hccl_operators(tmp_path: Path) -> None:
    events = build_ascend_scenario(steps=1, layers=2, hccl_all_to_all_layers=2).events
    prof = write_prof(events, tmp_path, csv_only=True)
    summary = next(iter((prof / "mindstudio_profiler_output").glob("op_summary_*.csv")))
    rows = [r for r in csv.DictReader(summary.read_text().splitlines()) if r["Task Type"] == "HCCL"]
    assert rows and {(r["Stream ID"], r["Task ID"]) for r in rows} == {("N/A", "N/A")}
    df = MSPROF.parse(prof).df.with_columns(pl.col(pl.Categorical).cast(pl.String))
    comm = df.filter(pl.col("kind") == "comm")
    of_op = comm["args"].str.json_path_match("$.op")
    ops = comm.filter(of_op.is_null())
    assert ops.height == len(rows) and ops["stream"].null_count() == len(rows)
    # their hardware tasks (task_time: no connection id) are found by time on the HCCL stream
    tasks = comm.filter(of_op.is_not_null())
    assert Counter(tasks["args"].str.json_path_match("$.op")) == dict.fromkeys(ops["name"], 4)


def test_quirk_epoch_text_and_monotonic_floats_give_the_same_times(tmp_path: Path) -> None:
    events = build_ascend_scenario(steps=2, layers=1).events
    epoch = MSPROF.parse(write_prof(events, tmp_path / "a"))
    legacy_prof = write_prof(events, tmp_path / "b", layout="legacy")
    raw = next(iter(legacy_prof.rglob("msprof_*.json"))).read_text()
    assert '"ts":5' in raw and '"ts":"' not in raw  # floats of the monotonic clock
    legacy = MSPROF.parse(legacy_prof)
    assert "clock" in legacy.meta and legacy.meta["origin_ns"] is not None

    def kernels(t: Timeline) -> list[tuple[int, int, str]]:
        df = t.df.filter(pl.col("kind").cast(pl.String) == "kernel").sort("ts")
        return [
            (t.meta["origin_ns"] + ts, d, n)
            for ts, d, n in df.select("ts", "dur", pl.col("name").cast(pl.String)).iter_rows()
        ]

    assert kernels(legacy) == kernels(epoch)


@pytest.mark.parametrize(
    ("layout", "key"), [("legacy", "Stream Id"), ("msprof", "Physic Stream Id")]
)
def test_quirk_stream_id_or_physic_stream_id(tmp_path: Path, layout: str, key: str) -> None:
    events = build_ascend_scenario(steps=1, layers=1).events
    prof = write(events, tmp_path, layout)
    assert f'"{key}":' in next(iter(prof.rglob("msprof_*.json"))).read_text()
    timeline = MSPROF.parse(prof)
    assert timeline.meta["stream_id_key"] == [key]
    assert set(timeline.df["stream"].drop_nulls()) == set(events["stream"].drop_nulls())


def test_quirk_overlap_threads_matched_by_name(tmp_path: Path) -> None:
    events = build_ascend_scenario(steps=2, layers=2).events
    torch_npu = MSPROF.parse(write_torch_npu(events, tmp_path / "t"))
    prof = write_prof(events, tmp_path / "p")
    trace = json.loads(next(iter(prof.rglob("msprof_*.json"))).read_text())
    overlap_pid = next(
        e["pid"] for e in trace if e.get("args", {}).get("name") == "Overlap Analysis"
    )
    tids = {
        e["args"]["name"]: e["tid"]
        for e in trace
        if e.get("pid") == overlap_pid and e.get("name") == "thread_name"
    }
    assert tids["Computing"] == 2 and OVERLAP_ORDER["torch_npu"].index("Computing") == 0
    msprof = MSPROF.parse(prof)
    assert msprof.meta["overlap_analysis_ns"] == torch_npu.meta["overlap_analysis_ns"]
    totals = msprof.meta["overlap_analysis_ns"]
    kernels = events.filter(pl.col("kind") == "kernel")
    assert 0 < totals["Computing"] <= kernels["dur"].sum()
    assert totals["Communication"] >= totals["Communication(Not Overlapped)"] > 0


@pytest.mark.parametrize("level", ["Level0", "Level1"])
def test_quirk_missing_process_name(tmp_path: Path, level: str) -> None:
    events = build_ascend_scenario(steps=1, layers=1).events
    rank_dir = write_torch_npu(events, tmp_path, level=level)
    trace = json.loads((_out(rank_dir) / "trace_view.json").read_text())
    names = {e["args"]["name"] for e in trace if e.get("name") == "process_name"}
    assert ("CANN" in names) == (level == "Level1")
    timeline = MSPROF.parse(rank_dir)
    warned = any("no process_name event; read as CANN" in w for w in timeline.meta["warnings"])
    assert warned == (level == "Level0")
    apis = (timeline.df["kind"].cast(pl.String) == "api").sum()
    assert apis == (events["kind"] == "api").sum() * (level == "Level1")


# -- the writers' shape against the real samples --------------------------------------------------


def _header(path: Path) -> list[str]:
    with path.open(newline="") as fh:
        return next(csv.reader(fh))


def _shape(path: Path) -> dict[str, set[str]]:
    """Process names and args keys per process of a timeline JSON."""
    events = json.loads(path.read_text())
    procs = {e["pid"]: e["args"]["name"] for e in events if e.get("name") == "process_name"}
    keys: dict[str, set[str]] = {}
    for e in events:
        if e.get("ph") == "X" and e.get("pid") in procs:
            keys.setdefault(procs[e["pid"]], set()).update(e.get("args", {}))
    return keys


@pytest.mark.parametrize("level", ["level0", "level1"])
def test_torch_npu_writer_shape_equals_real(tmp_path: Path, level: str) -> None:
    real = real_file("ascend", f"{TORCH}/{level}/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT")
    events = build_ascend_scenario(steps=1, layers=2, unfused_collective=True).events
    mine = _out(write_torch_npu(events, tmp_path, level=level.capitalize()))
    real_header, my_header = (
        _header(real / "kernel_details.csv"),
        _header(mine / "kernel_details.csv"),
    )
    context = real_header.index("Context ID") + 1 if "Context ID" in real_header else None
    assert my_header[:context] == real_header[:context]
    assert set(my_header) <= set(real_header)
    assert _header(mine / "step_trace_time.csv") == _header(real / "step_trace_time.csv")
    assert (mine / "kernel_details.csv").read_bytes().count(b"\r\n") > 1  # CRLF, as torch_npu
    real_shape, my_shape = _shape(real / "trace_view.json"), _shape(mine / "trace_view.json")
    for process in ("Ascend Hardware", "HCCL", "CANN", "Python"):
        if process in my_shape:
            assert my_shape[process] <= real_shape[process], process
    if level == "level1":
        assert my_shape["Ascend Hardware"] == real_shape["Ascend Hardware"]
        assert _header(mine / "op_statistic.csv") == _header(real / "op_statistic.csv")
        assert _header(mine / "api_statistic.csv") == _header(real / "api_statistic.csv")


def test_prof_writer_shape_equals_real(tmp_path: Path) -> None:
    real = real_file(
        "ascend",
        "vllm_ascend_tmp_msprof_groupedmatmul_910B/PROF_000001_20260823165413436_00626258NIRJNPIC",
    )
    events = build_ascend_scenario(steps=1, layers=1).events
    mine = write_prof(events, tmp_path) / "mindstudio_profiler_output"
    for stem in ("task_time", "op_statistic", "api_statistic"):
        real_csv = next(iter((real / "mindstudio_profiler_output").glob(f"{stem}_*.csv")))
        assert _header(next(iter(mine.glob(f"{stem}_*.csv")))) == _header(real_csv)
    real_summary = _header(next(iter((real / "mindstudio_profiler_output").glob("op_summary_*"))))
    my_summary = _header(next(iter(mine.glob("op_summary_*.csv"))))
    context = real_summary.index("Context ID") + 1
    assert my_summary[: context + 2] == [
        *real_summary[:context],
        "aicore_time(us)",
        "aic_total_cycles",
    ]
    info = json.loads((mine.parent / "host" / "info.json").read_text())
    real_info = json.loads((real / "host" / "info.json").read_text())
    assert info["platform_version"] == real_info["platform_version"] == "5"


def test_legacy_writer_shape_equals_real(tmp_path: Path) -> None:
    real = real_file(
        "ascend", "mindinsight_msprof_PROF_2dev/PROF_000001_20230818142704322_COJGGGCANRMICFBC"
    )
    events = build_ascend_scenario(steps=1, layers=1, unfused_collective=True).events
    prof = write_prof(events, tmp_path, layout="legacy")
    real_dev, my_dev = real / "device_0", prof / "device_0"
    assert {p.name for p in my_dev.iterdir() if p.is_file()} >= {
        p.name for p in real_dev.iterdir() if p.is_file() and p.name != "end_info.0.done"
    }
    real_shape = _shape(real_dev / "timeline" / "msprof_0_2_1.json")
    my_shape = _shape(next(iter((my_dev / "timeline").glob("msprof_*.json"))))
    assert my_shape["Ascend Hardware"] <= real_shape["Ascend Hardware"]
    assert my_shape["HCCL"] <= real_shape["HCCL"]
    start = json.loads((my_dev / "start_info.0").read_text())
    assert set(start) == set(json.loads((real_dev / "start_info.0").read_text()))


def _tables(db: Path) -> dict[str, list[str]]:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        names = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        return {t: [r[1] for r in con.execute(f'PRAGMA table_info("{t}")')] for t in names}
    finally:
        con.close()


def test_db_writer_shape_equals_real(tmp_path: Path) -> None:
    real = real_file(
        "ascend",
        "msinsight_torchnpu_910B_2rank/db/level1/rank1_ascend_pt/ASCEND_PROFILER_OUTPUT/"
        "ascend_pytorch_profiler_1.db",
    )
    events = build_ascend_scenario(steps=1, layers=2, unfused_collective=True, rank=1).events
    mine = write_torch_npu_db(events, tmp_path) / "ASCEND_PROFILER_OUTPUT"
    real_tables, my_tables = _tables(real), _tables(mine / "ascend_pytorch_profiler_1.db")
    # every table written has the real one's columns, in order; the counters are left out
    assert {t: real_tables[t] for t in my_tables} == my_tables
    assert set(real_tables) - set(my_tables) <= {
        "ACC_PMU",
        "AICORE_FREQ",
        "ENUM_HCCL_RDMA_TYPE",
        "ENUM_MODULE",
        "ENUM_MSTX_EVENT_TYPE",
        "HBM",
        "LLC",
        "MEMORY_RECORD",
        "NPU_MEM",
        "NPU_MODULE_MEM",
        "NPU_OP_MEM",
        "OP_MEMORY",
        "PYTORCH_CALLCHAINS",
        "SOC_BANDWIDTH_LEVEL",
        "TASK_PMU_INFO",
    }
    info = json.loads(next(mine.parent.glob("profiler_info_*.json")).read_text())
    assert info["config"]["experimental_config"]["_export_type"] == "db"
