"""The rocprofv3 CSV and rocpd fixture writers: shape against rocprofiler-sdk, then round trips.

The writer checks read the files back with ``csv`` and ``sqlite3`` only; the shape checks
against the real samples run when $TRACEKIT_REAL_TRACES is set. The round trips (scenario ->
writer -> parser -> timeline equals the scenario as AMD records it) skip until the parser
modules exist.
"""

from __future__ import annotations

import csv
import re
import sqlite3
import statistics
from collections import Counter, defaultdict
from pathlib import Path

import polars as pl
import pytest

from fixtures.rocpd_writer import write_rocpd
from fixtures.rocprof_csv_writer import write_rocprofv3_csv
from fixtures.rocprof_names import FILL_BUFFER
from fixtures.rocprof_records import expected_timeline
from fixtures.scenario import build_scenario
from tests.conftest import real_file
from tracekit.timeline import Timeline

KNOBS = [
    {},
    {"steps": 2, "layers": 3, "fallback_kernel": True, "unfused_collective": True},
    {"steps": 3, "layers": 2, "exposed_all_to_all": True, "idle_bubble_ns": 75_000},
    {"steps": 1, "layers": 1, "pid": 77, "tid": 78, "seed": 9, "device": 3},
]
# Header lists of rocprofiler-sdk's generateCSV.cpp, typed out independently of the writer.
API = "Domain,Function,Process_Id,Thread_Id,Correlation_Id,Start_Timestamp,End_Timestamp"
HEADERS = {
    "kernel_trace": "Kind,Agent_Id,Queue_Id,Stream_Id,Thread_Id,Dispatch_Id,Kernel_Id,"
    "Kernel_Name,Correlation_Id,Start_Timestamp,End_Timestamp,LDS_Block_Size,Scratch_Size,"
    "VGPR_Count,Accum_VGPR_Count,SGPR_Count,Workgroup_Size_X,Workgroup_Size_Y,"
    "Workgroup_Size_Z,Grid_Size_X,Grid_Size_Y,Grid_Size_Z",
    "memory_copy_trace": "Kind,Direction,Stream_Id,Source_Agent_Id,Destination_Agent_Id,"
    "Correlation_Id,Start_Timestamp,End_Timestamp",
    "hip_api_trace": API,
    "marker_api_trace": API,
    "kernel_stats": "Name,Calls,TotalDurationNs,AverageNs,Percentage,MinNs,MaxNs,StdDev",
    "hip_api_stats": "Name,Calls,TotalDurationNs,AverageNs,Percentage,MinNs,MaxNs,StdDev",
    "memory_copy_stats": "Name,Calls,TotalDurationNs,AverageNs,Percentage,MinNs,MaxNs,StdDev",
}
# My file -> the real file whose header and quoting it must repeat.
REAL_CSV = {
    "kernel_trace": "rocprofv3_docs_sample_outputs/kernel_trace.csv",
    "memory_copy_trace": "rocprofv3_docs_sample_outputs/memory_copy_trace.csv",
    "hip_api_trace": "rocprofv3_docs_sample_outputs/hip_runtime_trace.csv",
    "marker_api_trace": "rocprofv3_docs_sample_outputs/marker_api_trace.csv",
    "kernel_stats": "rocprofv3_docs_sample_outputs/hip_api_stats.csv",
    "agent_info": "rocprofv3_agent_info_mi350x_flydsl/big_out_agent_info.csv",
}
REAL_DB = "rocpd_db_mi300x_ck_batched_gemm_hiptrace/28_results.db"
NUMBER = re.compile(r"-?\d+(\.\d+)?(e[+-]\d+)?")
UUID = re.compile(r"[0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12}")


@pytest.fixture(scope="module")
def scenario():
    return build_scenario(steps=3, layers=3, fallback_kernel=True)


@pytest.fixture(scope="module")
def csv_set(scenario, tmp_path_factory) -> dict[str, Path]:
    return write_rocprofv3_csv(scenario.events, tmp_path_factory.mktemp("csv"), "4242")


@pytest.fixture(scope="module")
def rocpd_db(scenario, tmp_path_factory) -> Path:
    return write_rocpd(scenario.events, tmp_path_factory.mktemp("db") / "4242_results.db")


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def _raw_lines(path: Path) -> list[str]:
    return path.read_text().splitlines()


