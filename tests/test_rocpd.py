"""The rocpd parser against the real rocprofv3 database, checked with plain sqlite3.

Variants (merged uuid sets, plain table names, markers, memory copies, external
correlation ids, another schema version) are built from a copy of the sample in tmp_path.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import polars as pl
import pytest

from tests.conftest import real_files, sha256, sql_rows
from tracekit.errors import TraceError
from tracekit.parsers.probe import Probe
from tracekit.parsers.rocprof.rocpd import ROCPD
from tracekit.timeline import Timeline

SAMPLES = real_files("amd", "rocpd_db_*/*.db")


def _kind(tl: Timeline, kind: str) -> pl.DataFrame:
    return tl.df.with_columns(pl.col("kind", "name").cast(pl.String)).filter(pl.col("kind") == kind)


def _copy(path: Path, tmp_path: Path) -> tuple[Path, sqlite3.Connection, str]:
    """A writable copy of the sample, a connection to it and its uuid suffix."""
    target = tmp_path / "copy.db"
    shutil.copyfile(path, target)
    con = sqlite3.connect(target)
    suffix = con.execute("SELECT value FROM rocpd_metadata WHERE tag = 'uuid'").fetchone()[0]
    return target, con, suffix


@pytest.mark.parametrize("path", SAMPLES)
def test_counts_and_categories_equal_sql(path: Path) -> None:
    before = sha256(path)
    assert ROCPD.sniff(Probe(path))
    tl = ROCPD.parse(path)
    assert tl.validate() == []
    assert tl.meta["format"] == "rocpd" and tl.meta["producer"]["schema_version"] == "3"
    kernels = _kind(tl, "kernel")
    api = _kind(tl, "api")
    assert kernels.height == sql_rows(path, "SELECT count(*) FROM kernels")[0][0] == 151
    assert api.height == sql_rows(path, "SELECT count(*) FROM regions")[0][0] == 629
    categories = dict(sql_rows(path, "SELECT category, count(*) FROM regions GROUP BY 1"))
    assert categories == {"HIP_COMPILER_API_EXT": 304, "HIP_RUNTIME_API_EXT": 325}
    got = api.select(pl.col("args").str.json_path_match("$.category")).to_series().value_counts()
    assert dict(got.rows()) == categories
    assert _kind(tl, "memcpy").height == sql_rows(path, "SELECT count(*) FROM memory_copies")[0][0]
    assert tl.meta["origin_ns"] is None and tl.meta["clock"]["domain"] == "CLOCK_BOOTTIME"
    assert sha256(path) == before


@pytest.mark.parametrize("path", SAMPLES)
def test_launches_join_their_kernels(path: Path) -> None:
    """corr = the internal correlation (stack_id): 150 hipLaunchKernel <-> kernel pairs."""
    pairs = sql_rows(
        path,
        "SELECT r.start, k.start FROM regions r JOIN kernels k ON r.stack_id = k.stack_id"
        " WHERE r.name = 'hipLaunchKernel'",
    )
    assert len(pairs) == 150
    assert sql_rows(path, "SELECT count(*) FROM regions WHERE corr_id != 0")[0][0] == 0
    tl = ROCPD.parse(path)
    zero = tl.meta["clock"]["zero_ns"]
    launches = _kind(tl, "api").filter(pl.col("name") == "hipLaunchKernel")
    joined = launches.join(_kind(tl, "kernel"), on=["pid", "corr"], suffix="_k")
    assert joined.height == 150
    got = sorted((a + zero, k + zero) for a, k in joined.select("ts", "ts_k").rows())
    assert got == sorted(pairs)


@pytest.mark.parametrize("path", SAMPLES)
def test_kernel_rows_equal_sql(path: Path) -> None:
    tl = ROCPD.parse(path)
    zero = tl.meta["clock"]["zero_ns"]
    kernels = _kind(tl, "kernel")
    per_name = dict(sql_rows(path, 'SELECT name, sum("end" - start) FROM kernels GROUP BY name'))
    got = dict(kernels.group_by("name").agg(pl.col("dur").sum()).rows())
    assert got == per_name
    rows = sql_rows(
        path,
        "SELECT start, agent_type_index, queue_id, stream_id, grid_x, grid_y, grid_z,"
        " workgroup_x, lds_size, scratch_size, vgpr_count, sgpr_count FROM kernels",
    )
    want = sorted(
        (s - zero, d, q, {"hip_stream": h, "grid": [gx, gy, gz], "workgroup0": wx, "lds": lds,
                          "scratch": scr, "vgpr": v, "sgpr": sg})
        for s, d, q, h, gx, gy, gz, wx, lds, scr, v, sg in rows
    )  # fmt: skip
    mine = []
    for ts, device, stream, args in kernels.select("ts", "device", "stream", "args").rows():
        a = json.loads(args)
        keep = {k: a[k] for k in ("hip_stream", "grid", "lds", "scratch", "vgpr", "sgpr")}
        mine.append((ts, device, stream, {**keep, "workgroup0": a["workgroup"][0]}))
    assert sorted(mine, key=str) == sorted(want, key=str)
    assert kernels["engine"].cast(pl.String).unique().to_list() == ["sm"]


@pytest.mark.parametrize("path", SAMPLES)
def test_agents_become_devices(path: Path) -> None:
    tl = ROCPD.parse(path)
    gpus = sql_rows(
        path,
        "SELECT type_index, product_name, absolute_index FROM rocpd_info_agent"
        " WHERE type = 'GPU' ORDER BY type_index",
    )
    devices = tl.meta["devices"]
    assert [(d["index"], d["name"], d["node_id"]) for d in devices] == gpus
    assert {d["cores"] for d in devices} == {304} and {d["vendor"] for d in devices} == {"AMD"}
    assert _kind(tl, "kernel")["device"].unique().to_list() == [0]  # agent node 2 = GPU 0


@pytest.mark.parametrize("path", SAMPLES)
def test_other_schema_version_is_refused(path: Path, tmp_path: Path) -> None:
    target, con, suffix = _copy(path, tmp_path)
    con.execute(f"UPDATE rocpd_metadata{suffix} SET value = '2' WHERE tag = 'schema_version'")
    con.commit()
    con.close()
    with pytest.raises(TraceError) as err:
        ROCPD.parse(target)
    message = str(err.value)
    assert "\n" not in message
    assert "schema version 2 found" in message and "version 3" in message


def test_rpd_style_database_is_refused(tmp_path: Path) -> None:
    """rocmProfileData .rpd files also have rocpd_* tables, with schema version 2."""
    path = tmp_path / "trace.rpd"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE rocpd_metadata (id INTEGER PRIMARY KEY, tag TEXT, value TEXT)")
    con.execute("INSERT INTO rocpd_metadata (tag, value) VALUES ('schema_version', '2')")
    con.execute("CREATE TABLE rocpd_string (id INTEGER PRIMARY KEY, string TEXT)")
    con.execute("CREATE TABLE rocpd_op (id INTEGER PRIMARY KEY, gpuId INTEGER)")
    con.commit()
    con.close()
    assert ROCPD.sniff(Probe(path))
    with pytest.raises(TraceError, match=r"rocpd schema version 2 found; tracekit reads"):
        ROCPD.parse(path)


@pytest.mark.parametrize("path", SAMPLES)
def test_two_uuid_sets_are_both_read(path: Path, tmp_path: Path) -> None:
    target, con, suffix = _copy(path, tmp_path)
    other = "_11111111_2222_3333_4444_555555555555"
    tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    for name in tables:
        if name.endswith(suffix):
            con.execute(f'CREATE TABLE "{name[: -len(suffix)]}{other}" AS SELECT * FROM "{name}"')
    con.execute(f"UPDATE rocpd_info_process{other} SET pid = 29")
    con.commit()
    con.close()
    tl = ROCPD.parse(target)
    assert _kind(tl, "kernel").height == 302
    assert _kind(tl, "api").height == 1258
    assert sorted(p["pid"] for p in tl.meta["processes"]) == [28, 29]
    launches = _kind(tl, "api").filter(pl.col("name") == "hipLaunchKernel")
    assert launches.join(_kind(tl, "kernel"), on=["pid", "corr"]).height == 300


@pytest.mark.parametrize("path", SAMPLES)
def test_plain_tables_without_uuid(path: Path, tmp_path: Path) -> None:
    """Files whose tables carry no uuid suffix (and no views) read the same rows."""
    target, con, suffix = _copy(path, tmp_path)
    for (view,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'view'").fetchall():
        con.execute(f'DROP VIEW "{view}"')
    tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    for name in tables:
        if name.endswith(suffix):
            con.execute(f'ALTER TABLE "{name}" RENAME TO "{name[: -len(suffix)]}"')
    con.commit()
    con.close()
    plain, original = ROCPD.parse(target), ROCPD.parse(path)
    cols = ["ts", "dur", "kind", "name", "device", "stream", "pid", "tid", "corr", "args"]
    assert plain.df.select(cols).equals(original.df.select(cols))


@pytest.mark.parametrize("path", SAMPLES)
def test_markers_copies_and_external_ids(path: Path, tmp_path: Path) -> None:
    """As generateRocpd.cpp writes them: roctx ranges are regions whose event extdata holds
    the message, instants (start == end) are rocpd_sample rows on a per-thread track."""
    target, con, s = _copy(path, tmp_path)
    strings = {}
    for text in ("MARKER_CORE_RANGE_API", "roctxThreadRangeA", "MEMORY_COPY_HOST_TO_DEVICE",
                 "HIP_RUNTIME_API_EXT", "MARKER_CORE_API", "roctxRangePop"):  # fmt: skip
        con.execute(f"INSERT OR IGNORE INTO rocpd_string{s} (string) VALUES (?)", (text,))
        query = f"SELECT id FROM rocpd_string{s} WHERE string = ?"
        strings[text] = con.execute(query, (text,)).fetchone()[0]
    start = sql_rows(path, "SELECT min(start) FROM regions")[0][0]
    ev = []
    for category, stack, ext, extdata in (
        ("MARKER_CORE_RANGE_API", 9001, 0, '{"message": "decode step 1"}'),
        ("MARKER_CORE_RANGE_API", 9002, 0, '{"message": "token_ready"}'),
        ("MARKER_CORE_RANGE_API", 9003, 77, "{}"),
        ("HIP_RUNTIME_API_EXT", 9004, 0, "{}"),
        ("MARKER_CORE_API", 9005, 0, "{}"),
    ):
        cur = con.execute(
            f"INSERT INTO rocpd_event{s} (category_id, stack_id, correlation_id, extdata)"
            " VALUES (?,?,?,?)",
            (strings[category], stack, ext, extdata),
        )
        ev.append(cur.lastrowid)
    nid = sql_rows(path, "SELECT id FROM rocpd_info_node")[0][0]
    con.execute(
        f"INSERT INTO rocpd_region{s} (nid, pid, tid, start, end, name_id, event_id)"
        " VALUES (?, 28, 28, ?, ?, ?, ?)",
        (nid, start + 10, start + 500, strings["roctxThreadRangeA"], ev[0]),
    )
    con.execute(  # roctx bookkeeping: an API call, as the CSV reader reads it
        f"INSERT INTO rocpd_region{s} (nid, pid, tid, start, end, name_id, event_id)"
        " VALUES (?, 28, 28, ?, ?, ?, ?)",
        (nid, start + 600, start + 620, strings["roctxRangePop"], ev[4]),
    )
    for name, track in (("MARKER_CORE_RANGE_API", 1), ("HIP_RUNTIME_API_EXT", 2)):
        con.execute(
            f"INSERT INTO rocpd_track{s} (id, nid, pid, tid, name_id) VALUES (?, ?, 28, 28, ?)",
            (track, nid, strings[name]),
        )
    for track, when, event in ((1, start + 20, ev[1]), (2, start + 40, ev[3])):
        con.execute(
            f"INSERT INTO rocpd_sample{s} (track_id, timestamp, event_id) VALUES (?, ?, ?)",
            (track, when, event),
        )
    con.execute(
        f"INSERT INTO rocpd_memory_copy{s} (nid, pid, tid, start, end, name_id, dst_agent_id,"
        " src_agent_id, size, queue_id, stream_id, event_id) VALUES (?,28,28,?,?,?,2,0,4096,0,0,?)",
        (nid, start + 30, start + 25, strings["MEMORY_COPY_HOST_TO_DEVICE"], ev[2]),
    )
    con.commit()
    con.close()
    tl = ROCPD.parse(target)
    assert tl.validate() == []
    zero = tl.meta["clock"]["zero_ns"]
    ranges, markers, copies = _kind(tl, "range"), _kind(tl, "marker"), _kind(tl, "memcpy")
    assert ranges.select("name", "dur", "tid").rows() == [("decode step 1", 490, 28)]
    assert markers.select("name", "dur", "tid").rows() == [("token_ready", 0, 28)]
    assert markers["ts"][0] + zero == start + 20
    # roctx rows keep their internal correlation id, as the CSV Correlation_Id column does
    assert ranges["corr"].to_list() == [9001] and markers["corr"].to_list() == [9002]
    api = _kind(tl, "api")
    assert api.height == 631  # 629 HIP regions, roctxRangePop, one zero-length call (sample)
    pop = api.filter(pl.col("name") == "roctxRangePop").row(0, named=True)
    assert (pop["dur"], pop["corr"], pop["tid"]) == (20, 9005, 28)
    instant = api.filter(pl.col("dur") == 0).row(0, named=True)
    assert (instant["name"], instant["corr"]) == ("HIP_RUNTIME_API_EXT", 9004)
    row = copies.row(0, named=True)
    assert (row["name"], row["device"], row["stream"], row["corr"], row["dur"]) == (
        "MEMORY_COPY_HOST_TO_DEVICE", 0, 0, 9003, 0)  # fmt: skip
    assert row["ts"] + zero == start + 30
    assert json.loads(row["args"]) == {"bytes": 4096, "src": "CPU0", "dst": "GPU0",
                                       "hip_stream": 0, "ext_corr": 77}  # fmt: skip
    assert "1 memory copy rows end before they start; read as 0 ns" in tl.meta["warnings"]
    assert any("zero-length API calls" in w for w in tl.meta["warnings"])


@pytest.mark.parametrize("path", SAMPLES)
def test_read_paths_give_one_timeline(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Background reads, reads on demand, and joined reads split by rowid over three
    workers give the same rows."""
    from tracekit.parsers import sqlite as _sqlite
    from tracekit.parsers.rocprof.rocpd import tables as rocpd_tables

    cols = ["ts", "dur", "kind", "name", "device", "stream", "pid", "tid", "corr", "args"]
    background = ROCPD.parse(path).df.select(cols)
    assert background.height == 780
    monkeypatch.setattr(rocpd_tables, "SHARED_CONNECTIONS", False)
    assert ROCPD.parse(path).df.select(cols).equals(background)
    monkeypatch.setattr(_sqlite, "_PARTITION_MIN_ROWS", 0)
    monkeypatch.setattr(_sqlite.os, "cpu_count", lambda: 3)
    assert ROCPD.parse(path).df.select(cols).equals(background)


def test_empty_rocpd_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "empty.db"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE rocpd_metadata_x (id INTEGER PRIMARY KEY, tag TEXT, value TEXT)")
    con.execute("INSERT INTO rocpd_metadata_x (tag, value) VALUES ('schema_version', '3')")
    con.execute("CREATE TABLE rocpd_string_x (id INTEGER PRIMARY KEY, guid TEXT, string TEXT)")
    con.commit()
    con.close()
    with pytest.raises(TraceError, match="holds no kernels, API regions or memory copies"):
        ROCPD.parse(path)
