"""PyTorch profiler (Kineto) Chrome traces from CUDA (CUPTI) and ROCm (roctracer,
rocprofiler-sdk): ``.json``, ``.json.gz``, ``*.pt.trace.json(.gz)``, an object with
``traceEvents`` or a bare event list, or a folder of per-rank files read as one timeline.
"""

from __future__ import annotations

import contextlib
import mmap
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa

from tracekit.errors import TraceError
from tracekit.load import Probe
from tracekit.parsers import Parser, Progress
from tracekit.parsers.kineto import chunks, stream
from tracekit.parsers.kineto.chunks import SliceResult
from tracekit.parsers.kineto.decode import GZIP_MAGIC, decode, gzipped, read_bytes
from tracekit.parsers.kineto.events import merge, piece_table, read_events, to_table, warning_lines
from tracekit.parsers.kineto.procs import SliceWorker
from tracekit.timeline import Timeline, empty_meta

_MARKERS = (b'"schemaVersion"', b'"deviceProperties"', b'"distributedInfo"', b'"cpu_op"',
            b'"cuda_runtime"', b'"kernel"', b'"gpu_memcpy"', b'"python_function"',
            b'"user_annotation"', b'"Kernel"', b'"Runtime"', b'"Operator"', b'"ac2g"',
            b"PyTorch Profiler")  # fmt: skip
_SUFFIXES = (".json", ".json.gz", ".gz")
_RANK_IN_NAME = re.compile(r"rank[-_]?(\d+)", re.IGNORECASE)
EXTRA_SHARE = 0.07  # of the events, taken by this process beyond an even split (2 cores)


def sniff(probe: Probe) -> bool:
    """A Chrome-trace JSON (plain or gzip) with Kineto's keys or categories near its start."""
    if probe.path.is_dir():
        return bool(_trace_files(probe.path))
    text = probe.text_head
    first = text[:256].lstrip()[:1]
    if first not in (b"{", b"["):
        return False
    if first == b"{" and b'"traceEvents"' not in text and b'"schemaVersion"' not in text:
        return False
    return any(marker in text for marker in _MARKERS)


def _trace_files(folder: Path) -> list[Path]:
    files = [p for p in sorted(folder.iterdir()) if p.is_file() and p.name.endswith(_SUFFIXES)]
    return [p for p in files if p.stat().st_size and sniff(Probe(p))]


def parse(path: Path, progress: Progress | None = None, include_python: bool = False) -> Timeline:
    """Read a Kineto trace file, or every trace file of a folder (one per rank)."""
    if not path.is_dir():
        return _parse_file(path, progress, include_python)
    files = _trace_files(path)
    if not files:
        raise TraceError(f"{path}: folder holds no PyTorch-profiler trace files (.json/.json.gz)")
    timelines = [_parse_file(f, progress, include_python, rank_hint=_rank_hint(f)) for f in files]
    return _merge(path, timelines)


def _rank_hint(path: Path) -> int | None:
    match = _RANK_IN_NAME.search(path.name)
    return int(match.group(1)) if match else None


def _parse_file(path: Path, progress: Progress | None, include_python: bool,
                rank_hint: int | None = None) -> Timeline:  # fmt: skip
    note = progress or (lambda _msg: None)
    note(f"reading {path.name}")
    workers = _start_workers(path)
    try:
        return _read_file(path, note, include_python, rank_hint, workers)
    finally:
        for worker in workers:
            worker.stop()


def _start_workers(path: Path) -> list[SliceWorker]:
    """Start helper processes before decompressing, for files large enough to split."""
    size = path.stat().st_size * (8 if gzipped(path) else 1)  # JSON gzips 8 to 15 times
    return [SliceWorker(path) for _ in range(chunks.workers_for(size) - 1)]


def _read_file(path: Path, note: Progress, include_python: bool, rank_hint: int | None,
               workers: list[SliceWorker]) -> Timeline:  # fmt: skip
    def options_of(trace: Any) -> dict[str, Any]:
        return _context(trace, path, rank_hint, include_python)[1]

    note("decoding JSON")
    streamed = None
    if not workers:
        streamed = stream.read(path, options_of)
    if streamed is not None:
        trace, result, warnings = streamed
    else:
        trace, result, warnings = _read_text(path, note, workers, options_of)
    meta = _context(trace, path, rank_hint, include_python)[0]
    warnings.extend(w for w in warning_lines(result) if w not in warnings)
    meta["warnings"] = warnings
    table = result.table
    if len(table):
        meta["ranks"] = sorted(pa.compute.unique(table.column("rank")).to_pylist())
    return _rebase(Timeline(table, meta), trace)


def _context(trace: Any, path: Path, rank_hint: int | None,
             include_python: bool) -> tuple[dict[str, Any], dict[str, Any]]:  # fmt: skip
    """The timeline metadata of a decoded trace and the options its rows are read with."""
    if trace.traceEvents is None:
        raise TraceError(f"{path}: JSON without traceEvents; not a PyTorch-profiler trace")
    meta = _metadata(trace, path)
    if rank_hint is not None and not trace.distributedInfo:
        meta["ranks"] = [rank_hint]
    options = {"rank": meta["ranks"][0], "include_python": include_python,
               "rank_in_args": trace.distributedInfo is None}  # fmt: skip
    return meta, options