def _fields(line: str) -> list[str]:
    """A CSV line split at the commas outside quotes, each field as written."""
    fields, start, quoted = [], 0, False
    for i, ch in enumerate(line):
        if ch == '"':
            quoted = not quoted
        elif ch == "," and not quoted:
            fields.append(line[start:i])
            start = i + 1
    return [*fields, line[start:]]


def _quoted(line: str) -> list[bool]:
    """Per field of a CSV line: was it written in quotes."""
    return [f.startswith('"') for f in _fields(line)]


# -- CSV writer --------------------------------------------------------------------------------


def test_csv_headers_match_rocprofiler(csv_set: dict[str, Path]) -> None:
    for stem, header in HEADERS.items():
        assert _raw_lines(csv_set[stem])[0] == ",".join(f'"{c}"' for c in header.split(","))
    assert len(_raw_lines(csv_set["agent_info"])[0].split(",")) == 53
    assert csv_set["kernel_trace"].name == "4242_kernel_trace.csv"


@pytest.mark.parametrize("stem", sorted(REAL_CSV))
def test_csv_header_and_quoting_equal_real_sample(csv_set: dict[str, Path], stem: str) -> None:
    real = _raw_lines(real_file("amd", REAL_CSV[stem]))
    mine = _raw_lines(csv_set[stem])
    assert mine[0] == real[0]
    assert _quoted(mine[1]) == _quoted(real[1])


def test_csv_numbers_bare_strings_quoted(csv_set: dict[str, Path]) -> None:
    for path in csv_set.values():
        for line in _raw_lines(path)[1:]:
            for field in _fields(line):
                assert field.startswith('"') or NUMBER.fullmatch(field), (path.name, field)


def test_csv_row_counts(scenario, csv_set: dict[str, Path]) -> None:
    counts = scenario.truth["counts"]
    kernels = _rows(csv_set["kernel_trace"])
    assert len(kernels) == counts["kernel"] + counts["memset"]
    assert sum(r["Kernel_Name"] == FILL_BUFFER for r in kernels) == counts["memset"]
    assert len(_rows(csv_set["memory_copy_trace"])) == counts["memcpy"]
    assert len(_rows(csv_set["hip_api_trace"])) == counts["api"]
    assert len(_rows(csv_set["marker_api_trace"])) == counts["range"]
    agents = _rows(csv_set["agent_info"])
    assert Counter(a["Agent_Type"] for a in agents) == {"CPU": 2, "GPU": 8}
    assert {a["Product_Name"] for a in agents if a["Agent_Type"] == "GPU"} == {
        "AMD Instinct MI300X"
    }
    assert "sync_trace" not in csv_set and "rccl_api_trace" not in csv_set


def test_csv_correlation_links(scenario, csv_set: dict[str, Path]) -> None:
    api = {int(r["Correlation_Id"]): r for r in _rows(csv_set["hip_api_trace"])}
    want = {"KERNEL": "hipLaunchKernel", "FILL": "hipMemsetAsync", "COPY": "hipMemcpyAsync"}
    device = [
        ("FILL" if r["Kernel_Name"] == FILL_BUFFER else "KERNEL", r)
        for r in _rows(csv_set["kernel_trace"])
    ]
    device += [("COPY", r) for r in _rows(csv_set["memory_copy_trace"])]
    for what, row in device:
        call = api[int(row["Correlation_Id"])]
        assert call["Function"] == want[what]
        assert int(call["Start_Timestamp"]) < int(row["Start_Timestamp"])
    assert {r["Function"] for r in api.values()} == {
        "hipLaunchKernel",
        "hipMemcpyAsync",
        "hipMemsetAsync",
        "hipEventRecord",
        "hipStreamWaitEvent",
        "hipStreamSynchronize",
    }
    markers = _rows(csv_set["marker_api_trace"])
    assert not {int(m["Correlation_Id"]) for m in markers} & set(api)
    assert [m["Function"] for m in markers] == [f"decode_step_{i}" for i in range(3)]
    dispatch = sorted(int(r["Dispatch_Id"]) for _, r in device if _ != "COPY")
    assert dispatch == list(range(1, len(dispatch) + 1))


