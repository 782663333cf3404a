"""A Kineto trace file, or a folder of per-rank files, read into one Timeline.

A file is decoded while it is read (:mod:`.stream`) when it is small enough for one process;
a larger one is read whole (mapped when it is plain JSON) and its events decoded in slices by
this process and worker processes (:mod:`.worker`, on :mod:`tracekit.parsers.workers`), or in
pieces of a few MB by this process alone; anything unexpected falls back to decoding it in
one go, which also reports bad input.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa

from tracekit.errors import TraceError
from tracekit.parsers.base import Progress, cut_short_warning, strict
from tracekit.parsers.io import file_text
from tracekit.parsers.kineto import events, stream
from tracekit.parsers.kineto.decode import decode
from tracekit.parsers.kineto.detect import rank_hint, trace_files
from tracekit.parsers.kineto.events import (
    SliceResult,
    merge,
    piece_table,
    read_events,
    to_table,
    warning_lines,
)
from tracekit.parsers.slices import Slice, plan
from tracekit.parsers.workers import Worker, processes_for, start
from tracekit.timeline import Timeline, empty_meta

WORKER = "tracekit.parsers.kineto.worker"
MIN_BYTES = 96 << 20  # of JSON per process: below this, starting workers costs more than it saves
EXTRA_SHARE = 0.07  # of the events, taken by this process beyond an even split (2 cores)


def parse(path: Path, progress: Progress | None = None, include_python: bool = False) -> Timeline:
    """Read a Kineto trace file, or every trace file of a folder (one per rank)."""
    if not path.is_dir():
        return _parse_file(path, progress, include_python)
    files = trace_files(path)
    if not files:
        raise TraceError(f"{path}: folder holds no PyTorch-profiler trace files (.json/.json.gz)")
    timelines = [_parse_file(f, progress, include_python, rank_hint=rank_hint(f)) for f in files]
    return _merge(path, timelines)


def _parse_file(
    path: Path, progress: Progress | None, include_python: bool, rank_hint: int | None = None
) -> Timeline:
    note = progress or (lambda _msg: None)
    note(f"reading {path.name}")
    # helper processes start before the file is read, for files large enough to split
    helpers = start(WORKER, path, MIN_BYTES, str(path))
    try:
        return _read_file(path, note, include_python, rank_hint, helpers)
    finally:
        for worker in helpers:
            worker.stop()


def _read_file(
    path: Path, note: Progress, include_python: bool, rank_hint: int | None, helpers: list[Worker]
) -> Timeline:
    def options_of(trace: Any) -> dict[str, Any]:
        return _context(trace, path, rank_hint, include_python)[1]

    note("decoding JSON")
    streamed = None
    if not helpers:
        streamed = stream.read(path, options_of)
    cut = None
    if streamed is not None:
        trace, result, warnings = streamed
    else:
        try:
            trace, result, warnings = _read_text(path, note, helpers, options_of)
        except TraceError:
            cut = None if strict() else stream.Cut()
            recovered = None if cut is None else stream.read(path, options_of, cut)
            if recovered is None or cut is None or not cut.recovered:
                raise
            trace, result, warnings = recovered
    meta = _context(trace, path, rank_hint, include_python)[0]
    warnings.extend(w for w in warning_lines(result) if w not in warnings)
    meta["warnings"] = warnings
    table = result.table
    if len(table):
        meta["ranks"] = sorted(pa.compute.unique(table.column("rank")).to_pylist())
    meta["rank_source"] = _rank_source(trace, rank_hint, meta["ranks"])
    timeline = _rebase(Timeline(table, meta), trace)
    if cut is not None:
        cut_short(timeline, path, cut)
    return timeline


def cut_short(timeline: Timeline, path: Path, cut: stream.Cut) -> None:
    """Record in ``timeline`` that it holds only the complete events before a cut: one
    warning line (what was dropped, where the kept events end) and ``meta["truncated"]``."""
    ends = pa.compute.add(timeline.events.column("ts"), timeline.events.column("dur"))
    last = int(pa.compute.max(ends).as_py() or 0) if len(timeline) else 0
    how = f"its gzip stream ends early ({cut.gzip_error})" if cut.gzip_error else "its JSON"
    timeline.warn(
        cut_short_warning(
            path.name,
            "trace",
            f"{how} after {cut.text_bytes:,} bytes of text",
            len(timeline),
            "event",
            cut.dropped_bytes,
            f"; the kept events end {last / 1e6:,.3f} ms after the first",
        )
    )
    timeline.meta["truncated"] = {
        "text_bytes": cut.text_bytes,
        "dropped_bytes": cut.dropped_bytes,
        "gzip_error": cut.gzip_error,
        "last_end_ns": last,
    }


def _context(
    trace: Any, path: Path, rank_hint: int | None, include_python: bool
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The timeline metadata of a decoded trace and the options its rows are read with."""
    if trace.traceEvents is None:
        raise TraceError(f"{path}: JSON without traceEvents; not a PyTorch-profiler trace")
    meta = _metadata(trace, path)
    if rank_hint is not None and not trace.distributedInfo:
        meta["ranks"] = [rank_hint]
    options = {
        "rank": meta["ranks"][0],
        "include_python": include_python,
        "rank_in_args": trace.distributedInfo is None,
    }
    return meta, options


