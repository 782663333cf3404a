"""Legacy rocprof v1/v2 parsers against the real samples and generated results.csv files.

References: the profiler's own stats files (results.stats.csv, .hip_stats.csv,
.copy_stats.csv), plain sqlite3 over results.db, the MANIFEST counts, and csv/json reads.
"""

from __future__ import annotations

import csv
import json
import re
import shutil
import sqlite3
from pathlib import Path

import polars as pl
import pytest

from tests.conftest import one_line, real_files, sha256, sql_rows
from tracekit.errors import TraceError
from tracekit.parsers import kineto
from tracekit.parsers.probe import Probe
from tracekit.parsers.rocprof.legacy import (
    ROCPROF_V1_CSV,
    ROCPROF_V1_DB,
    ROCPROF_V1_DIR,
    ROCPROF_V1_JSON,
)
from tracekit.parsers.rocprof.rocpd import ROCPD
from tracekit.timeline import Timeline

FOLDERS = real_files("amd", "rocprof_v1_*")
MANIFEST = {  # HIP API calls, copies, kernels (MANIFEST.md #5 and #6)
    "rocprof_v1_hiptrace_rocmblogs_pytorch_vecadd": (135, 6, 1),
    "rocprof_v1_hiptrace_hip_vecadd_small": (13, 3, 1),
}
READERS = {
    "db": (ROCPROF_V1_DB, "results.db"),
    "json": (ROCPROF_V1_JSON, "results.json"),
    "dir": (ROCPROF_V1_DIR, ""),
}
ALL = (ROCPROF_V1_DIR, ROCPROF_V1_DB, ROCPROF_V1_JSON, ROCPROF_V1_CSV, ROCPD)


def _load(folder: Path, reader: str) -> Timeline:
    parser, name = READERS[reader]
    return parser.parse(folder / name if name else folder)


def _kinds(tl: Timeline, *kinds: str) -> pl.DataFrame:
    df = tl.df.with_columns(pl.col("kind", "name", "engine").cast(pl.String))
    return df.filter(pl.col("kind").is_in(kinds))


def _stats(path: Path) -> dict[str, tuple[int, int]]:
    with path.open(newline="") as fh:
        return {r["Name"]: (int(r["Calls"]), int(r["TotalDurationNs"])) for r in csv.DictReader(fh)}


def _per_name(df: pl.DataFrame) -> dict[str, tuple[int, int]]:
    rows = df.group_by("name").agg(pl.len(), pl.col("dur").sum()).rows()
    return {name: (calls, total) for name, calls, total in rows}


@pytest.mark.parametrize("reader", list(READERS))
@pytest.mark.parametrize("folder", FOLDERS)
def test_counts_equal_manifest_and_sql(folder: Path, reader: str) -> None:
    before = {p.name: sha256(p) for p in folder.iterdir()}
    tl = _load(folder, reader)
    assert tl.validate() == [] and tl.meta["warnings"] == []
    api, copies, kernels = MANIFEST[folder.name]
    db = folder / "results.db"
    assert _kinds(tl, "api").height == api == sql_rows(db, "SELECT count(*) FROM HIP")[0][0]
    assert _kinds(tl, "memcpy").height == copies == sql_rows(db, "SELECT count(*) FROM COPY")[0][0]
    assert _kinds(tl, "kernel").height == kernels == sql_rows(db, "SELECT count(*) FROM OPS")[0][0]
    assert tl.meta["format"] == ("rocprof-v1-json" if reader == "json" else "rocprof-v1-db")
    assert tl.meta["origin_ns"] is None and tl.meta["clock"]["domain"] == "HSA system clock"
    assert {p.name: sha256(p) for p in folder.iterdir()} == before


@pytest.mark.parametrize("reader", list(READERS))
@pytest.mark.parametrize("folder", FOLDERS)
def test_totals_equal_the_stats_files(folder: Path, reader: str) -> None:
    tl = _load(folder, reader)
    assert _per_name(_kinds(tl, "api")) == _stats(folder / "results.hip_stats.csv")
    assert _per_name(_kinds(tl, "memcpy", "memset")) == _stats(folder / "results.copy_stats.csv")
    assert _per_name(_kinds(tl, "kernel")) == _stats(folder / "results.stats.csv")


