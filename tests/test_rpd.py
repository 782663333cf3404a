"""rocmProfileData ``.rpd`` files: the public samples (ground truth from plain sqlite3 on the
same file), fixtures of schema v2 and v3 (and a v1 file derived from one), gzip, bad input."""

from __future__ import annotations

import gzip
import json
import shutil
import sqlite3
import tempfile
from pathlib import Path

import polars as pl
import pytest

from fixtures.rpd_writer import expected_rpd, write_rpd
from fixtures.scenario import build_scenario
from tests.conftest import one_line, run_cli, sha256, sql_rows
from tracekit import load
from tracekit.errors import TraceError
from tracekit.parsers import registry
from tracekit.parsers.probe import Probe
from tracekit.parsers.rocprof.rpd import RPD
from tracekit.timeline import Timeline

DATA = Path(__file__).parent / "data" / "real" / "amd_rpd"
MATMUL = DATA / "matmul_result.rpd"
MYTRACE = DATA / "mytrace.rpd.gz"
COLUMNS = ["ts", "dur", "kind", "name", "device", "stream", "corr", "pid", "tid"]
OP_SQL = (
    "SELECT o.start, o.end - o.start, CASE WHEN d.string = '' THEN k.string ELSE d.string END,"
    " o.gpuId, o.queueId, k.string, (SELECT min(api_id) FROM rocpd_api_ops l WHERE l.op_id ="
    " o.id) FROM rocpd_op o JOIN rocpd_string d ON d.id = o.description_id"
    " JOIN rocpd_string k ON k.id = o.opType_id"
)
KIND_OF = {"KernelExecution": "kernel", "Task": "kernel", "FillBuffer": "memset"}


@pytest.fixture(scope="module")
def mytrace_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``mytrace.rpd.gz`` inflated with gzip itself: the ground truth's copy."""
    path = tmp_path_factory.mktemp("rpd") / "mytrace.rpd"
    path.write_bytes(gzip.decompress(MYTRACE.read_bytes()))
    return path


def _rows(tl: Timeline) -> pl.DataFrame:
    """The timeline's rows on the file's clock (absolute ns), kinds as text and names as the
    file holds them (``load`` demangles mangled names and keeps the raw one in args)."""
    raw = pl.col("args").str.json_path_match("$.mangled_name")
    return tl.df.with_columns(
        kind=pl.col("kind").cast(pl.String),
        name=pl.coalesce(raw, pl.col("name").cast(pl.String)),
        ts=pl.col("ts") + tl.meta["clock"]["zero_ns"],
    )


def _device_truth(db: Path) -> pl.DataFrame:
    rows = sql_rows(db, OP_SQL)
    frame = pl.DataFrame(
        rows, schema=["ts", "dur", "name", "device", "stream", "type", "corr"], orient="row"
    )
    kind = pl.col("type").replace_strict(KIND_OF, default="memcpy", return_dtype=pl.String)
    return frame.with_columns(kind=kind).select(
        "ts", "dur", "kind", "name", "device", "stream", "corr"
    )


@pytest.mark.parametrize("source", ["matmul", "mytrace"])
def test_real_sample_device_rows_equal_sqlite(source: str, mytrace_db: Path) -> None:
    path, db = (MATMUL, MATMUL) if source == "matmul" else (MYTRACE, mytrace_db)
    before = sha256(path)
    tl = load(path)
    assert tl.validate() == [] and tl.meta["warnings"] == []
    assert tl.meta["format"] == "rpd" and tl.meta["producer"]["schema_version"] == "2"
    assert tl.meta["origin_ns"] is None and tl.meta["clock"]["domain"] == "CLOCK_MONOTONIC"
    assert [d["index"] for d in tl.meta["devices"]] == [2]
    assert tl.meta["devices"][0]["vendor"] == "AMD"
    cols = ["ts", "dur", "kind", "name", "device", "stream", "corr"]
    got = _rows(tl).filter(pl.col("device") >= 0).select(cols)
    want = _device_truth(db)
    assert got.height == want.height == sql_rows(db, "SELECT count(*) FROM rocpd_op")[0][0]
    assert got.sort(cols).equals(want.cast(got.schema).sort(cols))  # type: ignore[arg-type]
    assert sha256(path) == before


