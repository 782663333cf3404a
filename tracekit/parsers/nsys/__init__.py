"""Nsight Systems: ``nsys export --type sqlite`` databases (schema 2.9 to 3.16+) and reports.

Reads kernels, memcpy, memset, synchronization, CUDA runtime/driver calls and NVTX ranges
and marks in bulk; names resolve through ``StringIds`` into one dictionary column.
``.nsys-rep``/``.qdrep`` reports are exported with ``nsys`` into a temporary folder first.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

from tracekit.errors import TraceError
from tracekit.load import Probe
from tracekit.parsers import Parser, Progress
from tracekit.parsers._sqlite import SqliteSource
from tracekit.parsers.assemble import Part, assemble
from tracekit.parsers.names import NamePool
from tracekit.parsers.nsys.meta import META_TABLES, cuda_device_map, metadata
from tracekit.parsers.nsys.tables import DEVICE_TABLES, KERNEL, TableReader, apply_ranks
from tracekit.timeline import Timeline

REPORT_MAGIC = b"NVIDIA Tegra Profiler Report"
EXPORT_TIMEOUT_S = 3600


def sniff_sqlite(probe: Probe) -> bool:
    """An nsys export is a SQLite file with ``StringIds`` and an export metadata table."""
    tables = probe.tables
    return "StringIds" in tables and (
        any(t in tables for t in META_TABLES) or any(t.startswith("CUPTI_") for t in tables)
    )


def sniff_report(probe: Probe) -> bool:
    """``.nsys-rep`` / ``.qdrep`` reports start with the Tegra profiler magic."""
    return probe.head.startswith(REPORT_MAGIC) or probe.path.suffix in (".nsys-rep", ".qdrep")


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
            table = apply_ranks(table, reader.rank_of_pid)
        return Timeline(table, meta)
    finally:
        db.close()


def parse_report(path: Path, progress: Progress | None = None) -> Timeline:
    """Export an ``.nsys-rep``/``.qdrep`` with ``nsys`` into a temporary folder and read it."""
    nsys = shutil.which("nsys")
    if nsys is None:
        raise TraceError(
            f"{path}: Nsight Systems reports need `nsys` to decode and it is not on PATH;"
            f" run `nsys export --type sqlite --output {path.with_suffix('.sqlite').name}"
            f" {path.name}` where Nsight Systems is installed, then pass the .sqlite file"
        )
    with tempfile.TemporaryDirectory(prefix="tracekit-nsys-") as tmp:
        out = Path(tmp) / "export.sqlite"
        if progress:
            progress("nsys export")
        cmd = [nsys, "export", "--type", "sqlite", "--output", str(out), str(path.resolve())]
        try:
            done = subprocess.run(
                cmd, capture_output=True, text=True, check=False, timeout=EXPORT_TIMEOUT_S
            )
        except subprocess.TimeoutExpired as exc:
            raise TraceError(
                f"{path}: `nsys export` did not finish within {EXPORT_TIMEOUT_S} s;"
                " export it by hand and pass the .sqlite file"
            ) from exc
        if done.returncode != 0 or not out.exists():
            last = (done.stderr or done.stdout or "no output").strip().splitlines()
            raise TraceError(
                f"{path}: `nsys export` failed (exit {done.returncode}: "
                f"{last[-1] if last else 'no output'}); check the report opens in nsys"
            )
        timeline = parse_sqlite(out, progress)
    timeline.meta["format"] = "nsys-rep"
    timeline.meta["source"] = path.name
    return timeline


SQLITE = Parser("nsys-sqlite", "Nsight Systems SQLite export (.sqlite)", sniff_sqlite, parse_sqlite)
REPORT = Parser(
    "nsys-rep", "Nsight Systems report (.nsys-rep/.qdrep; needs nsys)", sniff_report, parse_report
)