@pytest.mark.parametrize("reader", ["db", "json"])
@pytest.mark.parametrize("folder", FOLDERS)
def test_api_links_equal_the_db_index(folder: Path, reader: str) -> None:
    """Every copy and kernel joins the HIP call that rocprof's Index column names."""
    want = sorted(
        sql_rows(
            folder / "results.db",
            'SELECT d.BeginNs, h.BeginNs FROM (SELECT "Index", BeginNs FROM COPY UNION ALL'
            ' SELECT "Index", BeginNs FROM OPS) d JOIN HIP h ON h."Index" = d."Index"',
        )
    )
    tl = _load(folder, reader)
    zero = tl.meta["clock"]["zero_ns"]
    device = _kinds(tl, "memcpy", "kernel")
    joined = device.join(_kinds(tl, "api"), on=["pid", "corr"], suffix="_api")
    assert joined.height == device.height == len(want)
    assert sorted((a + zero, b + zero) for a, b in joined.select("ts", "ts_api").rows()) == want


@pytest.mark.parametrize("folder", FOLDERS)
def test_json_rows_equal_db_rows(folder: Path) -> None:
    cols = ["ts", "dur", "kind", "name", "device", "stream", "pid", "tid", "engine"]
    a = _kinds(_load(folder, "db"), "api", "memcpy", "kernel").select(cols).sort(cols)
    b = _kinds(_load(folder, "json"), "api", "memcpy", "kernel").select(cols).sort(cols)
    assert a.equals(b)


@pytest.mark.parametrize("folder", FOLDERS)
def test_json_with_numbers_as_numbers(folder: Path, tmp_path: Path) -> None:
    """Re-serialised traces with numeric args read the same (lenient decoding)."""
    data = json.loads((folder / "results.json").read_text())
    for event in data["traceEvents"]:
        for key, value in (event.get("args") or {}).items():
            if isinstance(value, str) and value.isdigit():
                event["args"][key] = int(value)
    (tmp_path / "results.json").write_text(json.dumps(data))
    cols = ["ts", "dur", "kind", "name", "device", "stream", "pid", "tid", "corr"]
    strict = _load(folder, "json").df.select(cols)
    assert ROCPROF_V1_JSON.parse(tmp_path / "results.json").df.select(cols).equals(strict)


@pytest.mark.parametrize("folder", FOLDERS)
def test_devices_from_rocminfo(folder: Path) -> None:
    text = (folder / "results.sysinfo.txt").read_text()
    blocks = re.split(r"\n\*+\s*\nAgent \d+\s*\n\*+\s*\n", text)[1:]
    gpus = []
    for block in blocks:
        fields = dict(re.findall(r"^  ([^:\n]+?):\s+(.*?)\s*$", block, re.M))
        if fields.get("Device Type") == "GPU":
            gpus.append(
                (int(fields["Node"]), fields["Marketing Name"], int(fields["Compute Unit"]))
            )
    gpus.sort()
    for reader in ("db", "json"):
        tl = _load(folder, reader)
        got = [(d["node_id"], d["name"], d["cores"]) for d in tl.meta["devices"]]
        assert got == gpus and [d["index"] for d in tl.meta["devices"]] == list(range(len(gpus)))
        dev_ids = {r[0] for r in sql_rows(folder / "results.db", 'SELECT "dev-id" FROM OPS')}
        node_to_index = {node: i for i, (node, _, _) in enumerate(gpus)}
        assert set(_kinds(tl, "kernel")["device"]) == {node_to_index[n] for n in dev_ids}


