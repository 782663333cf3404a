"""The nsys parser against every real export in $TRACEKIT_REAL_TRACES/nvidia.

Ground truth is plain SQL over the same file.
"""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl
import pytest

import tracekit
from tests.conftest import real_files, real_root, sha256, sql_rows

SQLITE_FILES = real_files("nvidia", "*/*.sqlite")


def _count(path: Path, table: str, where: str = "1") -> int:
    tables = {r[0] for r in sql_rows(path, "SELECT name FROM sqlite_master WHERE type='table'")}
    if table not in tables:
        return 0
    return sql_rows(path, f"SELECT count(*) FROM {table} WHERE {where}")[0][0]


def _kind(tl: tracekit.Timeline, kind: str) -> pl.DataFrame:
    return tl.df.filter(pl.col("kind") == kind)


@pytest.mark.parametrize("path", SQLITE_FILES)
def test_counts_equal_sql(path: Path) -> None:
    before = sha256(path)
    tl = tracekit.load(path)
    assert tl.validate() == []
    assert tl.meta["format"] == "nsys-sqlite"
    assert _kind(tl, "kernel").height == _count(path, "CUPTI_ACTIVITY_KIND_KERNEL")
    assert _kind(tl, "memcpy").height == _count(path, "CUPTI_ACTIVITY_KIND_MEMCPY")
    assert _kind(tl, "memset").height == _count(path, "CUPTI_ACTIVITY_KIND_MEMSET")
    assert _kind(tl, "sync").height == _count(path, "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION")
    # Runtime rows de-duplicated: one per (thread, correlation id) in every sample here.
    runtime = sql_rows(
        path,
        "SELECT count(*) FROM (SELECT DISTINCT globalTid, correlationId"
        " FROM CUPTI_ACTIVITY_KIND_RUNTIME)",
    )[0][0]
    assert _kind(tl, "api").height == runtime
    ranges = _count(path, "NVTX_EVENTS", 'eventType IN (59, 60) AND "end" IS NOT NULL')
    marks = _count(path, "NVTX_EVENTS", "eventType = 34")
    assert _kind(tl, "range").height == ranges
    assert _kind(tl, "marker").height == marks
    assert sha256(path) == before


@pytest.mark.parametrize("path", SQLITE_FILES)
def test_kernel_time_names_and_streams_equal_sql(path: Path) -> None:
    tl = tracekit.load(path)
    kernels = _kind(tl, "kernel")
    total = sql_rows(path, 'SELECT sum("end" - start) FROM CUPTI_ACTIVITY_KIND_KERNEL')[0][0]
    assert kernels["dur"].sum() == total
    per_stream = dict(
        ((d, s), n)
        for d, s, n in sql_rows(
            path,
            "SELECT deviceId, streamId, count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL GROUP BY 1, 2",
        )
    )
    got = {(d, s): n for d, s, n in kernels.group_by("device", "stream").len().rows()}
    assert got == per_stream
    names = {
        r[0]
        for r in sql_rows(
            path,
            "SELECT s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k"
            " JOIN StringIds s ON s.id = k.demangledName",
        )
    }
    assert set(kernels["name"].cast(pl.String)) == names


@pytest.mark.parametrize("path", SQLITE_FILES)
def test_devices_and_origin_equal_target_info(path: Path) -> None:
    tl = tracekit.load(path)
    gpus = sql_rows(path, "SELECT id, name, smCount FROM TARGET_INFO_GPU ORDER BY id")
    assert [(d["index"], d["name"], d["cores"]) for d in tl.meta["devices"]] == gpus
    origin = sql_rows(path, "SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME")[0][0]
    assert tl.meta["origin_ns"] == origin


@pytest.mark.parametrize("path", SQLITE_FILES)
def test_every_kernel_links_to_its_launch(path: Path) -> None:
    tl = tracekit.load(path)
    api = _kind(tl, "api").select("pid", "corr", launch_ts="ts")
    kernels = _kind(tl, "kernel").join(api, on=["pid", "corr"], how="left")
    assert kernels["launch_ts"].null_count() == 0
    assert (kernels["launch_ts"] <= kernels["ts"]).all()
    names = set(_kind(tl, "api")["name"].cast(pl.String))
    assert not [n for n in names if re.search(r"_v\d{4,}$", n)]


def _one(name: str) -> Path:
    root = real_root()
    if root is None:
        pytest.skip("TRACEKIT_REAL_TRACES not set")
    return next((root / "nvidia").glob(name))


def test_legacy_291_export_details() -> None:
    """Schema 2.9.1: EXPORT_META_DATA, duplicate runtime rows, NVTX text via textId, MPI."""
    tl = tracekit.load(_one("pipit-saxpy-mpi-cuda-nsys/*.sqlite"))
    assert tl.meta["producer"]["version"] == "2022.2.1.31"
    assert tl.meta["producer"]["export_schema"] == "2.9.1"
    counts = dict(tl.df.group_by(pl.col("kind").cast(pl.String)).len().rows())
    assert counts == {"kernel": 5, "memcpy": 15, "api": 57, "range": 22}
    launches = _kind(tl, "api").filter(pl.col("name") == "cudaLaunchKernel")
    assert launches.height == 5
    ranges = _kind(tl, "range")
    mpi = ranges.filter(pl.col("args") == '{"domain":"MPI","category":null}')
    assert mpi.height == 17
    assert set(mpi["name"].cast(pl.String)) >= {"MPI_Init", "MPI_Send", "MPI_Recv"}
    copies = _kind(tl, "memcpy")["name"].cast(pl.String).value_counts(sort=True).rows()
    assert copies[0][0] in {"Memcpy HtoD (Pageable -> Device)", "Memcpy DtoH (Device -> Pageable)"}
    assert tl.meta["devices"][0]["name"] == "NVIDIA A100-SXM4-40GB"


def test_modern_h200_export_details() -> None:
    tl = tracekit.load(_one("nvfuser-nsys-sqlite-h200/*.sqlite"))
    assert tl.meta["devices"] == [
        {
            "index": 0,
            "name": "NVIDIA H200",
            "vendor": "NVIDIA",
            "cores": 132,
            "memory": 150137864192,
            "compute_capability": "9.0",
            "chip": "GH100",
            "bus": "0000:45:00.0",
        }
    ]
    kernels = _kind(tl, "kernel")
    assert kernels.height == 19
    first = kernels.sort("ts").row(0, named=True)
    assert first["ts"] == 770742793 and first["dur"] == 770783434 - 770742793
    assert first["stream"] == 7 and first["corr"] == 158 and first["engine"] == "sm"
    assert first["args"] == (
        '{"grid":[1056,1,1],"block":[256,1,1],"registers":40,"shared_static":0,"shared_dynamic":0}'
    )
    assert first["pid"] == 281980910436352 >> 24 & 0xFFFFFF