def _rank_source(trace: Any, rank_hint: int | None, ranks: list[int]) -> str | None:
    """Where the ranks of a file came from (:data:`tracekit.parsers.processes.RANK_SOURCES`):
    ``distributedInfo``, a ``rank`` in the events' args (merged traces), the file's name; None
    when the file says nothing (one process: :func:`~tracekit.parsers.processes.scope_ranks`
    records ``none``)."""
    if trace.distributedInfo:
        return "distributedInfo"
    if ranks != [0 if rank_hint is None else rank_hint]:
        return "event args"
    return None if rank_hint is None else "file name"


def _read_text(
    path: Path, note: Progress, helpers: list[Worker], options_of: Any
) -> tuple[Any, SliceResult, list[str]]:
    """Read the whole JSON text (mapped, when the file is plain JSON), then decode it; the text
    is let go on return."""
    with file_text(path) as data:
        return _decode_text(path, data, note, helpers, options_of)


def _decode_text(
    path: Path, data: Any, note: Progress, helpers: list[Worker], options_of: Any
) -> tuple[Any, SliceResult, list[str]]:
    """Decode the whole JSON text in pieces (in this process and the workers), or in one go
    when it cannot be cut."""
    warnings: list[str] = []
    processes = len(helpers) + 1 if helpers and processes_for(len(data), MIN_BYTES) > 1 else 1
    by_piece = processes > 1 or len(data) >= 2 * events.PIECE_BYTES
    planned = plan(data, processes, at=_cuts(processes)) if by_piece else None
    trace = decode(path, planned[1] if planned else data, warnings)
    options = options_of(trace)
    result = None
    if planned:
        slices = planned[0]
        if processes > 1:
            note(f"decoding in {processes} processes")
        for worker, piece in zip(helpers, slices[1:]):
            worker.finish({"start": piece.start, "stop": piece.stop, "options": options})
        result = _pieces(data, slices[0], helpers[: processes - 1], options)
        if result is None:  # a worker failed: read the whole trace in this process
            trace = decode(path, data, warnings)
    if result is None:
        decoded = trace.traceEvents or []
        note(f"{len(decoded):,} events")
        columns = read_events(decoded, data, **options)
        del decoded
        result = SliceResult(to_table(columns), columns.repairs, columns.unknown, [])
    return trace, result, warnings


def _cuts(processes: int) -> list[float]:
    """Where the slices of ``processes`` processes end, as fractions of the events array's
    bytes: this process takes :data:`EXTRA_SHARE` more than an even share, because it starts
    decoding while the workers are still reading the file themselves."""
    own = min(0.9, 1 / processes + EXTRA_SHARE)
    rest = (1 - own) / max(1, processes - 1)
    return [own + k * rest for k in range(processes - 1)]


