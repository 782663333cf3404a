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
    for table in ("CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
                  "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", "NVTX_EVENTS",
                  "TARGET_INFO_SESSION_START_TIME"):  # fmt: skip
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
