"""Bad input: one line on stderr, exit code 2, no traceback, input unchanged."""

from __future__ import annotations

import os
import shutil
import sqlite3
from pathlib import Path

import pytest

from tests.conftest import run_cli, sha256
from tracekit.parsers.sqlite import open_readonly

DEMO = Path(__file__).resolve().parents[1] / "tracekit" / "data" / "demo.sqlite"


def _assert_one_line_error(path: Path, *needles: str) -> None:
    before = sha256(path)
    listing = sorted(os.listdir(path.parent))
    done = run_cli("info", str(path))
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("error: ")
    assert "Traceback" not in done.stderr
    for needle in needles:
        assert needle in lines[0]
    assert done.stdout == ""
    assert sha256(path) == before
    assert sorted(os.listdir(path.parent)) == listing  # no journal or temp file left beside it


def test_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.sqlite"
    path.write_bytes(b"")
    _assert_one_line_error(path, "empty file")


def test_random_bytes_named_sqlite(tmp_path: Path) -> None:
    path = tmp_path / "random.sqlite"
    path.write_bytes(os.urandom(8192))
    _assert_one_line_error(path, "not a recognised trace")


def test_sqlite_that_is_not_an_nsys_export(tmp_path: Path) -> None:
    path = tmp_path / "other.sqlite"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE measurements (x INTEGER)")
    con.commit()
    con.close()
    _assert_one_line_error(path, "unknown kind", "measurements")


def test_truncated_export(tmp_path: Path) -> None:
    path = tmp_path / "truncated.sqlite"
    data = DEMO.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    _assert_one_line_error(path, "corrupt or truncated")


def test_export_without_kernel_table(tmp_path: Path) -> None:
    path = tmp_path / "nokernels.sqlite"
    shutil.copy(DEMO, path)
    con = sqlite3.connect(path)
    con.execute("DROP TABLE CUPTI_ACTIVITY_KIND_KERNEL")
    con.commit()
    con.close()
    _assert_one_line_error(path, "no CUPTI_ACTIVITY_KIND_KERNEL table", "nsys profile")


def test_missing_file(tmp_path: Path) -> None:
    done = run_cli("summary", str(tmp_path / "nope.sqlite"))
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [f"error: {tmp_path / 'nope.sqlite'}: no such file"]


def test_folder_instead_of_file(tmp_path: Path) -> None:
    done = run_cli("info", str(tmp_path))
    assert done.returncode == 2
    assert "folder holds no trace tracekit reads" in done.stderr


def test_convert_refuses_to_overwrite_its_input(tmp_path: Path) -> None:
    path = tmp_path / "demo.sqlite"
    shutil.copy(DEMO, path)
    before = sha256(path)
    done = run_cli("convert", str(path), "-o", str(path))
    assert done.returncode == 2
    assert "refusing to overwrite" in done.stderr
    assert sha256(path) == before


def test_convert_unknown_output_suffix(tmp_path: Path) -> None:
    done = run_cli("convert", str(DEMO), "-o", str(tmp_path / "out.csv"))
    assert done.returncode == 2
    assert "use a .parquet or .arrow" in done.stderr


def test_read_only_open_leaves_no_side_files(tmp_path: Path) -> None:
    path = tmp_path / "demo.sqlite"
    shutil.copy(DEMO, path)
    path.chmod(0o444)
    with pytest.raises(sqlite3.OperationalError):
        open_readonly(path).execute("CREATE TABLE x (y INTEGER)")
    assert os.listdir(tmp_path) == ["demo.sqlite"]
