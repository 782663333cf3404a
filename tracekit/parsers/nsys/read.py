"""Reading an ``nsys export --type sqlite`` database: every device and host table in bulk,
names through ``StringIds`` into one dictionary column (:func:`.assemble.assemble`)."""

from __future__ import annotations

from pathlib import Path

from tracekit.errors import TraceError
from tracekit.parsers.assemble import Part, assemble
from tracekit.parsers.base import Progress
from tracekit.parsers.name_pool import NamePool
from tracekit.parsers.nsys.meta import META_TABLES, cuda_device_map, metadata
from tracekit.parsers.nsys.tables import DEVICE_TABLES, KERNEL, TableReader, apply_ranks
from tracekit.parsers.probe import Probe
from tracekit.parsers.sqlite import SqliteSource
from tracekit.timeline import Timeline


def sniff_sqlite(probe: Probe) -> bool:
    """An nsys export is a SQLite file with ``StringIds`` and an export metadata table."""
    tables = probe.tables
    return "StringIds" in tables and (
        any(t in tables for t in META_TABLES) or any(t.startswith("CUPTI_") for t in tables)
    )


def parse_sqlite(path: Path, progress: Progress | None = None) -> Timeline:
    """Read an nsys SQLite export into a :class:`Timeline`."""
    note = progress or (lambda _msg: None)
    db = SqliteSource(path)
    try:
        if not any(t in db.tables for t in DEVICE_TABLES):
            raise TraceError(
                f"{path}: Nsight Systems export has no {KERNEL} table (no GPU kernels captured);"
                " profile with `nsys profile --trace=cuda,nvtx` and export again"
            )
        meta = metadata(db, path)
        note("strings")
        strings = db.arrow('SELECT id, value FROM "StringIds"')
        reader = TableReader(db, NamePool(strings.column("id"), strings.column("value")))
        reader.device_map = cuda_device_map(db)
        parts: list[Part] = []
        for label, read in (
            ("kernels", reader.kernels),
            ("CUDA graphs", reader.graphs),
            ("memory copies", reader.memcpy),
            ("memsets", reader.memset),
            ("synchronization", reader.sync),
            ("CUDA API calls", reader.runtime),
            ("NVTX ranges", reader.nvtx),
        ):
            note(label)
            parts.extend(read())
        note("assembling")
        table = assemble(parts, reader.pool)
        meta["warnings"].extend(db.warnings + reader.warnings)
        if reader.rank_of_pid:
            meta["ranks"] = sorted(set(reader.rank_of_pid.values()))
            meta["rank_source"] = "mpi"  # "MPI Rank N" thread names
            table = apply_ranks(table, reader.rank_of_pid)
        return Timeline(table, meta)
    finally:
        db.close()
