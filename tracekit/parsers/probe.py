"""What sniffers look at: :class:`Probe`, the first bytes of a file and, for SQLite, its
table names."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from functools import cached_property
from pathlib import Path

from tracekit.parsers.io import GZIP_MAGIC, SQLITE_MAGIC, inflate_head
from tracekit.parsers.sqlite import open_readonly

TEXT_HEAD_IN, TEXT_HEAD_OUT = 1 << 16, 1 << 18  # gzip bytes read, text bytes kept


class Probe:
    """The first bytes of a file and, for SQLite, its table names; computed once per load,
    however many sniffers look."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.sqlite_error: str | None = None
        self.head = b""
        if path.is_file():
            with path.open("rb") as fh:
                self.head = fh.read(4096)

    @cached_property
    def text_head(self) -> bytes:
        """The first bytes of the file's text: ``head``, or for a gzip file up to 256 KiB
        inflated from its first 64 KiB (empty when that is not valid gzip)."""
        if not self.head.startswith(GZIP_MAGIC):
            return self.head
        try:
            with self.path.open("rb") as fh:
                return inflate_head(fh.read(TEXT_HEAD_IN), TEXT_HEAD_OUT)
        except OSError:
            return b""

    @property
    def is_sqlite(self) -> bool:
        """True when the file starts with the SQLite magic."""
        return self.head.startswith(SQLITE_MAGIC)

    @cached_property
    def tables(self) -> frozenset[str]:
        """Table names of a SQLite file (empty when it is not one or cannot be read)."""
        if not self.is_sqlite:
            return frozenset()
        try:
            with closing(open_readonly(self.path)) as con:
                rows = con.execute("SELECT name FROM sqlite_master WHERE type='table'")
                return frozenset(r[0] for r in rows)
        except sqlite3.DatabaseError as exc:
            self.sqlite_error = str(exc)
            return frozenset()
