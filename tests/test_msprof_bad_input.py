"""Bad Ascend input: one clear line on stderr, exit code 2, no traceback, input unchanged."""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

import tracekit
from fixtures.ascend_scenario import build_ascend_scenario
from fixtures.ascend_text_writer import write_torch_npu
from fixtures.msprof_prof_writer import write_prof
from tests.conftest import run_cli, sha256
from tracekit.errors import TraceError


@pytest.fixture(scope="module")
def events():
    return build_ascend_scenario(steps=1, layers=1).events


def _digests(path: Path) -> dict[Path, str]:
    files = [p for p in path.rglob("*") if p.is_file()] if path.is_dir() else [path]
    return {p: sha256(p) for p in files}


def assert_refused(path: Path, *phrases: str) -> None:
    """tracekit.load raises one TraceError line with ``phrases``; the CLI exits 2 with one
    line on stderr; nothing under ``path`` changes."""
    before = _digests(path)
    with pytest.raises(TraceError) as info:
        tracekit.load(path)
    message = str(info.value)
    assert "\n" not in message
    for phrase in phrases:
        assert phrase in message, message
    done = run_cli("info", str(path))
    assert done.returncode == 2, done.stdout
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert _digests(path) == before


# -- folders without profiler output --------------------------------------------------------------


def test_empty_folder(tmp_path: Path) -> None:
    assert_refused(tmp_path, "folder holds no trace")


def test_ascend_pt_folder_without_output(tmp_path: Path) -> None:
    rank = tmp_path / "host_123_20250109_ascend_pt"
    (rank / "ASCEND_PROFILER_OUTPUT").mkdir(parents=True)
    (rank / "ASCEND_PROFILER_OUTPUT" / "memory_record.csv").write_text("Component,Timestamp(us)\n")
    assert_refused(rank, "no Ascend profiler output here")


def test_prof_folder_with_only_host_info(tmp_path: Path) -> None:
    prof = tmp_path / "PROF_000001_20260823165413436_ABCDEFGHIJKLMNOP"
    (prof / "host").mkdir(parents=True)
    (prof / "host" / "info.json").write_text("{}")
    assert_refused(prof, "no Ascend profiler output here")


# -- half-written PROF_ folders -------------------------------------------------------------------


def test_prof_without_done_markers(tmp_path: Path, events) -> None:
    prof = write_prof(events, tmp_path)
    (prof / "device_0" / "start_info.0.done").unlink()
    assert_refused(prof, "half-written", "start_info.0 has no .done marker")


def test_legacy_prof_without_done_markers(tmp_path: Path, events) -> None:
    prof = write_prof(events, tmp_path, layout="legacy")
    (prof / "device_0" / "info.json.0.done").unlink()
    assert_refused(prof, "half-written")


def test_prof_raw_data_never_exported(tmp_path: Path, events) -> None:
    prof = write_prof(events, tmp_path)
    shutil.rmtree(prof / "mindstudio_profiler_output")
    (prof / "device_0" / "data").mkdir()
    (prof / "device_0" / "data" / "ts_track.data.0.slice_0").write_bytes(b"\x00" * 64)
    assert_refused(prof, "never exported", "msprof --export=on")


def test_prof_with_empty_csvs(tmp_path: Path, events) -> None:
    prof = write_prof(events, tmp_path, csv_only=True)
    for path in (prof / "mindstudio_profiler_output").glob("*.csv"):
        path.write_bytes(b"")
    assert_refused(prof, "empty", "export was cut short")


def test_prof_with_header_only_csvs(tmp_path: Path, events) -> None:
    prof = write_prof(events, tmp_path, csv_only=True)
    for path in (prof / "mindstudio_profiler_output").glob("*.csv"):
        path.write_text(path.read_text().splitlines()[0] + "\n")
    assert_refused(prof, "no rows")


def test_empty_kernel_details_file(tmp_path: Path) -> None:
    path = tmp_path / "kernel_details.csv"
    path.write_bytes(b"")
    assert_refused(path, "empty file")


# -- broken files ---------------------------------------------------------------------------------