def test_csv_agents_and_queues(csv_set: dict[str, Path]) -> None:
    gpu_nodes = {
        int(a["Node_Id"]) for a in _rows(csv_set["agent_info"]) if a["Agent_Type"] == "GPU"
    }
    kernels = _rows(csv_set["kernel_trace"])
    assert {r["Agent_Id"] for r in kernels} == {f"Agent {min(gpu_nodes)}"}
    assert {(int(r["Queue_Id"]), int(r["Stream_Id"])) for r in kernels} == {
        (7, 1),
        (13, 2),
        (21, 3),
    }
    copies = _rows(csv_set["memory_copy_trace"])
    assert {(r["Direction"], r["Source_Agent_Id"], r["Destination_Agent_Id"]) for r in copies} == {
        ("MEMORY_COPY_HOST_TO_DEVICE", "Agent 0", "Agent 2"),
        ("MEMORY_COPY_DEVICE_TO_HOST", "Agent 2", "Agent 0"),
    }
    for r in kernels:
        assert int(r["LDS_Block_Size"]) % 512 == 0 and int(r["LDS_Block_Size"]) <= 65536
        assert int(r["VGPR_Count"]) + int(r["Accum_VGPR_Count"]) <= 512
        assert int(r["Grid_Size_X"]) % int(r["Workgroup_Size_X"]) == 0


def test_kernel_stats_consistent(csv_set: dict[str, Path]) -> None:
    durations: dict[str, list[int]] = defaultdict(list)
    for r in _rows(csv_set["kernel_trace"]):
        durations[r["Kernel_Name"]].append(int(r["End_Timestamp"]) - int(r["Start_Timestamp"]))
    stats = _rows(csv_set["kernel_stats"])
    assert {s["Name"] for s in stats} == set(durations)
    grand = sum(sum(d) for d in durations.values())
    totals = [int(s["TotalDurationNs"]) for s in stats]
    assert totals == sorted(totals, reverse=True)
    for s in stats:
        d = durations[s["Name"]]
        assert (int(s["Calls"]), int(s["TotalDurationNs"])) == (len(d), sum(d))
        assert (int(s["MinNs"]), int(s["MaxNs"])) == (min(d), max(d))
        assert s["AverageNs"] == f"{sum(d) / len(d):.6f}"
        std = statistics.stdev(d) if len(d) > 1 else 0.0
        assert float(s["StdDev"]) == pytest.approx(std, rel=1e-9, abs=1e-6)
        share = sum(d) / grand * 100
        assert s["Percentage"] == (
            f"{share:.2f}" if share >= 1 else f"{share:.4f}" if share > 0.01 else f"{share:.3e}"
        )


def test_csv_variants(tmp_path: Path) -> None:
    events = build_scenario(steps=1, layers=1).events
    plain = write_rocprofv3_csv(events, tmp_path / "plain")
    quoted = write_rocprofv3_csv(events, tmp_path / "quoted", quote_all=True)
    for line in _raw_lines(quoted["kernel_trace"]):
        assert all(_quoted(line))
    assert _rows(quoted["kernel_trace"]) == _rows(plain["kernel_trace"])
    guid = "0000ddb5-8903-7903-b269-cd8d3745bb8a"
    with_guid = write_rocprofv3_csv(events, tmp_path / "guid", guid=guid)
    assert _raw_lines(with_guid["hip_api_trace"])[0].startswith('"Guid","Domain"')
    assert {r["Guid"] for r in _rows(with_guid["kernel_trace"])} == {guid}
    ranges = write_rocprofv3_csv(events, tmp_path / "r72", marker_domain="MARKER_CORE_RANGE_API")
    assert {r["Domain"] for r in _rows(ranges["marker_api_trace"])} == {"MARKER_CORE_RANGE_API"}
    again = write_rocprofv3_csv(events, tmp_path / "plain", overwrite=True)
    assert again["kernel_trace"].read_bytes() == plain["kernel_trace"].read_bytes()


def test_writers_refuse_overwrite_and_unknown_kinds(tmp_path: Path) -> None:
    events = build_scenario(steps=1, layers=1).events
    write_rocprofv3_csv(events, tmp_path)
    with pytest.raises(FileExistsError):
        write_rocprofv3_csv(events, tmp_path)
    write_rocpd(events, tmp_path / "a.db")
    with pytest.raises(FileExistsError):
        write_rocpd(events, tmp_path / "a.db")
    ops = events.with_columns(kind=pl.lit("op"))
    with pytest.raises(ValueError, match="op"):
        write_rocpd(ops, tmp_path / "b.db")
    with pytest.raises(ValueError, match="device index 9"):
        write_rocprofv3_csv(events.with_columns(device=pl.lit(9, pl.Int32)), tmp_path / "c")


