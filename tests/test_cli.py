"""The command line on real and bundled traces: numbers checked against plain SQL."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import pytest

import tracekit
from tests.conftest import real_root, run_cli
from tracekit.demo import demo_paths


def _h200() -> Path:
    root = real_root()
    if root is None:
        pytest.skip("TRACEKIT_REAL_TRACES not set")
    return root / "nvidia" / "nvfuser-nsys-sqlite-h200" / "report1.sqlite"


def _merged_ns(intervals: list[tuple[int, int]]) -> int:
    total, cur_start, cur_end = 0, None, None
    for start, end in sorted(intervals):
        if cur_end is None or start > cur_end:
            if cur_end is not None:
                total += cur_end - cur_start
            cur_start, cur_end = start, end
        else:
            cur_end = max(cur_end, end)
    return total + (cur_end - cur_start if cur_end is not None else 0)


def test_info_json_on_real_h200() -> None:
    done = run_cli("info", str(_h200()), "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["format"] == "nsys-sqlite"
    assert data["producer"]["version"] == "2024.6.2.25"
    assert data["devices"][0]["name"] == "NVIDIA H200"
    assert data["events_per_kind"] == {
        "api": 968,
        "kernel": 19,
        "memcpy": 1,
        "memset": 1,
        "range": 652,
        "sync": 1,
    }
    assert data["streams_per_device"] == {"0": [7]}
    assert done.stderr == ""


def test_summary_json_busy_time_equals_sql_union() -> None:
    path = _h200()
    con = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    rows = []
    for table in ("KERNEL", "MEMCPY", "MEMSET"):
        rows += con.execute(f'SELECT start, "end" FROM CUPTI_ACTIVITY_KIND_{table}').fetchall()
    kernel_ns = con.execute('SELECT sum("end" - start) FROM CUPTI_ACTIVITY_KIND_KERNEL').fetchone()
    con.close()
    done = run_cli("summary", str(path), "--json", "--top", "3")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["devices"][0]["busy_ns"] == _merged_ns(rows)
    assert data["device_time_ns"] == sum(e - s for s, e in rows)
    kinds = {k["kind"]: k for k in data["kinds"]}
    assert kinds["kernel"]["total_ns"] == kernel_ns[0] and kinds["kernel"]["count"] == 19
    assert len(data["top_kernels"]) == 3
    top = data["top_kernels"][0]
    assert top["name"].startswith("<unnamed>::nvfuser_none_f0_c0_r0_g0(")
    assert top["total_ns"] == 135137


def test_summary_terminal_output_on_real_trace() -> None:
    done = run_cli("summary", str(_h200()), env={"COLUMNS": "160"})
    assert done.returncode == 0, done.stderr
    for heading in ("device busy time", "by kind", "by stream", "top kernels"):
        assert heading in done.stdout
    assert "nvjet_hsh_256x128_64x4_1x2_h_bz_coopA_NTT" in done.stdout
    narrow = run_cli("summary", str(_h200()), env={"COLUMNS": "80"})
    assert "nvjet_hsh_256x128_…_1x2_h_bz_coopA_NTT" in narrow.stdout
    assert "at::native::…twise_kernel [AbsFunctor]" in narrow.stdout


def test_convert_round_trip_keeps_every_row(tmp_path: Path) -> None:
    out = tmp_path / "h200.parquet"
    done = run_cli("convert", str(_h200()), "-o", str(out))
    assert done.returncode == 0, done.stderr
    back = run_cli("info", str(out), "--json")
    data = json.loads(back.stdout)
    assert data["format"] == "nsys-sqlite" and data["events"] == 1642


def test_demo_prints_summary() -> None:
    done = run_cli("demo", "--no-html")
    assert done.returncode == 0, done.stderr
    count = sum(len(tracekit.analyze(tracekit.load(p)).findings) for p in demo_paths())
    assert "per step" in done.stdout and done.stdout.count("findings: ") == 2
    found = re.findall(r"^findings: (\d+), by impact", done.stdout, re.MULTILINE)
    assert sum(map(int, found)) == count
    assert done.stderr == ""  # no page written


def test_formats_lists_every_parser() -> None:
    done = run_cli("formats")
    names = [line.split()[0] for line in done.stdout.splitlines()]
    assert names == [
        "nsys-sqlite",
        "rpd",
        "rocpd",
        "rocprof-v1",
        "rocprof-v1-db",
        "rocprof-v1-json",
        "rocprof-v1-csv",
        "nsys-rep",
        "perfetto",
        "rocprofv3-json",
        "rocprofv3-csv",
        "rpd-json",
        "mindie",
        "msprof-db",
        "msprof",
        "kineto",
        "tracekit-parquet",
        "tracekit-arrow",
    ]
