"""Bulk reads of SQLite tables into Arrow, shared by the SQLite-based parsers."""

from __future__ import annotations

import itertools
import os
import sqlite3
import threading
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow as pa

from tracekit.errors import TraceError

_PARTITION_MIN_ROWS = 200_000
_BATCH_ROWS = 200_000
_WAL_FORMAT = 2  # header bytes 18-19: file format write/read version 2 means WAL mode
SHARED_CONNECTIONS = sqlite3.threadsafety == 3  # serialized: one connection, several threads


def open_readonly(path: Path) -> sqlite3.Connection:
    """Open a SQLite file strictly read-only: no journal, no lock files, no recovery.

    Text that is not valid UTF-8 is decoded with replacement characters instead of failing.
    Where SQLite is built serialized, the connection may serve a background thread too.
    """
    uri = path.resolve().as_uri() + "?mode=ro&immutable=1"
    con = sqlite3.connect(uri, uri=True, check_same_thread=not SHARED_CONNECTIONS)
    con.text_factory = lambda raw: raw.decode("utf-8", errors="replace")
    return con


def _needs_stdlib(path: Path) -> bool:
    """True when only a strictly read-only open is safe.

    connectorx opens files read-write: SQLite would then create ``-wal``/``-shm`` files for a
    WAL-mode database, or roll back a hot journal, next to the input.
    """
    with path.open("rb") as fh:
        header = fh.read(20)
    if len(header) == 20 and _WAL_FORMAT in (header[18], header[19]):
        return True
    journal = Path(f"{path}-journal")
    return (journal.exists() and journal.stat().st_size > 0) or Path(f"{path}-wal").exists()


class SqliteSource:
    """A read-only SQLite file with its table/column catalogue and an Arrow query helper."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.con = open_readonly(path)
        rows = self.con.execute("SELECT name FROM sqlite_master WHERE type='table'").fetchall()
        self.tables = frozenset(r[0] for r in rows)
        self._columns: dict[str, tuple[str, ...]] = {}
        self._fast = not _needs_stdlib(path)
        self.warnings: list[str] = []
        self._lock = threading.Lock()

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
        return self._read(sql)

    def scan(self, table: str, select: str, join: str = "") -> pa.Table:
        """``SELECT {select} FROM {table} AS t {join}`` as Arrow, split over the CPU cores by
        ``t.rowid`` (``join`` may add ``LEFT JOIN other AS e ON …``; qualify columns then).

        Rowid ranges are B-tree seeks in SQLite, so each worker reads only its own share; the
        ranges come from the table's first and last rowid. Each range is its own connectorx
        read (one query answers in order; several in one call come back in the order they
        finish), run in threads (connectorx releases the GIL) and concatenated in rowid order.
        """
        sql = f'SELECT {select} FROM "{table}" AS t {join}'.rstrip()
        # one aggregate per query: SQLite reads min() or max() of the rowid off the B-tree
        # only when it is the query's single aggregate (both at once scan the table)
        lo, hi = (self.scalar(f'SELECT {f}(rowid) FROM "{table}"') for f in ("min", "max"))
        parts = min(os.cpu_count() or 1, 8)
        small = not isinstance(lo, int) or not isinstance(hi, int) or hi - lo < _PARTITION_MIN_ROWS
        if small or parts < 2 or not self._fast or not SHARED_CONNECTIONS:
            return self._read(sql)
        step = (hi - lo + parts) // parts
        bounds = [lo + i * step for i in range(parts)] + [hi + 1]
        queries = [
            f"{sql} WHERE t.rowid >= {a} AND t.rowid < {b}" for a, b in itertools.pairwise(bounds)
        ]
        with ThreadPoolExecutor(max_workers=parts, thread_name_prefix="sqlite-scan") as pool:
            tables = list(pool.map(self._read, queries))
        return pa.concat_tables(tables, promote_options="permissive")

    def _read(self, sql: str) -> pa.Table:
        """``sql`` through connectorx, or the standard library where that is the safe path."""
        if not self._fast:
            return self._arrow_stdlib(sql)
        import connectorx as cx

        uri = "sqlite://" + urllib.parse.quote(str(self.path.resolve()))
        try:
            return cx.read_sql(uri, sql, return_type="arrow")
        except RuntimeError as exc:
            message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            if "malformed" in message or "not a database" in message:
                raise TraceError(
                    f"{self.path}: SQLite file is corrupt or truncated ({message}); export it again"
                ) from exc
            if "Invalid column type" in message:
                raise TraceError(
                    f"{self.path}: a column holds values of an unexpected type ({message});"
                    " the export looks edited or corrupt, export it again"
                ) from exc
            if "onversion" in message or "utf" in message.lower():
                # Text that is not UTF-8: read this query with the lenient standard library.
                warning = "text that is not valid UTF-8 decoded with U+FFFD replacements"
                with self._lock:  # scan workers may get here at once
                    if warning not in self.warnings:
                        self.warnings.append(warning)
                return self._arrow_stdlib(sql)
            raise

    def _arrow_stdlib(self, sql: str) -> pa.Table:
        """The same query through the standard library, in batches."""
        cur = self.con.execute(sql)
        names = [d[0] for d in cur.description]
        batches = []
        while rows := cur.fetchmany(_BATCH_ROWS):
            columns = list(zip(*rows))
            batches.append(pa.table({n: pa.array(list(c)) for n, c in zip(names, columns)}))
        if not batches:
            return pa.table({n: pa.array([], pa.null()) for n in names})
        return pa.concat_tables(batches, promote_options="permissive")
