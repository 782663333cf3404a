"""Schema variants and quirks the real samples do not all show, planted into a fixture copy.

Each test edits a copy of the bundled demo export with plain SQL (the way another nsys
version or capture would have written it) and checks the parser's exact output.
"""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest

import tracekit

DEMO = Path(__file__).resolve().parents[1] / "tracekit" / "data" / "demo.sqlite"
GTID = 281546145665171  # the demo's host thread: vm 1, pid 4242, tid 4243
GPID = 281546145660928


@pytest.fixture
def export(tmp_path: Path) -> Iterator[tuple[Path, sqlite3.Connection]]:
    path = tmp_path / "variant.sqlite"
    shutil.copy(DEMO, path)
    con = sqlite3.connect(path)
    yield path, con
    con.close()


def _load(path: Path, con: sqlite3.Connection) -> tracekit.Timeline:
    con.commit()
    return tracekit.load(path)


def _rows(tl: tracekit.Timeline, kind: str) -> pl.DataFrame:
    return tl.df.filter(pl.col("kind") == kind).with_columns(pl.col("name").cast(pl.String))


def test_nvtx_start_end_ranges_marks_domains_and_text_ids(export) -> None:
    path, con = export
    con.execute("INSERT INTO StringIds (id, value) VALUES (9001, 'prefill_chunk')")
    rows = [  # start, end, eventType, text, textId, domainId, globalTid
        (10, None, 75, "vLLM", None, 5, GTID),  # domain create
        (500, 900, 60, None, 9001, 5, GTID),  # start/end range, text via StringIds
        (600, None, 34, "token_sampled", None, 0, GTID),  # mark
        (700, None, 59, "never_popped", None, 0, GTID),  # unclosed push/pop
    ]
    con.executemany(
        'INSERT INTO NVTX_EVENTS (start, "end", eventType, text, textId, domainId, globalTid)'
        " VALUES (?, ?, ?, ?, ?, ?, ?)",
        rows,
    )
    tl = _load(path, con)
    ranges = _rows(tl, "range").filter(pl.col("name") == "prefill_chunk")
    assert ranges.select("ts", "dur", "pid", "tid", "args").rows() == [
        (500, 400, 4242, 4243, '{"domain":"vLLM","category":null}')
    ]
    marks = _rows(tl, "marker")
    assert marks.select("name", "ts", "dur", "device").rows() == [("token_sampled", 600, 0, -1)]
    assert "never_popped" not in set(_rows(tl, "range")["name"])
    assert tl.meta["warnings"] == ["1 NVTX ranges never closed; dropped"]


def test_backtrace_twins_of_291_are_counted_once(export) -> None:
    path, con = export
    before = con.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME").fetchone()[0]
    con.execute("INSERT INTO StringIds (id, value) VALUES (9002, 'cudaLaunchKernel')")
    con.execute(
        'INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME (start, "end", eventClass, globalTid,'
        ' correlationId, nameId, returnValue) SELECT start - 1, "end" + 1, 67, globalTid,'
        " correlationId, 9002, 0 FROM CUPTI_ACTIVITY_KIND_RUNTIME"
    )
    # A backtrace row without a twin stands for its call and is kept.
    con.execute(
        'INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME (start, "end", eventClass, globalTid,'
        f" correlationId, nameId, returnValue) VALUES (5, 9, 67, {GTID}, 999999, 9002, 0)"
    )
    tl = _load(path, con)
    api = _rows(tl, "api")
    assert api.height == before + 1
    assert api.filter(pl.col("corr") == 999999)["name"].to_list() == ["cudaLaunchKernel"]
    assert api["corr"].n_unique() == api.height


def test_graph_node_ids_go_into_kernel_args(export) -> None:
    path, con = export
    con.execute(
        "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET graphNodeId = 77 WHERE correlationId ="
        " (SELECT min(correlationId) FROM CUPTI_ACTIVITY_KIND_KERNEL)"
    )
    tl = _load(path, con)
    kernels = _rows(tl, "kernel").sort("corr")
    assert kernels["args"][0].endswith(',"graph_node":77}')
    assert '"graph_node"' not in kernels["args"][1]


def test_sync_without_stream_or_event(export) -> None:
    path, con = export
    con.execute(
        'INSERT INTO CUPTI_ACTIVITY_KIND_SYNCHRONIZATION (start, "end", deviceId, contextId,'
        " greenContextId, streamId, correlationId, globalPid, syncType, eventId)"
        f" VALUES (100, 250, 0, 1, 0, 4294967295, 424242, {GPID}, 4, 4294967295),"
        f" (300, 310, 0, 1, 0, 7, 424243, {GPID}, 1, 12)"
    )
    tl = _load(path, con)
    syncs = _rows(tl, "sync").filter(pl.col("corr") >= 424242).sort("corr")
    assert syncs.select("name", "stream", "dur", "args").rows() == [
        ("Context Sync", None, 150, None),
        ("Event Sync", 7, 10, '{"event":12}'),
    ]