# -- rocpd writer ------------------------------------------------------------------------------


def _db(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True)


def _master(db: sqlite3.Connection) -> dict[tuple[str, str], str]:
    """sqlite_master by (type, name) with the uuid folded, so two databases compare."""
    rows = db.execute("SELECT type, name, sql FROM sqlite_master").fetchall()
    return {(t, UUID.sub("<uuid>", n)): UUID.sub("<uuid>", s or "") for t, n, s in rows}


def test_rocpd_schema_v3(rocpd_db: Path) -> None:
    with _db(rocpd_db) as db:
        meta = dict(db.execute("SELECT tag, value FROM rocpd_metadata"))
        assert meta["schema_version"] == "3"
        assert meta["uuid"] == "_" + meta["guid"].replace("-", "_")
        master = _master(db)
        tables = {n for t, n in master if t == "table" and n != "sqlite_sequence"}
        views = {n for t, n in master if t == "view"}
        assert len(tables) == 20 and all(n.endswith("_<uuid>") for n in tables)
        assert {n.removesuffix("_<uuid>") for n in tables} <= views
        assert {
            "kernels",
            "regions",
            "memory_copies",
            "region_args",
            "top_kernels",
            "busy",
        } <= views
        assert db.execute("PRAGMA foreign_key_check").fetchall() == []
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)


def test_rocpd_schema_equals_real_sample(rocpd_db: Path) -> None:
    real = real_file("amd", REAL_DB)
    with _db(real) as a, _db(rocpd_db) as b:
        assert _master(b) == _master(a)
        assert b.execute("PRAGMA page_size").fetchone() == a.execute("PRAGMA page_size").fetchone()


def test_rocpd_views_answer(scenario, rocpd_db: Path) -> None:
    counts = scenario.truth["counts"]
    with _db(rocpd_db) as db:
        one = lambda sql: db.execute(sql).fetchone()[0]  # noqa: E731
        assert one("SELECT count(*) FROM kernels") == counts["kernel"] + counts["memset"]
        assert (
            one("SELECT count(*) FROM regions WHERE category = 'HIP_RUNTIME_API_EXT'")
            == (counts["api"])
        )
        ranges = db.execute(
            "SELECT name, extdata FROM regions WHERE category = 'MARKER_CORE_RANGE_API'"
        ).fetchall()
        assert ranges == [
            ("roctxThreadRangeA", f'{{"message":"decode_step_{i}"}}') for i in range(3)
        ]
        assert one("SELECT count(*) FROM memory_copies") == counts["memcpy"]
        assert one("SELECT sum(total_calls) FROM top_kernels") == one(
            "SELECT count(*) FROM kernels"
        )
        links = db.execute(
            "SELECT R.name, count(*) FROM kernels K JOIN regions R ON R.stack_id = K.stack_id "
            "WHERE K.corr_id = 0 AND R.corr_id = 0 GROUP BY R.name ORDER BY R.name"
        ).fetchall()
        assert links == [
            ("hipLaunchKernel", counts["kernel"]),
            ("hipMemsetAsync", counts["memset"]),
        ]
        launch = one("SELECT min(id) FROM regions WHERE name = 'hipLaunchKernel'")
        names = [r[0] for r in db.execute(f"SELECT name FROM region_args WHERE id = {launch}")]
        assert names == ["function_address", "numBlocks", "dimBlocks", "args", "sharedMemBytes",
                         "stream"]  # fmt: skip
        gpus = db.execute(
            "SELECT absolute_index, type_index, product_name, name FROM rocpd_info_agent "
            "WHERE type = 'GPU' ORDER BY absolute_index"
        ).fetchall()
        assert gpus == [(2 + i, i, "AMD Instinct MI300X", "gfx942") for i in range(8)]
        queues = db.execute(
            "SELECT DISTINCT queue_id, queue, stream FROM kernels ORDER BY 1"
        ).fetchall()
        # named in order of first use: the comm queue (21) dispatches before the shared one
        assert queues == [
            (7, "Queue 0", "Stream 0"),
            (13, "Queue 2", "Stream 2"),
            (21, "Queue 1", "Stream 1"),
        ]