@pytest.mark.parametrize("folder", FOLDERS)
def test_negative_durations_are_clamped(folder: Path, tmp_path: Path) -> None:
    db = tmp_path / "results.db"
    shutil.copyfile(folder / "results.db", db)
    con = sqlite3.connect(db)
    con.execute('UPDATE HIP SET EndNs = BeginNs - 100 WHERE "Index" = 1')
    con.execute("UPDATE COPY SET EndNs = BeginNs - 7 WHERE rowid = 1")
    con.commit()
    con.close()
    tl = ROCPROF_V1_DB.parse(db)
    assert tl.validate() == []
    assert "1 API rows end before they start; read as 0 ns" in tl.meta["warnings"]
    assert "1 memcpy rows end before they start; read as 0 ns" in tl.meta["warnings"]
    data = json.loads((folder / "results.json").read_text())
    for event in data["traceEvents"]:
        if event.get("ph") == "X" and event["pid"] == "1":
            event["args"]["EndNs"] = str(int(event["args"]["BeginNs"]) - 7)
            break
    (tmp_path / "results.json").write_text(json.dumps(data))
    tl = ROCPROF_V1_JSON.parse(tmp_path / "results.json")
    assert "1 memcpy rows end before they start; read as 0 ns" in tl.meta["warnings"]
    assert _kinds(tl, "memcpy")["dur"].min() == 0


@pytest.mark.parametrize("folder", FOLDERS)
def test_folder_prefers_db_then_json_then_csv(folder: Path, tmp_path: Path) -> None:
    for name in ("results.db", "results.json", "results.sysinfo.txt"):
        shutil.copyfile(folder / name, tmp_path / name)
    _write_v1_csv(tmp_path / "results.csv", _kernel_rows())
    assert ROCPROF_V1_DIR.sniff(Probe(tmp_path))
    assert ROCPROF_V1_DIR.parse(tmp_path).meta["format"] == "rocprof-v1-db"
    (tmp_path / "results.db").unlink()
    assert ROCPROF_V1_DIR.parse(tmp_path).meta["format"] == "rocprof-v1-json"
    (tmp_path / "results.json").unlink()
    assert ROCPROF_V1_DIR.parse(tmp_path).meta["format"] == "rocprof-v1-csv"
    other = tmp_path / "other"
    other.mkdir()
    shutil.copyfile(folder / "results.json", other / "myrun.json")
    shutil.copyfile(folder / "results.sysinfo.txt", other / "myrun.sysinfo.txt")
    tl = ROCPROF_V1_DIR.parse(other)
    assert tl.meta["format"] == "rocprof-v1-json" and tl.meta["devices"]


@pytest.mark.parametrize("folder", FOLDERS)
def test_each_file_is_sniffed_by_its_parser_only(folder: Path) -> None:
    assert [p.name for p in ALL if p.sniff(Probe(folder))] == ["rocprof-v1"]
    assert [p.name for p in ALL if p.sniff(Probe(folder / "results.db"))] == ["rocprof-v1-db"]
    json_file = folder / "results.json"
    assert [p.name for p in ALL if p.sniff(Probe(json_file))] == ["rocprof-v1-json"]
    assert not kineto.sniff(Probe(json_file))
    for stats in folder.glob("*.csv"):
        assert not any(p.sniff(Probe(stats)) for p in ALL)


# -- results.csv: generated from rocprof's documented columns -------------------------------

V1_HEADER = (
    "Index,KernelName,gpu-id,queue-id,queue-index,pid,tid,grd,wgr,lds,scr,arch_vgpr,"
    "accum_vgpr,sgpr,wave_size,sig,obj,SQ_WAVES,DispatchNs,BeginNs,EndNs,CompleteNs,"
    "DurationNs"
)
OLD_HEADER = (
    "Index,KernelName,gpu-id,queue-id,queue-index,pid,tid,grd,wgr,lds,scr,vgpr,sgpr,"
    "fbar,sig,obj,DispatchNs,BeginNs,EndNs,CompleteNs,"
)
V2_HEADER = (
    "Dispatch_ID,GPU_ID,Queue_ID,PID,TID,Grid_Size,Workgroup_Size,LDS_Per_Workgroup,"
    "Scratch_Per_Workitem,Arch_VGPR,Accum_VGPR,SGPR,Wave_Size,Kernel_Name,"
    "Start_Timestamp,End_Timestamp,Correlation_ID,Counters"
)
NAMES = (
    '"void gemm<float>(float const*, float*, int) [clone .kd]"',
    '"rms_norm_kernel.kd"',
    '"ncclDevKernel_Generic(ncclDevKernelArgsStorage<4096ul>) [clone .kd]"',
)