def _pieces(
    data: bytes, own: Slice, helpers: list[Worker], options: dict[str, Any]
) -> SliceResult | None:
    """Decode our slice while the (already fed) workers decode theirs; merge the results.

    Returns None when a slice could not be decoded on its own or a worker failed.
    """
    try:
        results = [piece_table(data, own, **options)]
    except TraceError:  # not a clean slice after all: the whole trace is read here instead
        for worker in helpers:
            worker.stop()
        return None
    results += [worker.result() for worker in helpers]
    if any(result is None for result in results):
        return None
    return merge(results)  # type: ignore[arg-type]


def _rebase(timeline: Timeline, trace: Any) -> Timeline:
    """Make ts relative to the first event; record the absolute origin in ns."""
    rows = timeline.events
    if not len(timeline):
        return timeline
    first = pa.compute.min(rows.column("ts")).as_py()
    base = trace.baseTimeNanoseconds if isinstance(trace.baseTimeNanoseconds, int) else 0
    shifted = pa.compute.subtract(rows.column("ts"), first)
    table = rows.set_column(0, "ts", shifted).replace_schema_metadata(None)
    timeline.meta["origin_ns"] = base + first
    return Timeline(table, timeline.meta)


def _metadata(trace: Any, path: Path) -> dict[str, Any]:
    meta = empty_meta()
    meta["format"] = "kineto"
    meta["source"] = path.name
    backend = "CUPTI"
    version = trace.cupti_version
    if trace.roctracer_version is not None:
        backend, version = "roctracer", trace.roctracer_version
    elif trace.rocprofiler_sdk_version is not None:
        backend, version = "rocprofiler-sdk", trace.rocprofiler_sdk_version
    elif trace.hip_runtime_version is not None:
        backend, version = "ROCm", trace.hip_runtime_version
    meta["producer"] = {
        "name": "PyTorch Profiler (Kineto)",
        "version": trace.schemaVersion,
        "backend": backend,
        "backend_version": version,
    }
    vendor = "AMD" if backend != "CUPTI" else "NVIDIA"
    devices = []
    for dev in trace.deviceProperties or []:
        get = dev.get if isinstance(dev, dict) else lambda k, d=dev: getattr(d, k, None)
        major, minor = get("computeMajor"), get("computeMinor")
        name = get("name") or None
        devices.append(
            {
                "index": get("id"),
                "name": name,
                "vendor": "AMD" if name and ("AMD" in name or "Radeon" in name) else vendor,
                "cores": get("numSms"),
                "memory": get("totalGlobalMem"),
                "compute_capability": None if major is None else f"{major}.{minor or 0}",
            }
        )
    meta["devices"] = devices
    dist = trace.distributedInfo
    if dist is not None:
        get = dist.get if isinstance(dist, dict) else lambda k, d=dist: getattr(d, k, None)
        meta["ranks"] = [get("rank") or 0]
        meta["world_size"] = get("world_size")
        meta["distributed_backend"] = get("backend")
    return meta


def _merge(folder: Path, timelines: list[Timeline]) -> Timeline:
    """Per-rank timelines on one clock: ts relative to the earliest origin of all ranks."""
    origin = min(t.meta["origin_ns"] or 0 for t in timelines)
    tables = []
    for timeline in timelines:
        shift = (timeline.meta["origin_ns"] or 0) - origin
        rows = timeline.events.replace_schema_metadata(None)
        tables.append(rows.set_column(0, "ts", pa.compute.add(rows.column("ts"), shift)))
    meta = dict(timelines[0].meta)
    meta["source"] = folder.name
    meta["origin_ns"] = origin
    meta["ranks"] = sorted({r for t in timelines for r in t.meta["ranks"]})
    meta["files"] = [t.meta["source"] for t in timelines]
    meta["warnings"] = [f"{t.meta['source']}: {w}" for t in timelines for w in t.meta["warnings"]]
    if len(timelines) > 1 and not any(t.meta.get("rank_source") for t in timelines):
        # no file names its rank: each file is one process, and its correlation ids are its
        # own, so each is a rank of its own, in name order
        tables = [events.with_rank(rows, rank) for rank, rows in enumerate(tables)]
        meta["ranks"] = list(range(len(timelines)))
        meta["rank_source"] = "process"
        meta["warnings"].append(
            f"{len(timelines)} trace files record no rank; one rank per file, in name order"
        )
    return Timeline(pa.concat_tables(tables, promote_options="permissive"), meta)