def test_rocpd_and_csv_hold_the_same_records(csv_set: dict[str, Path], rocpd_db: Path) -> None:
    from_csv = sorted(
        (r["Kernel_Name"], int(r["Start_Timestamp"]), int(r["End_Timestamp"]), int(r["Queue_Id"]),
         int(r["Correlation_Id"]), int(r["Dispatch_Id"]), f"Agent {r['Agent_Id'].split()[1]}")
        for r in _rows(csv_set["kernel_trace"])
    )  # fmt: skip
    with _db(rocpd_db) as db:
        from_db = sorted(
            (n, s, e, q, c, d, f"Agent {a}")
            for n, s, e, q, c, d, a in db.execute(
                "SELECT name, start, end, queue_id, stack_id, dispatch_id, agent_abs_index "
                "FROM kernels"
            )
        )
        api = sorted(
            db.execute(
                "SELECT name, stack_id, start, end, tid FROM regions WHERE category LIKE 'HIP%'"
            )
        )
    assert from_db == from_csv
    assert api == sorted(
        (r["Function"], int(r["Correlation_Id"]), int(r["Start_Timestamp"]),
         int(r["End_Timestamp"]), int(r["Thread_Id"]))
        for r in _rows(csv_set["hip_api_trace"])
    )  # fmt: skip


# -- round trips through the parsers -------------------------------------------------------------

COMPARE = {"ts": pl.Int64, "dur": pl.Int64, "kind": pl.String, "name": pl.String,
           "device": pl.Int32, "stream": pl.Int64, "corr": pl.Int64}  # fmt: skip


def _canonical(df: pl.DataFrame) -> pl.DataFrame:
    """The compared columns, ts from the first row, sorted. roctx ranges and marks are
    compared with their correlation id too: every reader keeps the one rocprofiler-sdk
    recorded for the marker call."""
    df = df.with_columns(pl.col(pl.Categorical).cast(pl.String)).select(
        pl.col(c).cast(t) for c, t in COMPARE.items()
    )
    return df.with_columns(ts=pl.col("ts") - pl.col("ts").min()).sort(
        list(COMPARE), nulls_last=True
    )


def _with_marks(events: pl.DataFrame) -> pl.DataFrame:
    """The scenario plus a roctxMarkA instant 500 ns into every step."""
    marks = events.filter(pl.col("kind") == "range").with_columns(
        kind=pl.lit("marker"),
        dur=pl.lit(0, pl.Int64),
        ts=pl.col("ts") + 500,
        name=pl.lit("token_ready"),
    )
    return pl.concat([events, marks]).sort("ts", maintain_order=True)


def _check_meta(timeline, device: int) -> None:
    assert timeline.validate() == []
    assert timeline.meta["warnings"] == []
    assert timeline.meta["origin_ns"] is None  # the boot clock is no epoch
    gpus = {d["index"]: d for d in timeline.meta["devices"]}
    assert gpus[device]["name"] == "AMD Instinct MI300X"
    assert gpus[device]["vendor"] == "AMD" and gpus[device]["cores"] == 304


@pytest.mark.parametrize("knobs", KNOBS, ids=lambda k: ",".join(k) or "default")
def test_csv_round_trip_equals_scenario(tmp_path: Path, knobs: dict) -> None:
    rocprof = pytest.importorskip("tracekit.parsers.rocprof")
    from tracekit.parsers.probe import Probe

    events = build_scenario(**knobs).events
    files = write_rocprofv3_csv(events, tmp_path, "123")
    assert rocprof.ROCPROFV3_CSV.sniff(Probe(tmp_path))
    assert rocprof.ROCPROFV3_CSV.sniff(Probe(files["kernel_trace"]))
    timeline = rocprof.ROCPROFV3_CSV.parse(tmp_path)
    _check_meta(timeline, knobs.get("device", 0))
    want = _canonical(expected_timeline(events))
    assert _canonical(timeline.df).equals(want)
    assert _canonical(rocprof.ROCPROFV3_CSV.parse(files["kernel_trace"]).df).equals(want)