def _kernel_rows() -> list[dict[str, int | str]]:
    rows = []
    begin = 1_594_244_102_859_719
    for i in range(12):
        dur = 1_000 + 37 * i
        rows.append({"index": i, "name": NAMES[i % 3], "gpu": i % 2, "queue": i % 2,
                     "grd": 65536 >> (i % 3), "wgr": 256, "lds": 512 * (i % 2), "vgpr": 20 + i,
                     "sgpr": 16, "begin": begin, "end": begin + dur})  # fmt: skip
        begin += 5_000
    rows[5]["end"] = int(rows[5]["begin"]) - 40  # a negative duration
    return rows


def _write_v1_csv(path: Path, rows: list[dict[str, int | str]]) -> None:
    lines = [V1_HEADER]
    for r in rows:
        lines.append(
            f"{r['index']},{r['name']},{r['gpu']},{r['queue']},{r['index']},4242,4243,{r['grd']},"
            f"{r['wgr']},{r['lds']},0,{r['vgpr']},4,{r['sgpr']},64,0x0,0x7f2b4d282500,"
            f"2048.0000000000,{int(r['begin']) - 900},{r['begin']},{r['end']},"
            f"{int(r['end']) + 50},{int(r['end']) - int(r['begin'])}"
        )
    path.write_text("\n".join(lines) + "\n")


def _expected(path: Path, name_col: str, begin: str, end: str) -> dict[str, tuple[int, int]]:
    out: dict[str, tuple[int, int]] = {}
    with path.open(newline="") as fh:
        for row in csv.DictReader(fh):
            if not row.get(name_col):
                continue
            calls, total = out.get(row[name_col], (0, 0))
            out[row[name_col]] = (calls + 1, total + max(int(row[end]) - int(row[begin]), 0))
    return out


def test_v1_results_csv(tmp_path: Path) -> None:
    path = tmp_path / "results.csv"
    _write_v1_csv(path, _kernel_rows())
    assert [p.name for p in ALL if p.sniff(Probe(path))] == ["rocprof-v1-csv"]
    tl = ROCPROF_V1_CSV.parse(path)
    assert tl.validate() == [] and tl.meta["format"] == "rocprof-v1-csv"
    kernels = _kinds(tl, "kernel")
    assert kernels.height == 12 == len(tl)
    assert _per_name(kernels) == _expected(path, "KernelName", "BeginNs", "EndNs")
    assert tl.meta["warnings"] == ["1 kernel rows end before they start; read as 0 ns"]
    first = kernels.sort("ts").row(0, named=True)
    assert first["name"] == "void gemm<float>(float const*, float*, int) [clone .kd]"
    assert (first["ts"], first["dur"], first["device"], first["stream"], first["pid"]) == (
        0, 1000, 0, 0, 4242)  # fmt: skip
    assert json.loads(first["args"]) == {"dispatch": 0, "grid": 65536, "workgroup": 256,
                                         "lds": 0, "scratch": 0, "vgpr": 20, "accum_vgpr": 4,
                                         "sgpr": 16, "wave_size": 64}  # fmt: skip
    assert sorted(kernels["device"].unique()) == [0, 1]
    assert tl.meta["clock"]["zero_ns"] == 1_594_244_102_859_719


