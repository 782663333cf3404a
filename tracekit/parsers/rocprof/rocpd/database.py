"""rocprofiler-sdk rocpd SQLite databases (``rocprofv3 --output-format rocpd``, schema 3).

A rocpd file keeps each profiled process in its own set of uuid-suffixed tables
(``rocpd_kernel_dispatch_<uuid>``, ``rocpd_region_<uuid>``, ``rocpd_string_<uuid>`` …);
plain views (``rocpd_kernel_dispatch``, ``kernels``, ``regions`` …) sit on top of one set.
This reader reads every uuid set's own tables directly — the plain ``rocpd_*`` views are
``SELECT *`` over them, so the rows are the same, and a merged file with several sets is
read whole — and falls back to the plain views when a file has no suffixed tables.

Rows (:mod:`.rows`): kernel dispatches (names from the kernel symbols, agent -> GPU
index, queue -> stream, grid/workgroup/LDS/scratch/VGPR/SGPR in args), regions (HIP/HSA/
RCCL/… API calls as ``api``, roctx markers as ``range``, or ``marker`` when start == end)
and memory copies. ``corr`` is the internal correlation id (``rocpd_event.stack_id``),
which an API call shares with the kernels and copies it enqueued; roctx rows keep theirs
too, as rocprofv3 writes it in the CSV ``Correlation_Id`` column. The external id
(``correlation_id``, 0 unless a tool pushed one) goes to args as ``ext_corr``. Timestamps
are CLOCK_BOOTTIME ns: ts 0 is the first event, ``meta["clock"]`` keeps the boot-time value
of ts 0, ``origin_ns`` is None.
"""

from __future__ import annotations

import sqlite3
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pyarrow as pa

from tracekit.errors import TraceError
from tracekit.parsers.assemble import Part
from tracekit.parsers.base import Progress
from tracekit.parsers.name_pool import NamePool
from tracekit.parsers.probe import Probe
from tracekit.parsers.rocprof import sdk
from tracekit.parsers.rocprof.meta import skeleton
from tracekit.parsers.rocprof.rocpd import rows
from tracekit.parsers.rocprof.rocpd.tables import SetReader, TableSet
from tracekit.parsers.rocprof.sqlite_tables import ROCPD_META, ROCPD_STRING, is_rocpd
from tracekit.parsers.rocprof.table import events_table
from tracekit.parsers.sqlite import SqliteSource
from tracekit.timeline import Timeline

SUPPORTED_SCHEMA = "3"


def sniff(probe: Probe) -> bool:
    """A SQLite file with rocpd string or metadata tables (any schema version), but not a
    rocmProfileData ``.rpd`` file (``rocpd_api`` and ``rocpd_op`` tables)."""
    return is_rocpd(probe.tables)


def table_sets(con: sqlite3.Connection) -> list[TableSet]:
    """One :class:`TableSet` per uuid suffix; the plain views when there is no suffixed set."""
    found = con.execute("SELECT name, type FROM sqlite_master WHERE type IN ('table', 'view')")
    objects = dict(found.fetchall())
    suffixes = sorted(
        {
            n[len(base) :]
            for n, t in objects.items()
            if t == "table"
            for base in (ROCPD_STRING, ROCPD_META)
            if n.startswith(base)
        }
    )
    if not suffixes and (ROCPD_STRING in objects or ROCPD_META in objects):
        suffixes = [""]
    return [TableSet(s, objects) for s in suffixes]


def parse(path: Path, progress: Progress | None = None) -> Timeline:
    """Read a rocpd database into a :class:`Timeline`."""
    note = progress or (lambda _msg: None)
    db = SqliteSource(path)
    background = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rocpd-read")
    try:
        sets = table_sets(db.con)
        if not sets:
            raise TraceError(
                f"{path}: SQLite file has no rocpd tables; pass a rocprofv3 rocpd file"
            )
        meta = skeleton("rocpd", path.name, sdk.PRODUCER, schema_version=None)
        versions = [_schema_version(db, s, path, meta["warnings"]) for s in sets]
        meta["producer"]["schema_version"] = next((v for v in versions if v), None)
        readers = [SetReader(db, s, k, meta["warnings"]) for k, s in enumerate(sets)]
        for reader in readers:
            reader.prefetch(background, rows.READS)
        pool = NamePool(*_pool_ids(readers))
        parts: list[Part] = []
        for reader in readers:
            reader.pool = pool
            for label, read in (
                ("kernels", rows.kernels),
                ("regions", rows.regions),
                ("instants", rows.samples),
                ("memory copies", rows.copies),
            ):
                note(label)
                parts.extend(read(reader))
            reader.note_unread()
        if not any(len(p) for p in parts):
            raise TraceError(
                f"{path}: rocpd file holds no kernels, API regions or memory copies;"
                " profile with `rocprofv3 --kernel-trace` (or --sys-trace) and pass the new file"
            )
        meta["devices"] = [d for r in readers for d in r.devices]
        meta["processes"] = [p for r in readers for p in r.processes]
        note("assembling")
        table = events_table(parts, pool, meta, sdk.CLOCK)
        meta["warnings"].extend(w for w in db.warnings if w not in meta["warnings"])
        return Timeline(table, meta)
    finally:
        background.shutdown(wait=True, cancel_futures=True)
        db.close()


def _schema_version(db: SqliteSource, tset: TableSet, path: Path, warnings: list[str]) -> str:
    """The set's ``schema_version``; another version than 3 is refused in one line."""
    table = tset.get(ROCPD_META)
    row = None
    if table:
        row = db.con.execute(
            f"SELECT value FROM \"{table}\" WHERE tag = 'schema_version' LIMIT 1"
        ).fetchone()
    if row is None:
        warnings.append(f"rocpd tables{tset.suffix or ''} without a schema_version; read as 3")
        return ""
    version = str(row[0]).strip()
    if version != SUPPORTED_SCHEMA:
        raise TraceError(
            f"{path}: rocpd schema version {version} found; tracekit reads rocpd schema version"
            f" {SUPPORTED_SCHEMA} (rocprofv3, ROCm 7.x); re-export it with a ROCm 7 rocprofv3"
            " or convert it to CSV with that version's `rocpd convert`"
        )
    return version


def _pool_ids(readers: list[SetReader]) -> tuple[Any, Any]:
    """The string tables and kernel-symbol names of every set, under set-unique ids."""
    ids, values = [], []
    for reader in readers:
        i, v = reader.named_ids()
        ids.append(i)
        values.append(v)
    if not ids:
        return pa.array([], pa.int64()), pa.array([], pa.string())
    return pa.concat_arrays(ids), pa.concat_arrays(values)
