"""rocmProfileData ``.rpd`` files (``rpd_tracer`` / ``runTracer.sh``), plain or gzipped.

An ``.rpd`` file is a SQLite database with the ``rocpd_api``, ``rocpd_op`` and
``rocpd_api_ops`` tables (schema v1, v2 or v3, see :mod:`.tables`); the rocprofiler-sdk
"rocpd" database (:mod:`tracekit.parsers.rocprof.rocpd`) shares the ``rocpd_`` prefix but none
of these tables. A ``.rpd.gz`` is inflated to a temporary file that is removed afterwards; the
input is never written. Rows: :mod:`.rows`. Timestamps are integer ns on the tracer's
``CLOCK_MONOTONIC`` (not an epoch): ts 0 is the first event, ``meta["clock"]`` keeps the
clock value of ts 0 and ``origin_ns`` is None.

Devices are the ``gpuId`` values of the ops as the tracer wrote them: recent tracers number
GPUs from 0, older ones (and every public sample) write the HSA node id (2 for the first GPU
on a host with two CPU sockets); the file has no agent table to tell which.
"""

from __future__ import annotations

import sqlite3
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tracekit.errors import TraceError
from tracekit.parsers.base import Progress
from tracekit.parsers.convert import as_int
from tracekit.parsers.io import GZIP_MAGIC, SQLITE_MAGIC, gzipped, inflate_to
from tracekit.parsers.name_pool import NamePool
from tracekit.parsers.probe import Probe
from tracekit.parsers.rocprof.meta import device, skeleton
from tracekit.parsers.rocprof.rpd.rows import CLOCK, device_parts, host_parts
from tracekit.parsers.rocprof.rpd.tables import read_tables
from tracekit.parsers.rocprof.sqlite_tables import is_rpd
from tracekit.parsers.rocprof.table import events_table, used_devices
from tracekit.parsers.sqlite import SqliteSource
from tracekit.timeline import Timeline

PRODUCER = "rocmProfileData rpd_tracer"
_SCHEMA_TEXT = (b"rocpd_api_ops", b"rocpd_op")  # in the SQLite schema page of a gzipped file


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
    if not gzipped(path):
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="tracekit-rpd-") as folder:
        target = Path(folder) / (path.name.removesuffix(".gz") or "trace.rpd")
        inflate_to(path, target)
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
    sessions = as_int(tables.metadata.get("session_count"))
    meta = skeleton("rpd", path.name, PRODUCER, schema_version=tables.version, sessions=sessions)
    meta["warnings"] = warnings
    table = events_table(parts, pool, meta, CLOCK)
    meta["devices"] = [device(g) for g in used_devices(table)]
    return Timeline(table, meta)