@pytest.mark.parametrize(
    "variant",
    [
        {"marker_domain": "MARKER_CORE_RANGE_API"},
        {"quote_all": True},
        {"guid": "0000ddb5-8903-7903-b269-cd8d3745bb8a"},
    ],
    ids=["rocm7-markers", "quote-all", "rocpd-guid"],
)
def test_csv_variants_round_trip(tmp_path: Path, variant: dict) -> None:
    rocprof = pytest.importorskip("tracekit.parsers.rocprof")
    events = _with_marks(build_scenario(steps=2, layers=2).events)
    write_rocprofv3_csv(events, tmp_path, **variant)
    timeline = rocprof.ROCPROFV3_CSV.parse(tmp_path)
    assert _canonical(timeline.df).equals(_canonical(expected_timeline(events)))


@pytest.mark.parametrize("knobs", KNOBS, ids=lambda k: ",".join(k) or "default")
def test_rocpd_round_trip_equals_scenario(tmp_path: Path, knobs: dict) -> None:
    rocpd = pytest.importorskip("tracekit.parsers.rocprof.rocpd")
    from tracekit.parsers.probe import Probe

    events = build_scenario(**knobs).events
    path = write_rocpd(events, tmp_path / "123_results.db")
    assert rocpd.ROCPD.sniff(Probe(path))
    timeline = rocpd.ROCPD.parse(path)
    _check_meta(timeline, knobs.get("device", 0))
    assert _canonical(timeline.df).equals(_canonical(expected_timeline(events)))


def test_rocpd_roctx_ranges_and_marks_round_trip(tmp_path: Path) -> None:
    """Range names come from the event's ``{"message": …}``; marks from ``rocpd_sample``."""
    rocpd = pytest.importorskip("tracekit.parsers.rocprof.rocpd")
    events = _with_marks(build_scenario(steps=2, layers=1).events)
    timeline = rocpd.ROCPD.parse(write_rocpd(events, tmp_path / "m.db"))
    assert timeline.meta["warnings"] == []
    assert _canonical(timeline.df).equals(_canonical(expected_timeline(events)))
    marks = timeline.df.filter(pl.col("kind").cast(pl.String).is_in(["range", "marker"])).sort("ts")
    assert marks["name"].cast(pl.String).to_list() == [
        "decode_step_0",
        "token_ready",
        "decode_step_1",
        "token_ready",
    ]


@pytest.mark.parametrize("domain", ["MARKER_CORE_API", "MARKER_CORE_RANGE_API"])
def test_csv_and_rocpd_of_one_run_agree(tmp_path: Path, domain: str) -> None:
    """The CSV set and the rocpd file of one run give the same rows, roctx ranges and marks
    with the same correlation id: rocprofiler-sdk writes ``correlation_id.internal`` both as
    the CSV ``Correlation_Id`` and as the rocpd ``rocpd_event.stack_id``."""
    rocprof = pytest.importorskip("tracekit.parsers.rocprof")
    events = _with_marks(build_scenario(steps=2, layers=2).events)
    write_rocprofv3_csv(events, tmp_path / "csv", "4242", marker_domain=domain)
    from_csv = rocprof.ROCPROFV3_CSV.parse(tmp_path / "csv")
    from_db = rocprof.ROCPD.parse(write_rocpd(events, tmp_path / "run.db"))
    assert from_csv.meta["clock"] == from_db.meta["clock"]
    cols = ["ts", "dur", "kind", "name", "device", "stream", "tid", "corr"]

    def rows(tl: Timeline) -> pl.DataFrame:
        df = tl.df.with_columns(pl.col(pl.Categorical).cast(pl.String))
        host = pl.col("device") == -1
        return df.select(*cols, pid=pl.when(host).then("pid")).sort([*cols, "pid"], nulls_last=True)

    csv_rows, db_rows = rows(from_csv), rows(from_db)
    assert csv_rows.equals(db_rows)
    kinds = dict(db_rows.group_by("kind").len().iter_rows())
    assert kinds == {"api": 124, "kernel": 74, "memcpy": 4, "range": 2, "marker": 2}
    marks = db_rows.filter(pl.col("kind").is_in(["range", "marker"])).sort("ts")
    assert marks.select("kind", "name", "corr").rows() == [
        ("range", "decode_step_0", 1125),
        ("marker", "token_ready", 1126),
        ("range", "decode_step_1", 1127),
        ("marker", "token_ready", 1128),
    ]
    launches = db_rows.filter(pl.col("name") == "hipLaunchKernel")["corr"]
    assert launches.is_in(marks["corr"].implode()).sum() == 0  # marker ids link no launch