def test_truncated_trace_view(tmp_path: Path, events, monkeypatch: pytest.MonkeyPatch) -> None:
    rank = write_torch_npu(events, tmp_path)
    trace = rank / "ASCEND_PROFILER_OUTPUT" / "trace_view.json"
    trace.write_bytes(trace.read_bytes()[: trace.stat().st_size // 2])
    kept = tracekit.load(rank)  # by default: the complete events before the cut, said so
    assert len(kept) and kept.meta["truncated"] == {"files": ["trace_view.json"]}
    monkeypatch.setenv("TRACEKIT_STRICT", "1")  # the CLI's --strict; workers inherit it
    assert_refused(rank, "not valid JSON", "trace_view.json")


def test_trace_view_with_wrong_shape(tmp_path: Path) -> None:
    path = tmp_path / "trace_view.json"
    path.write_text('[{"ph": "X", "name": "Ascend Hardware", "args": [1, 2]}]')
    assert_refused(path, "not an msprof timeline")


def test_kernel_details_with_unreadable_rows(tmp_path: Path, events) -> None:
    """Rows whose start is not a number are dropped with a warning, not read as ts 0."""
    rank = write_torch_npu(events, tmp_path)
    details = rank / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    (rank / "ASCEND_PROFILER_OUTPUT" / "trace_view.json").unlink()
    lines = details.read_bytes().decode().split("\r\n")
    fields = lines[1].split(",")
    start = lines[0].split(",").index("Start Time(us)")
    fields[start] = "garbage"
    lines[1] = ",".join(fields)
    details.write_bytes("\r\n".join(lines).encode())
    timeline = tracekit.load(rank)
    assert timeline.validate() == []
    assert any(
        "1 op table rows without a usable start time; dropped" in w
        for w in timeline.meta["warnings"]
    )


# -- SQLite exports -------------------------------------------------------------------------------


def _db(path: Path, tables: dict[str, str]) -> Path:
    con = sqlite3.connect(path)
    for name, columns in tables.items():
        con.execute(f"CREATE TABLE {name} ({columns})")
    con.execute("INSERT INTO STRING_IDS VALUES (1, 'launch')") if "STRING_IDS" in tables else None
    con.commit()
    con.close()
    return path


def test_db_without_task_table(tmp_path: Path) -> None:
    path = _db(
        tmp_path / "msprof_20260823165531.db",
        {
            "STRING_IDS": "id INTEGER PRIMARY KEY, value TEXT",
            "CANN_API": "startNs INTEGER, endNs INTEGER, type INTEGER, globalTid INTEGER, "
            "connectionId INTEGER, name INTEGER",
            "NPU_INFO": "id INTEGER, name TEXT",
        },
    )
    assert_refused(path, "without a TASK table", "holds no device tasks")


def test_db_with_empty_task_table(tmp_path: Path) -> None:
    path = _db(
        tmp_path / "ascend_pytorch_profiler_0.db",
        {
            "STRING_IDS": "id INTEGER PRIMARY KEY, value TEXT",
            "TASK": "startNs INTEGER, endNs INTEGER, deviceId INTEGER, connectionId INTEGER, "
            "globalTaskId INTEGER, globalPid INTEGER, taskType INTEGER, contextId INTEGER, "
            "streamId INTEGER, taskId INTEGER, modelId INTEGER",
        },
    )
    assert_refused(path, "TASK table has no rows")


def test_truncated_db(tmp_path: Path) -> None:
    source = _db(
        tmp_path / "full.db",
        {"STRING_IDS": "id INTEGER PRIMARY KEY, value TEXT", "TASK": "startNs INTEGER"},
    )
    path = tmp_path / "msprof_1.db"
    path.write_bytes(source.read_bytes()[:1500])
    assert_refused(path, "SQLite")


def test_analysis_db_is_not_a_trace(tmp_path: Path) -> None:
    path = _db(
        tmp_path / "analysis.db",
        {"StepTraceTime": "step TEXT, computing NUMERIC", "CommAnalyzerTime": "hccl_op_name TEXT"},
    )
    assert_refused(path, "derived step and communication statistics")


@pytest.mark.parametrize(
    "make",
    [
        lambda p: p.mkdir(),
        lambda p: (p.mkdir(), (p / "ascend_timeline_display_0.json").write_text("[]")),
    ],
    ids=["empty-folder", "mindspore-1x"],
)
def test_rank_parent_with_bad_member(tmp_path: Path, events, make: Callable[[Path], None]) -> None:
    """A parent of rank folders where one member is no output: the others still load."""
    write_torch_npu(events, tmp_path)
    make(tmp_path / "leftover")
    timeline = tracekit.load(tmp_path)
    assert timeline.meta["ranks"] == [0] and len(timeline) > 0