def test_cuda_ordinals_map_to_physical_gpus(export) -> None:
    """With CUDA_VISIBLE_DEVICES=3 a process sees GPU 3 as device 0."""
    path, con = export
    con.execute(
        "CREATE TABLE TARGET_INFO_CUDA_DEVICE (gpuId INTEGER, cudaId INTEGER, pid INTEGER,"
        " uuid TEXT, numMultiprocessors INTEGER)"
    )
    con.execute("INSERT INTO TARGET_INFO_CUDA_DEVICE VALUES (3, 0, 4242, 'GPU-x', 132)")
    con.execute("UPDATE TARGET_INFO_GPU SET id = 3")
    tl = _load(path, con)
    device_rows = tl.df.filter(pl.col("device") >= 0)
    assert set(device_rows["device"]) == {3}
    assert [d["index"] for d in tl.meta["devices"]] == [3]


def test_export_without_gpu_table_warns(export) -> None:
    path, con = export
    con.execute("DROP TABLE TARGET_INFO_GPU")
    tl = _load(path, con)
    assert tl.meta["devices"] == []
    assert tl.meta["warnings"] == [
        "no GPU description table (TARGET_INFO_GPU); device names unknown"
    ]


def test_lazy_export_without_optional_tables(export) -> None:
    path, con = export
    for table in (
        "CUPTI_ACTIVITY_KIND_MEMCPY",
        "CUPTI_ACTIVITY_KIND_MEMSET",
        "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
        "NVTX_EVENTS",
        "TARGET_INFO_SESSION_START_TIME",
    ):
        con.execute(f"DROP TABLE {table}")
    tl = _load(path, con)
    counts = dict(tl.df.group_by(pl.col("kind").cast(pl.String)).len().rows())
    assert counts == {"kernel": 864, "api": 1424}
    assert tl.meta["origin_ns"] is None


def test_mpi_rank_from_nvtx_thread_name(export) -> None:
    path, con = export
    con.execute(
        "INSERT INTO NVTX_EVENTS (start, eventType, text, domainId, globalTid)"
        f" VALUES (1, 39, 'MPI Rank 5', 0, {GTID})"
    )
    tl = _load(path, con)
    assert tl.meta["ranks"] == [5]
    assert set(tl.df["rank"]) == {5}


def test_whole_graph_replays_are_device_rows_with_a_warning(export) -> None:
    """`--cuda-graph-trace=graph`: replays live in GRAPH_TRACE and KERNEL may be absent."""
    path, con = export
    con.execute(
        "CREATE TABLE CUPTI_ACTIVITY_KIND_GRAPH_TRACE (start INTEGER NOT NULL, end INTEGER NOT"
        " NULL, deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, greenContextId INTEGER,"
        " streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, graphId INTEGER"
        " NOT NULL, graphExecId INTEGER NOT NULL)"
    )
    con.executemany(
        "INSERT INTO CUPTI_ACTIVITY_KIND_GRAPH_TRACE VALUES (?, ?, 0, 1, 0, 7, ?, ?, 4, 9)",
        [(10_000 * i, 10_000 * i + 8_000, 900_000 + i, GPID) for i in range(3)],
    )
    con.execute("DROP TABLE CUPTI_ACTIVITY_KIND_KERNEL")
    tl = _load(path, con)
    graphs = _rows(tl, "kernel")
    assert graphs.select("name", "dur", "stream", "corr").rows() == [
        ("CUDA graph 4", 8_000, 7, 900_000 + i) for i in range(3)
    ]
    assert graphs["args"][0] == '{"graph_id":4,"graph_exec_id":9}'
    assert tl.meta["warnings"][0].startswith("3 CUDA graph launches traced as whole graphs")


def test_unnamed_first_nvtx_row_and_missing_optional_columns(tmp_path: Path) -> None:
    """Older or trimmed schemas: no srcKind/dstKind, memKind, category, domainId or textId."""
    path = tmp_path / "old.sqlite"
    shutil.copy(DEMO, path)
    con = sqlite3.connect(path)
    con.execute(
        'INSERT INTO NVTX_EVENTS (start, "end", eventType, text, domainId, globalTid)'
        f" VALUES (0, 5, 59, NULL, 0, {GTID})"
    )
    for table, column in (
        ("CUPTI_ACTIVITY_KIND_MEMCPY", "srcKind"),
        ("CUPTI_ACTIVITY_KIND_MEMCPY", "dstKind"),
        ("CUPTI_ACTIVITY_KIND_MEMSET", "memKind"),
        ("NVTX_EVENTS", "category"),
        ("NVTX_EVENTS", "textId"),
    ):
        con.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
    con.commit()
    con.close()
    tl = tracekit.load(path)
    copies = _rows(tl, "memcpy")["name"].unique().sort().to_list()
    assert copies == ["Memcpy DtoH (Unknown -> Unknown)", "Memcpy HtoD (Unknown -> Unknown)"]
    assert set(_rows(tl, "memset")["name"]) == {"Memset (Unknown)"}
    ranges = _rows(tl, "range").sort("ts")
    assert ranges.height == 9 and ranges["name"][0] is None and ranges["dur"][0] == 5