def _read_text(path: Path, note: Progress, workers: list[SliceWorker],
               options_of: Any) -> tuple[Any, SliceResult, list[str]]:  # fmt: skip
    """Read the whole JSON text, then decode it in pieces (in this process and the workers),
    or in one go when it cannot be cut."""
    with _whole_text(path) as data:
        return _decode_text(path, data, note, workers, options_of)


@contextlib.contextmanager
def _whole_text(path: Path) -> Iterator[Any]:
    """The file's JSON text: inflated when it is gzip, else mapped (not read into memory)."""
    with path.open("rb") as fh:
        if fh.read(2) == GZIP_MAGIC or not path.stat().st_size:
            yield read_bytes(path)
            return
        try:
            mapped = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError):  # a file system that cannot map files
            mapped = None
    if mapped is None:
        yield read_bytes(path)
        return
    try:
        yield mapped
    finally:
        with contextlib.suppress(BufferError):  # a view still held by a failed decode
            mapped.close()


def _decode_text(path: Path, data: Any, note: Progress, workers: list[SliceWorker],
                 options_of: Any) -> tuple[Any, SliceResult, list[str]]:  # fmt: skip
    warnings: list[str] = []
    processes = len(workers) + 1 if workers and chunks.workers_for(len(data)) > 1 else 1
    by_piece = processes > 1 or len(data) >= 2 * chunks.PIECE_BYTES
    planned = chunks.plan(data, processes, at=_cuts(processes)) if by_piece else None
    trace = decode(path, planned[1] if planned else data, warnings)
    options = options_of(trace)
    result = None
    if planned:
        slices = planned[0]
        if processes > 1:
            note(f"decoding in {processes} processes")
        for worker, piece in zip(workers, slices[1:]):
            worker.assign(piece, options)
        result = _pieces(data, slices[0], workers[: processes - 1], options)
        if result is None:  # a worker failed: read the whole trace in this process
            trace = decode(path, data, warnings)
    if result is None:
        events = trace.traceEvents or []
        note(f"{len(events):,} events")
        columns = read_events(events, data, **options)
        del events
        result = SliceResult(to_table(columns), columns.repairs, columns.unknown, [])
    return trace, result, warnings


def _cuts(processes: int) -> list[float]:
    """Where the slices of ``processes`` processes end, as fractions of the events array's
    bytes: this process takes :data:`EXTRA_SHARE` more than an even share, because it starts
    decoding while the workers are still reading the file themselves."""
    own = min(0.9, 1 / processes + EXTRA_SHARE)
    rest = (1 - own) / max(1, processes - 1)
    return [own + k * rest for k in range(processes - 1)]


def _pieces(data: bytes, own: chunks.Slice, workers: list[SliceWorker],
            options: dict[str, Any]) -> SliceResult | None:  # fmt: skip
    """Decode our slice while the (already fed) workers decode theirs; merge the results.

    Returns None when a slice could not be decoded on its own or a worker failed.
    """
    try:
        results = [piece_table(data, own, **options)]
    except TraceError:  # not a clean slice after all: the whole trace is read here instead
        for worker in workers:
            worker.stop()
        return None
    results += [worker.result() for worker in workers]
    if any(result is None for result in results):
        return None
    return merge(results)  # type: ignore[arg-type]


def _rebase(timeline: Timeline, trace: Any) -> Timeline:
    """Make ts relative to the first event; record the absolute origin in ns."""
    events = timeline.events
    if not len(timeline):
        return timeline
    first = pa.compute.min(events.column("ts")).as_py()
    base = trace.baseTimeNanoseconds if isinstance(trace.baseTimeNanoseconds, int) else 0
    shifted = pa.compute.subtract(events.column("ts"), first)
    table = events.set_column(0, "ts", shifted).replace_schema_metadata(None)
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
        devices.append({
            "index": get("id"), "name": name,
            "vendor": "AMD" if name and ("AMD" in name or "Radeon" in name) else vendor,
            "cores": get("numSms"), "memory": get("totalGlobalMem"),
            "compute_capability": None if major is None else f"{major}.{minor or 0}",
        })  # fmt: skip
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
        events = timeline.events.replace_schema_metadata(None)
        tables.append(events.set_column(0, "ts", pa.compute.add(events.column("ts"), shift)))
    meta = dict(timelines[0].meta)
    meta["source"] = folder.name
    meta["origin_ns"] = origin
    meta["ranks"] = sorted({r for t in timelines for r in t.meta["ranks"]})
    meta["files"] = [t.meta["source"] for t in timelines]
    meta["warnings"] = [f"{t.meta['source']}: {w}" for t in timelines for w in t.meta["warnings"]]
    return Timeline(pa.concat_tables(tables, promote_options="permissive"), meta)


KINETO = Parser("kineto", "PyTorch profiler / Kineto trace (.json, .json.gz, folder of ranks)",
                sniff, parse)  # fmt: skip


def is_rank_folder(folder: Path) -> bool:
    """Whether a folder of Kineto traces holds one run's ranks: every trace file names a
    distinct rank (``rank0…``, ``rank-1…``); otherwise its files are separate runs."""
    hints = [_rank_hint(f) for f in _trace_files(folder)]
    return None not in hints and len(set(hints)) == len(hints)
