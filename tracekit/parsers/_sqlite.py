"""Bulk reads of SQLite tables into Arrow, shared by the SQLite-based parsers."""

from __future__ import annotations

import os
import sqlite3
import urllib.parse
from pathlib import Path

import pyarrow as pa

from tracekit.errors import TraceError

_PARTITION_MIN_ROWS = 200_000


def open_readonly(path: Path) -> sqlite3.Connection:
    """Open a SQLite file strictly read-only: no journal, no lock files, no recovery."""
    uri = path.resolve().as_uri() + "?mode=ro&immutable=1"
    return sqlite3.connect(uri, uri=True)


class SqliteSource:
    """A read-only SQLite file with its table/column catalogue and an Arrow query helper."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.con = open_readonly(path)
        rows = self.con.execute("SELECT name FROM sqlite_master WHERE type='table'").fetchall()
        self.tables = frozenset(r[0] for r in rows)
        self._columns: dict[str, tuple[str, ...]] = {}
        # connectorx opens the file read-write; a leftover journal would make SQLite roll it
        # back on open, which changes the input. Only use it when no journal is present.
        self._fast = not any(
            Path(f"{path}{suffix}").exists() for suffix in ("-journal", "-wal", "-shm")
        )

    def close(self) -> None:
        self.con.close()

    def columns(self, table: str) -> tuple[str, ...]:
        """Column names of ``table`` (empty when the table does not exist)."""
        if table not in self._columns:
            if table not in self.tables:
                return ()
            info = self.con.execute(f'PRAGMA table_info("{table}")').fetchall()
            self._columns[table] = tuple(r[1] for r in info)
        return self._columns[table]

    def scalar(self, sql: str) -> object:
        row = self.con.execute(sql).fetchone()
        return None if row is None else row[0]

    def arrow(self, sql: str) -> pa.Table:
        """Run ``sql`` and return the result as an Arrow table."""
        return self._read(sql, {})

    def scan(self, table: str, select: str) -> pa.Table:
        """``SELECT {select} FROM {table}`` as Arrow, split over the CPU cores by rowid.

        Rowid ranges are B-tree seeks in SQLite, so each worker reads only its own share.
        """
        rows = self.scalar(f'SELECT max(rowid) FROM "{table}"') or 0
        if rows < _PARTITION_MIN_ROWS or not self._fast:
            return self._read(f'SELECT {select} FROM "{table}"', {})
        sql = f'SELECT rowid AS _tk_row, {select} FROM "{table}"'
        kwargs = {"partition_on": "_tk_row", "partition_num": min(os.cpu_count() or 1, 8)}
        return self._read(sql, kwargs).drop_columns(["_tk_row"])

    def _read(self, sql: str, kwargs: dict[str, object]) -> pa.Table:
        if not self._fast:
            return self._arrow_stdlib(sql)
        import connectorx as cx

        uri = "sqlite://" + urllib.parse.quote(str(self.path.resolve()))
        try:
            return cx.read_sql(uri, sql, return_type="arrow", **kwargs)
        except RuntimeError as exc:
            message = str(exc)
            if "malformed" in message or "not a database" in message:
                raise TraceError(
                    f"{self.path}: SQLite file is corrupt or truncated ({message.splitlines()[0]});"
                    " export it again"
                ) from exc
            raise

    def _arrow_stdlib(self, sql: str) -> pa.Table:
        cur = self.con.execute(sql)
        names = [d[0] for d in cur.description]
        rows = cur.fetchall()
        cols = list(zip(*rows)) if rows else [[] for _ in names]
        return pa.table({n: pa.array(list(c)) for n, c in zip(names, cols)})