def test_old_v1_csv_with_trailing_commas(tmp_path: Path) -> None:
    path = tmp_path / "results.csv"
    lines = [OLD_HEADER]
    for r in _kernel_rows():
        lines.append(
            f"{r['index']},{r['name']},{r['gpu']},{r['queue']},0,11,12,{r['grd']},{r['wgr']},"
            f"{r['lds']},0,{r['vgpr']},{r['sgpr']},0,0x7fa90163e700,0x0,"
            f"{int(r['begin']) - 10},{r['begin']},{r['end']},{int(r['end']) + 5},"
        )
    path.write_text("\n".join(lines) + "\n")
    tl = ROCPROF_V1_CSV.parse(path)
    assert len(tl) == 12
    assert _per_name(_kinds(tl, "kernel")) == _expected(path, "KernelName", "BeginNs", "EndNs")
    assert json.loads(_kinds(tl, "kernel").sort("ts")["args"][0])["vgpr"] == 20


def test_rocprofv2_kernel_csv(tmp_path: Path) -> None:
    path = tmp_path / "results_4242.csv"
    lines = [V2_HEADER, ""]
    for r in _kernel_rows():
        lines.append(
            f"{r['index']},{r['gpu']},{r['queue']},4242,4243,{r['grd']},{r['wgr']},{r['lds']},0,"
            f"{r['vgpr']},0,{r['sgpr']},64,{r['name']},{r['begin']},{r['end']},"
            f"{100 + int(r['index'])},"
        )
    path.write_text("\n".join(lines) + "\n")
    assert ROCPROF_V1_CSV.sniff(Probe(path))
    tl = ROCPROF_V1_CSV.parse(path)
    kernels = _kinds(tl, "kernel")
    assert kernels.height == 12
    want = _expected(path, "Kernel_Name", "Start_Timestamp", "End_Timestamp")
    assert _per_name(kernels) == want
    assert sorted(kernels["corr"]) == list(range(100, 112))


def test_stats_run_db_with_kern_and_roctx(tmp_path: Path) -> None:
    """``rocprof --stats --roctx-trace``: kernels in KERN (gpu-id = GPU index), rocTX rows."""
    db = tmp_path / "results.db"
    con = sqlite3.connect(db)
    con.execute(
        'CREATE TABLE KERN ("Index" INTEGER, "KernelName" TEXT, "gpu-id" INTEGER,'
        ' "queue-id" INTEGER, "queue-index" INTEGER, "pid" INTEGER, "tid" INTEGER,'
        ' "grd" INTEGER, "wgr" INTEGER, "lds" INTEGER, "scr" INTEGER, "arch_vgpr" INTEGER,'
        ' "accum_vgpr" INTEGER, "sgpr" INTEGER, "wave_size" INTEGER, "sig" INTEGER,'
        ' "obj" INTEGER, "DispatchNs" INTEGER, "BeginNs" INTEGER, "EndNs" INTEGER,'
        ' "CompleteNs" INTEGER, "DurationNs" INTEGER)'
    )
    rows = [(i, f'"{NAMES[i % 3][1:-1]}"', i % 2, 0, i, 7, 8, 4096, 256, 0, 0, 16, 0, 24, 64,
             "0x0", "0x7f00", 900 + 1000 * i, 1000 + 1000 * i, 1500 + 1000 * i, 1600 + 1000 * i,
             500) for i in range(6)]  # fmt: skip
    con.executemany(f"INSERT INTO KERN VALUES ({','.join('?' * 22)})", rows)
    con.execute(
        'CREATE TABLE rocTX ("BeginNs" INTEGER, "EndNs" INTEGER, "pid" INTEGER,'
        ' "tid" INTEGER, "Name" TEXT, "Index" INTEGER, "__section" INTEGER, "__lane" INTEGER)'
    )
    con.executemany(
        "INSERT INTO rocTX VALUES (?,?,7,8,?,?,0,8)",
        [(950, 6000, "step 0", 0), (3000, 3001, "token", 1)],
    )
    con.commit()
    con.close()
    tl = ROCPROF_V1_DB.parse(db)
    assert tl.validate() == [] and tl.meta["warnings"] == []
    kernels = _kinds(tl, "kernel").sort("ts")
    assert kernels.height == 6 and set(kernels["device"]) == {0, 1}
    assert kernels["name"][0] == "void gemm<float>(float const*, float*, int) [clone .kd]"
    assert (kernels["ts"][0], kernels["dur"].sum()) == (50, 3000)
    want = {"dispatch": 0, "grid": 4096, "workgroup": 256, "lds": 0, "scratch": 0, "vgpr": 16,
            "accum_vgpr": 0, "sgpr": 24, "wave_size": 64}  # fmt: skip
    assert json.loads(kernels["args"][0]) == want
    assert _kinds(tl, "range").select("name", "ts", "dur").rows() == [("step 0", 0, 5050)]
    assert _kinds(tl, "marker").select("name", "ts", "dur").rows() == [("token", 2050, 0)]