def test_matmul_counts_and_totals() -> None:
    tl = load(MATMUL)
    by_kind = dict(_rows(tl).group_by("kind").agg(pl.len()).rows())
    assert by_kind == {"api": 120, "kernel": 29, "memcpy": 55, "memset": 1, "range": 5}
    ops = sql_rows(
        MATMUL,
        "SELECT k.string, count(*), sum(o.end - o.start) FROM rocpd_op o"
        " JOIN rocpd_string k ON k.id = o.opType_id GROUP BY 1",
    )
    assert dict((t, (n, s)) for t, n, s in ops)["KernelExecution"] == (29, 26_399_795)
    kernels = _rows(tl).filter(pl.col("kind") == "kernel")
    assert (kernels.height, kernels["dur"].sum()) == (29, 26_399_795)
    api = sql_rows(MATMUL, "SELECT count(*) FROM rocpd_api")[0][0]
    assert _rows(tl).filter(pl.col("device") == -1).height == api == 125
    first = kernels.sort("ts").row(0, named=True)
    assert first["name"].startswith("Cijk_Ailk_Bljk_SB_MT128x64x16_MI32x32x2x1")
    assert json.loads(first["args"]) == {"op_type": "KernelExecution", "grid": [1792, 782, 1],
                                         "workgroup": [256, 1, 1], "lds": 0, "scratch": 0,
                                         "hip_stream": "0x0"}  # fmt: skip
    copy = _rows(tl).filter(pl.col("kind") == "memcpy").sort("ts").row(0, named=True)
    assert json.loads(copy["args"]) == {
        "op_type": "CopyHostToDevice",
        "bytes": 2_000_000_000,
        "copy_kind": "HtoD",
        "hip_stream": "0x0",
    }
    # a launch links its call and its op by the call's id
    call = _rows(tl).filter(pl.col("corr") == first["corr"], pl.col("kind") == "api")
    assert call["name"].to_list() == ["hipExtModuleLaunchKernel"]


def test_mytrace_roctx_graphs_and_links(mytrace_db: Path) -> None:
    tl = load(MYTRACE)
    rows = _rows(tl)
    marks = sql_rows(
        mytrace_db,
        "SELECT count(*), sum(a.start < a.end) FROM rocpd_api a JOIN"
        " rocpd_string s ON s.id = a.apiName_id AND s.string ="
        " 'UserMarker'",
    )[0]
    roctx = rows.filter(pl.col("kind").is_in(["range", "marker"]), pl.col("corr").is_null())
    named = roctx.filter(~pl.col("name").str.contains("::writeRows|hcc_activity|rpdflush"))
    assert marks == (11_884, 11_884)
    assert rows.filter(pl.col("kind") == "marker").height == 0
    api_total = sql_rows(mytrace_db, "SELECT count(*) FROM rocpd_api")[0][0]
    assert rows.filter(pl.col("device") == -1).height == api_total == 14_736
    assert named.filter(pl.col("name") == "aten::empty").height == sql_rows(
        mytrace_db, "SELECT count(*) FROM rocpd_api a JOIN rocpd_string s ON s.id = a.args_id"
        " WHERE s.string = 'aten::empty'")[0][0]  # fmt: skip
    graph = sql_rows(
        mytrace_db,
        "SELECT l.api_id, count(*) FROM rocpd_api_ops l JOIN rocpd_api a"
        " ON a.id = l.api_id JOIN rocpd_string s ON s.id = a.apiName_id"
        " WHERE s.string = 'hipGraphLaunch' GROUP BY 1",
    )
    per_corr = dict(rows.filter(pl.col("device") >= 0).group_by("corr").agg(pl.len()).rows())
    assert len(graph) == 20 and all(per_corr[api] == n for api, n in graph)
    assert max(n for _, n in graph) == 418
    assert min(api for api, _ in graph) > 1 << 32  # session 1: ids offset by 2^32
    tasks = rows.filter(pl.col("args").str.contains('"op_type":"Task"'))
    assert tasks.height == 7_720 and set(tasks["kind"]) == {"kernel"}


def test_gzip_equals_plain(mytrace_db: Path) -> None:
    """The inflated copy lives in a temporary folder that is gone after the load."""
    temp = Path(tempfile.gettempdir())
    before = sorted(temp.glob("tracekit-rpd-*"))
    assert load(MYTRACE).df.equals(load(mytrace_db).df)
    assert sorted(temp.glob("tracekit-rpd-*")) == before