def test_invalid_utf8_in_names_is_replaced_with_a_warning(export) -> None:
    path, con = export
    con.execute(
        "UPDATE StringIds SET value = CAST(X'6E766A65745FFF' AS TEXT) WHERE id ="
        " (SELECT demangledName FROM CUPTI_ACTIVITY_KIND_KERNEL LIMIT 1)"
    )
    con.execute("UPDATE TARGET_INFO_GPU SET name = CAST(X'483230300AFE' AS TEXT)")
    tl = _load(path, con)
    assert "nvjet_\ufffd" in set(_rows(tl, "kernel")["name"])
    assert tl.meta["devices"][0]["name"] == "H200\n\ufffd"
    assert tl.meta["warnings"] == ["text that is not valid UTF-8 decoded with U+FFFD replacements"]


def test_sparse_and_negative_string_ids(export) -> None:
    """Names resolve by id, whatever the ids' range: no table sized by the largest id."""
    path, con = export
    con.execute("UPDATE StringIds SET id = id + 3000000000 WHERE id > 40")
    for column in ("demangledName", "shortName", "mangledName"):
        con.execute(
            f"UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET {column} = {column} + 3000000000"
            f" WHERE {column} > 40"
        )
    con.execute("UPDATE StringIds SET id = -7 WHERE id = 5")
    con.execute("UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET nameId = -7 WHERE nameId = 5")
    before = tracekit.load(DEMO)
    tl = _load(path, con)
    assert _rows(tl, "kernel")["name"].sort().to_list() == (
        _rows(before, "kernel")["name"].sort().to_list()
    )
    assert _rows(tl, "api")["name"].value_counts().sort("name").rows() == (
        _rows(before, "api")["name"].value_counts().sort("name").rows()
    )
    assert tl.meta["warnings"] == []


def test_repairs_are_reported(export) -> None:
    path, con = export
    con.execute('UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET "end" = start - 10 WHERE rowid IN (1, 2)')
    con.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET demangledName = 999999 WHERE rowid = 3")
    tl = _load(path, con)
    assert tl.meta["warnings"] == [
        "1 kernel names not found in StringIds; left empty",
        "2 kernel rows end before they start; read as 0 ns",
    ]
    assert _rows(tl, "kernel")["dur"].min() == 0


def test_kernel_table_without_name_columns_is_one_clear_error(export) -> None:
    path, con = export
    for column in ("demangledName", "shortName", "mangledName"):
        con.execute(f"ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL DROP COLUMN {column}")
    con.commit()
    with pytest.raises(tracekit.TraceError, match="has no kernel name column"):
        tracekit.load(path)


def test_cuda_device_table_describes_gpus_when_target_info_gpu_is_absent(export) -> None:
    path, con = export
    con.execute("DROP TABLE TARGET_INFO_GPU")
    con.execute(
        "CREATE TABLE TARGET_INFO_CUDA_DEVICE (gpuId INTEGER, cudaId INTEGER, pid INTEGER,"
        " uuid TEXT, numMultiprocessors INTEGER)"
    )
    con.execute("INSERT INTO TARGET_INFO_CUDA_DEVICE VALUES (0, 0, 4242, 'GPU-1', 132)")
    tl = _load(path, con)
    assert tl.meta["devices"] == [{"index": 0, "name": None, "vendor": "NVIDIA", "cores": 132}]


def test_backtrace_twins_with_null_correlation_count_once(export) -> None:
    path, con = export
    con.execute("UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET correlationId = NULL WHERE rowid = 1")
    con.execute(
        'INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME (start, "end", eventClass, globalTid,'
        ' correlationId, nameId, returnValue) SELECT start, "end", 67, globalTid, NULL,'
        " nameId, 0 FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE rowid = 1"
    )
    tl = _load(path, con)
    assert _rows(tl, "api").height == 1424


def test_rows_without_a_start_are_dropped_with_a_warning(export) -> None:
    path, con = export
    # CREATE TABLE AS drops the NOT NULL that nsys declares, as a damaged export might have.
    con.execute("CREATE TABLE k AS SELECT * FROM CUPTI_ACTIVITY_KIND_KERNEL")
    con.execute("DROP TABLE CUPTI_ACTIVITY_KIND_KERNEL")
    con.execute("ALTER TABLE k RENAME TO CUPTI_ACTIVITY_KIND_KERNEL")
    con.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = NULL WHERE rowid IN (5, 6, 7)")
    tl = _load(path, con)
    assert _rows(tl, "kernel").height == 861
    assert tl.meta["warnings"] == ["3 CUPTI_ACTIVITY_KIND_KERNEL rows without a start; dropped"]
    assert tl.validate() == []
