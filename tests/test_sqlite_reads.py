"""The SQLite read paths give identical timelines: partitioned, single, and stdlib fallback."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import polars as pl
import pytest

import tracekit
from tests.conftest import sha256
from tracekit.parsers import sqlite as _sqlite

DEMO = Path(__file__).resolve().parents[1] / "tracekit" / "data" / "demo.sqlite"


def _rows(path: Path) -> pl.DataFrame:
    df = tracekit.load(path).df
    return df.with_columns(pl.col(pl.Categorical).cast(pl.String)).sort(df.columns)


def test_rowid_partitioned_scan_equals_single_scan(monkeypatch: pytest.MonkeyPatch) -> None:
    single = _rows(DEMO)
    monkeypatch.setattr(_sqlite, "_PARTITION_MIN_ROWS", 0)
    monkeypatch.setattr(_sqlite.os, "cpu_count", lambda: 3)
    partitioned = _rows(DEMO)
    assert partitioned.height == 2328
    assert partitioned.equals(single)


def test_partitioned_scan_keeps_rowid_order(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rowid ranges read in parallel come back in rowid order, however the workers finish."""
    monkeypatch.setattr(_sqlite, "_PARTITION_MIN_ROWS", 0)
    monkeypatch.setattr(_sqlite.os, "cpu_count", lambda: 4)
    source = _sqlite.SqliteSource(DEMO)
    try:
        for _ in range(20):
            rows = source.scan("CUPTI_ACTIVITY_KIND_RUNTIME", "t.rowid AS r").column(0)
            assert rows.to_pylist() == list(range(1, 1425))
    finally:
        source.close()


def test_stdlib_fallback_when_a_journal_sits_beside_the_file(tmp_path: Path) -> None:
    path = tmp_path / "demo.sqlite"
    shutil.copy(DEMO, path)
    (tmp_path / "demo.sqlite-journal").write_bytes(b"\xd9\xd5\x05\xf9\x20\xa1\x63\xd7")
    source = _sqlite.SqliteSource(path)
    assert source._fast is False
    source.close()
    assert _rows(path).equals(_rows(DEMO))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["demo.sqlite", "demo.sqlite-journal"]


def test_an_empty_journal_keeps_the_fast_path(tmp_path: Path) -> None:
    path = tmp_path / "demo.sqlite"
    shutil.copy(DEMO, path)
    (tmp_path / "demo.sqlite-journal").write_bytes(b"")
    source = _sqlite.SqliteSource(path)
    assert source._fast is True
    source.close()


def test_wal_mode_export_is_read_without_side_files(tmp_path: Path) -> None:
    path = tmp_path / "wal.sqlite"
    shutil.copy(DEMO, path)
    con = sqlite3.connect(path)
    assert con.execute("PRAGMA journal_mode=WAL").fetchone() == ("wal",)
    con.close()
    before = sha256(path)
    source = _sqlite.SqliteSource(path)
    assert source._fast is False
    source.close()
    assert _rows(path).equals(_rows(DEMO))
    assert [p.name for p in tmp_path.iterdir()] == ["wal.sqlite"]
    assert sha256(path) == before
