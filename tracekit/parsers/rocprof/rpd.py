"""rocmProfileData ``.rpd`` files (``rpd_tracer`` / ``runTracer.sh``), plain or gzipped.

An ``.rpd`` file is a SQLite database with the ``rocpd_api``, ``rocpd_op`` and
``rocpd_api_ops`` tables (schema v1, v2 or v3, see :mod:`.rpd_read`); the rocprofiler-sdk
"rocpd" database (:mod:`.rocpd`) shares the ``rocpd_`` prefix but none of these tables. A
``.rpd.gz`` is inflated to a temporary file that is removed afterwards; the input is never
written. Rows: :mod:`.rpd_rows`. Timestamps are integer ns on the tracer's
``CLOCK_MONOTONIC`` (not an epoch): ts 0 is the first event, ``meta["clock"]`` keeps the
clock value of ts 0 and ``origin_ns`` is None.

Devices are the ``gpuId`` values of the ops as the tracer wrote them: recent tracers number
GPUs from 0, older ones (and every public sample) write the HSA node id (2 for the first GPU
on a host with two CPU sockets); the file has no agent table to tell which.
"""

from __future__ import annotations

import gzip
import shutil
import sqlite3
import tempfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tracekit.errors import TraceError
from tracekit.load import GZIP_MAGIC, SQLITE_MAGIC, Probe
from tracekit.parsers import Parser, Progress
from tracekit.parsers._sqlite import SqliteSource
from tracekit.parsers.assemble import assemble
from tracekit.parsers.names import NamePool
from tracekit.parsers.rocprof.common import rebase
from tracekit.parsers.rocprof.rpd_read import read_tables
from tracekit.parsers.rocprof.rpd_rows import device_parts, host_parts
from tracekit.timeline import Timeline, empty_meta

CLOCK = "CLOCK_MONOTONIC"
PRODUCER = "rocmProfileData rpd_tracer"
TABLES = frozenset({"rocpd_api", "rocpd_op"})
_SCHEMA_TEXT = (b"rocpd_api_ops", b"rocpd_op")  # in the SQLite schema page of a gzipped file


def is_rpd(tables: frozenset[str]) -> bool:
    """Whether SQLite table names are those of a rocmProfileData file."""
    return tables >= TABLES


def sniff(probe: Probe) -> bool:
    """A SQLite file with rocmProfileData tables, or a gzip file holding one."""
    if probe.is_sqlite:
        return is_rpd(probe.tables)
    if not probe.head.startswith(GZIP_MAGIC):
        return False
    text = probe.text_head
    named = probe.path.name.lower().endswith(".rpd.gz")  # the schema may sit past the head
    return text.startswith(SQLITE_MAGIC) and (named or all(t in text for t in _SCHEMA_TEXT))


@contextmanager
def sqlite_path(path: Path) -> Iterator[Path]:
    """``path`` itself, or for a gzip file its content inflated into a temporary file."""
    with path.open("rb") as fh:
        gzipped = fh.read(2) == GZIP_MAGIC
    if not gzipped:
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="tracekit-rpd-") as folder:
        target = Path(folder) / (path.name.removesuffix(".gz") or "trace.rpd")
        try:
            with gzip.open(path, "rb") as src, target.open("wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
        except (EOFError, OSError, zlib.error) as exc:
            raise TraceError(
                f"{path}: cannot inflate the gzip file ({exc}); it is truncated or corrupt,"
                " copy it again"
            ) from exc
        with target.open("rb") as fh:
            if fh.read(len(SQLITE_MAGIC)) != SQLITE_MAGIC:
                raise TraceError(f"{path}: the gzip file holds no SQLite database; not a .rpd")
        yield target


def parse(path: Path, progress: Progress | None = None) -> Timeline:
    """Read a rocmProfileData ``.rpd`` (or ``.rpd.gz``) file into a :class:`Timeline`."""
    note = progress or (lambda _msg: None)
    with sqlite_path(path) as db_path:
        note("rpd tables")
        try:
            db = SqliteSource(db_path)
        except sqlite3.DatabaseError as exc:
            raise TraceError(
                f"{path}: SQLite file is corrupt or truncated ({exc}); copy it again"
            ) from exc
        try:
            tables = read_tables(db)
            warnings = [*tables.warnings, *db.warnings]
        except TraceError as exc:
            raise TraceError(str(exc).replace(str(db_path), str(path))) from exc
        except sqlite3.DatabaseError as exc:
            raise TraceError(
                f"{path}: SQLite file is corrupt or truncated ({exc}); copy it again"
            ) from exc
        finally:
            db.close()
    note("rpd rows")
    pool = NamePool()
    parts = device_parts(tables, pool, warnings) + host_parts(tables, pool, warnings)
    if not any(len(p) for p in parts):
        raise TraceError(
            f"{path}: rocmProfileData file holds no API calls or GPU ops; trace again with"
            " rpd_tracer (runTracer.sh) and pass the new file"
        )
    meta = _meta(path, tables.version, tables.metadata)
    meta["warnings"] = warnings
    table = rebase(assemble(parts, pool), meta, CLOCK)
    gpus = sorted(set(table.column("device").drop_null().unique().to_pylist()) - {-1})
    meta["devices"] = [
        {"index": g, "name": None, "vendor": "AMD", "cores": None, "memory": None} for g in gpus
    ]
    return Timeline(table, meta)


def _meta(path: Path, version: str, metadata: dict[str, str]) -> dict[str, Any]:
    meta = empty_meta()
    meta["format"] = "rpd"
    meta["source"] = path.name
    meta["producer"] = {
        "name": PRODUCER,
        "version": None,
        "schema_version": version,
        "sessions": _int(metadata.get("session_count")),
    }
    return meta


def _int(text: str | None) -> int | None:
    try:
        return None if text is None else int(text)
    except ValueError:
        return None


RPD = Parser(
    "rpd", "rocmProfileData .rpd SQLite (rpd_tracer; schema v1-v3, .rpd.gz too)", sniff, parse
)