# -- bad input ------------------------------------------------------------------------------


@pytest.mark.parametrize("folder", FOLDERS)
def test_results_db_missing_its_tables(folder: Path, tmp_path: Path) -> None:
    db = tmp_path / "results.db"
    shutil.copyfile(folder / "results.db", db)
    con = sqlite3.connect(db)
    for table in ("HIP", "OPS", "COPY", "KERN"):
        con.execute(f"DROP TABLE {table}")
    con.execute("CREATE TABLE notes (x TEXT)")
    con.commit()
    con.close()
    with pytest.raises(TraceError) as exc:
        ROCPROF_V1_DB.parse(db)
    one_line(exc, "none of the rocprof tables", "results.db")


def test_results_db_with_empty_tables(tmp_path: Path) -> None:
    db = tmp_path / "results.db"
    con = sqlite3.connect(db)
    con.execute('CREATE TABLE KERN ("Index" INTEGER, "KernelName" TEXT)')
    con.execute(
        'CREATE TABLE HIP ("BeginNs" INTEGER, "EndNs" INTEGER, "pid" INTEGER,'
        ' "tid" INTEGER, "Name" TEXT, "args" TEXT, "Index" INTEGER)'
    )
    con.commit()
    con.close()
    assert ROCPROF_V1_DB.sniff(Probe(db))
    with pytest.raises(TraceError) as exc:
        ROCPROF_V1_DB.parse(db)
    one_line(exc, "holds no rows")


@pytest.mark.parametrize("folder", FOLDERS)
def test_truncated_results_json(folder: Path, tmp_path: Path) -> None:
    data = (folder / "results.json").read_bytes()
    path = tmp_path / "results.json"
    path.write_bytes(data[: len(data) // 2])
    assert ROCPROF_V1_JSON.sniff(Probe(path))
    with pytest.raises(TraceError) as exc:
        ROCPROF_V1_JSON.parse(path)
    one_line(exc, "not valid JSON", "truncated")


def test_results_json_without_events(tmp_path: Path) -> None:
    path = tmp_path / "results.json"
    path.write_text('{ "traceEvents":[{}\n,{"args":{"name":"CPU HIP API"},"ph":"M","pid":2}\n]}')
    assert ROCPROF_V1_JSON.sniff(Probe(path))
    with pytest.raises(TraceError) as exc:
        ROCPROF_V1_JSON.parse(path)
    one_line(exc, "holds no events")


def test_counter_csv_without_timestamps(tmp_path: Path) -> None:
    path = tmp_path / "results.csv"
    path.write_text(
        "Index,KernelName,gpu-id,queue-id,queue-index,pid,tid,grd,wgr,lds,scr,vgpr,sgpr,fbar,"
        "sig,obj,TCC_EA_WRREQ_sum\n"
        '0,"copy_kernel(float*, float*, int, int) [clone .kd]",0,0,0,94670,94673,16777216,'
        "1024,0,0,4,24,0,0x0,0x7faee2c09880,1048576.0000000000\n"
    )
    with pytest.raises(TraceError) as exc:
        ROCPROF_V1_CSV.parse(path)
    one_line(exc, "counters only", "--timestamp on")