@pytest.mark.parametrize("path", [MATMUL, MYTRACE], ids=["rpd", "rpd.gz"])
def test_sniffed_by_rpd_only(path: Path) -> None:
    assert [p.name for p in registry() if p.sniff(Probe(path))] == ["rpd"]


# -- fixtures --------------------------------------------------------------------------------

SCENARIOS = [
    {"steps": 2, "layers": 2},
    {"steps": 3, "layers": 2, "fallback_kernel": True, "idle_bubble_ns": 50_000},
]


@pytest.mark.parametrize("version", ["2", "3"])
@pytest.mark.parametrize(("session", "gpu_offset"), [(0, 0), (1, 2)])
@pytest.mark.parametrize("knobs", SCENARIOS, ids=["small", "faults"])
def test_fixture_round_trip(
    version: str, session: int, gpu_offset: int, knobs: dict, tmp_path: Path
) -> None:
    events = build_scenario(**knobs).events
    path = write_rpd(
        events, tmp_path / "trace.rpd", version=version, session=session, gpu_offset=gpu_offset
    )
    assert [p.name for p in registry() if p.sniff(Probe(path))] == ["rpd"]
    tl = load(path)
    assert tl.validate() == [] and tl.meta["warnings"] == []
    assert tl.meta["producer"]["schema_version"] == version
    assert tl.meta["producer"]["sessions"] == session + 1
    want = expected_rpd(events, version=version, session=session, gpu_offset=gpu_offset)
    got = _rows(tl).select(want.columns).sort("ts", "kind", "name", "corr", nulls_last=True)
    assert got.equals(want)
    kernels = events.filter(pl.col("kind").is_in(["kernel", "comm"]))
    assert got.filter(pl.col("kind") == "kernel").height == kernels.height
    assert got.filter(pl.col("kind") == "kernel")["dur"].sum() == kernels["dur"].sum()


def test_fixture_tables_as_the_tracer_writes_them(tmp_path: Path) -> None:
    events = build_scenario(steps=1, layers=1).events
    v2 = write_rpd(events, tmp_path / "v2.rpd", version="2", session=1)
    v3 = write_rpd(events, tmp_path / "v3.rpd", version="3")
    assert sql_rows(
        v2,
        "SELECT typeof(width), typeof(codeObject_id) FROM rocpd_copyapi, rocpd_kernelapi LIMIT 1",
    ) == [("text", "text")]
    assert sql_rows(
        v2,
        "SELECT min(a.id) FROM rocpd_api a JOIN rocpd_string s ON"
        " s.id = a.apiName_id WHERE s.string = 'UserMarker'",
    )[0][0] == ((1 << 32) + (1 << 31) + 1)
    assert sql_rows(v3, "SELECT value FROM rocpd_metadata WHERE tag = 'schema_version'") == [("3",)]
    assert sql_rows(
        v3, "SELECT count(*) FROM rocpd_api WHERE args_id NOT IN (SELECT id FROM rocpd_ustring)"
    ) == [(0,)]
    for db in (v2, v3):  # the schema's own views work on the rows
        kernels = sql_rows(db, "SELECT count(*), sum(duration) FROM kernel")[0]
        ops = sql_rows(
            db,
            "SELECT count(*), sum(o.end - o.start) FROM rocpd_op o JOIN"
            " rocpd_string k ON k.id = o.opType_id AND k.string ="
            " 'KernelExecution'",
        )[0]
        assert kernels == ops and kernels[0] > 0


