"""An msServiceProfiler output (``chrome_tracing.json``, ``profiler.db``, ``batch.csv`` /
``request.csv``, or their folder) -> :class:`Timeline` of host-only service rows."""

from __future__ import annotations

from pathlib import Path

import msgspec
import polars as pl

from tracekit.errors import TraceError
from tracekit.parsers.base import Progress
from tracekit.parsers.io import read_bytes
from tracekit.parsers.mindie import tables
from tracekit.parsers.mindie.detect import csv_kind, folder_inputs
from tracekit.parsers.mindie.rows import ranks_of, service_rows
from tracekit.parsers.mindie.trace_json import decode, events_frame
from tracekit.parsers.probe import Probe
from tracekit.timeline import Timeline, build_table, empty_meta

FORMAT = "mindie"  # the parser's name, as --parser takes it
PRODUCER = "MindIE msServiceProfiler"
HOST_ONLY = (
    "the trace holds no device work: msServiceProfiler records host-only service spans"
    " (requests, batching, engine iterations); device time, overlap and bubbles need the"
    " msprof / torch_npu profile of the same run"
)


def _trace(path: Path) -> tuple[pl.DataFrame, list[str]]:
    data = read_bytes(path)
    try:
        events = decode(data)
    except msgspec.DecodeError as exc:
        raise TraceError(
            f"{path}: not valid msServiceProfiler trace JSON ({exc}); the file may be cut"
            " short: run ms_service_profiler.parse again"
        ) from None
    rows, warnings = service_rows(events_frame(events))
    rank, notes = ranks_of(rows)
    return rows.with_columns(rank=rank), warnings + notes


def _tabled(batch: pl.DataFrame | None, request: pl.DataFrame | None, where: str):
    parts, warnings = [], []
    if batch is not None and batch.height:
        rows, notes = tables.batch_rows(batch, f"{where} batch")
        parts.append(rows)
        warnings += notes
    if request is not None and request.height:
        rows, notes = tables.request_rows(request, f"{where} request")
        parts.append(rows)
        warnings += notes
    if not parts:
        raise TraceError(f"{where}: holds no batch or request rows; export it again")
    warnings.append(
        f"{where} holds batches and requests only, not every span: chrome_tracing.json"
        " (ms_service_profiler.parse --format json) has them all"
    )
    frame = pl.concat(parts, how="diagonal_relaxed")
    return frame.with_columns(rank=pl.lit(0, pl.Int32)), warnings


def _database(path: Path) -> tuple[pl.DataFrame, list[str]]:
    return _tabled(tables.read_table(path, "batch"), tables.read_table(path, "request"), path.name)


def _csvs(batch: Path | None, request: Path | None) -> tuple[pl.DataFrame, list[str]]:
    name = (batch or request).name  # type: ignore[union-attr]
    return _tabled(
        tables.read_csv(batch) if batch else None,
        tables.read_csv(request) if request else None,
        name,
    )


def _rows(path: Path) -> tuple[pl.DataFrame, list[str], str]:
    """The rows of ``path`` (absolute ns), the warnings and the file read."""
    if path.is_dir():
        found = folder_inputs(path)
        if "trace" in found:
            return (*_trace(found["trace"]), found["trace"].name)
        if "db" in found:
            return (*_database(found["db"]), found["db"].name)
        if not found.get("batch") and not found.get("request"):
            raise TraceError(
                f"{path}: holds no msServiceProfiler output (chrome_tracing.json, profiler.db,"
                " batch.csv or request.csv); pass the folder the tool wrote"
            )
        return (*_csvs(found.get("batch"), found.get("request")), "batch.csv")
    probe = Probe(path)
    if probe.is_sqlite:
        return (*_database(path), path.name)
    kind = csv_kind(probe.head) if path.suffix.lower() == ".csv" else None
    if kind == "batch":
        request = path.with_name("request.csv")
        return (*_csvs(path, request if request.is_file() else None), path.name)
    if kind == "request":
        return (*_csvs(None, path), path.name)
    return (*_trace(path), path.name)


def parse(path: str | Path, progress: Progress | None = None) -> Timeline:
    """Read an msServiceProfiler output into a Timeline (host rows only, ns since its first
    span; ``origin_ns`` the epoch of that span)."""
    path = Path(path)
    if progress:
        progress("reading msServiceProfiler output")
    rows, warnings, source = _rows(path)
    timed = rows.filter(pl.col("ts").is_not_null())
    if timed.height < rows.height:  # a start time that is not a number (a hand-edited CSV)
        warnings.append(f"{rows.height - timed.height:,} row(s) without a readable time left out")
        rows = timed
    if not rows.height:
        raise TraceError(f"{path}: holds no msServiceProfiler spans with times; export it again")
    origin = int(rows["ts"].min())  # type: ignore[arg-type]
    rows = rows.with_columns(ts=pl.col("ts") - origin).sort("ts", maintain_order=True)
    table = build_table({c: rows[c] for c in rows.columns if c in _COLUMNS}, rows.height)
    meta = empty_meta()
    meta.update(
        format=FORMAT,
        producer={"name": PRODUCER, "version": None},
        source=source,
        origin_ns=origin,
        ranks=sorted(int(r) for r in rows["rank"].unique()),
        warnings=[HOST_ONLY, *warnings],
    )
    return Timeline(table, meta)


_COLUMNS = ("ts", "dur", "kind", "name", "device", "rank", "pid", "tid", "args")