def test_schema_v1_arguments_on_ops(tmp_path: Path) -> None:
    """A pre-2022 file: kernel and copy arguments keyed by the op, no schema_version."""
    events = build_scenario(steps=1, layers=2).events
    path = write_rpd(events, tmp_path / "v1.rpd", version="2")
    con = sqlite3.connect(path)
    con.executescript(
        'CREATE TABLE "rocpd_kernelop" ("op_ptr_id" integer NOT NULL PRIMARY KEY, "gridX" integer'
        ' NOT NULL, "gridY" integer NOT NULL, "gridz" integer NOT NULL, "workgroupX" integer NOT'
        ' NULL, "workgroupY" integer NOT NULL, "workgroupZ" integer NOT NULL, "groupSegmentSize"'
        ' integer NOT NULL, "privateSegmentSize" integer NOT NULL, "kernelArgAddress"'
        ' varchar(18) NOT NULL, "aquireFence" varchar(8) NOT NULL, "releaseFence" varchar(8)'
        ' NOT NULL, "codeObject_id" integer NOT NULL, "kernelName_id" integer NOT NULL);'
        "INSERT INTO rocpd_kernelop SELECT l.op_id, gridX, gridY, gridZ, workgroupX, workgroupY,"
        " workgroupZ, groupSegmentSize, privateSegmentSize, '', '', '', '', kernelName_id FROM"
        " rocpd_kernelapi k JOIN rocpd_api_ops l ON l.api_id = k.api_ptr_id;"
        "DROP VIEW kernel; DROP VIEW copy; DROP VIEW copyop; DROP TABLE rocpd_kernelapi;"
        " DROP TABLE rocpd_copyapi; DELETE FROM rocpd_metadata WHERE tag = 'schema_version';"
    )
    con.commit()
    con.close()
    tl = load(path)
    assert tl.meta["producer"]["schema_version"] == "1" and tl.meta["warnings"] == []
    want = expected_rpd(events)
    got = _rows(tl).select(want.columns).sort("ts", "kind", "name", "corr", nulls_last=True)
    assert got.equals(want)
    args = [
        json.loads(a)
        for a in got.join(_rows(tl), on=["ts", "name", "kind"]).filter(pl.col("kind") == "kernel")[
            "args"
        ]
    ]
    assert all({"grid", "workgroup", "lds"} <= set(a) for a in args)


def test_rocprofiler_sdk_rocpd_is_not_claimed(tmp_path: Path) -> None:
    """The rocprofiler-sdk rocpd database shares the prefix, not the tables."""
    from fixtures.rocpd_writer import write_rocpd

    path = write_rocpd(build_scenario(steps=1, layers=1).events, tmp_path / "1_results.db")
    assert [p.name for p in registry() if p.sniff(Probe(path))] == ["rocpd"]


# -- bad input -------------------------------------------------------------------------------


def test_truncated_rpd(tmp_path: Path) -> None:
    path = tmp_path / "trace.rpd"
    data = MATMUL.read_bytes()
    path.write_bytes(data[: len(data) // 3])
    done = run_cli("info", str(path))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "corrupt or truncated" in lines[0], done.stderr


def test_truncated_gzip(tmp_path: Path) -> None:
    path = tmp_path / "trace.rpd.gz"
    data = MYTRACE.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    assert RPD.sniff(Probe(path))
    with pytest.raises(TraceError) as exc:
        load(path)
    one_line(exc, "trace.rpd.gz", "gzip", "truncated or corrupt")
    done = run_cli("info", str(path))
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1


def test_garbage_named_rpd(tmp_path: Path) -> None:
    path = tmp_path / "trace.rpd"
    path.write_bytes(bytes(range(256)) * 64)
    with pytest.raises(TraceError) as exc:
        load(path)
    one_line(exc, "not a recognised trace")


def test_gzip_of_garbage(tmp_path: Path) -> None:
    path = tmp_path / "trace.rpd.gz"
    path.write_bytes(gzip.compress(b"SQLite format 3\x00" + b"rocpd_api_ops rocpd_op" * 100))
    with pytest.raises(TraceError) as exc:
        load(path)
    one_line(exc, "trace.rpd.gz")


def test_rpd_without_rows(tmp_path: Path) -> None:
    path = tmp_path / "empty.rpd"
    con = sqlite3.connect(path)
    con.executescript((Path(__file__).parents[1] / "fixtures" / "rpd_schema_v2.sql").read_text())
    con.commit()
    con.close()
    with pytest.raises(TraceError) as exc:
        load(path)
    one_line(exc, "holds no API calls or GPU ops")


def test_rpd_missing_its_string_table(tmp_path: Path) -> None:
    path = tmp_path / "t.rpd"
    shutil.copyfile(MATMUL, path)
    con = sqlite3.connect(path)
    con.executescript(
        "DROP VIEW api; DROP VIEW op; DROP VIEW kernel; DROP VIEW top;"
        " DROP VIEW ktop; DROP VIEW copy; DROP VIEW copyop; DROP VIEW busy;"
        " DROP TABLE rocpd_string;"
    )
    con.commit()
    con.close()
    with pytest.raises(TraceError) as exc:
        load(path)
    one_line(exc, "rocpd_string")
