"""Legacy rocprof (v1, ROCm <= 6; its ``--tool-version 2`` / rocprofv2 kernel CSV) outputs:
how each is recognised and read.

``rocprof --hip-trace --stats`` writes, next to each other: ``results.db`` (SQLite tables
HIP, HSA, OPS, COPY, KERN, rocTX with quoted names like "dev-id"), ``results.json`` (the same
rows as a Chrome trace), ``results.csv`` (kernel table of ``--stats``/counter runs),
``results.*stats.csv`` and ``results.sysinfo.txt`` (rocminfo). One parser per file kind,
and :data:`ROCPROF_V1_DIR` for a folder: it reads ``results.db`` when present, else
``results.json``, else ``results.csv`` (the database is the most complete: exact ns and the
API link as a number; the JSON links calls to device rows only through its flow events; the
CSV has kernels only), or the same files under another ``-o`` name. The ``*stats.csv`` files
beside the file read become ``meta["summaries"]`` (:mod:`tracekit.parsers.rocprof.stats`).

Devices: OPS/COPY ``dev-id`` is the HSA node id; it is mapped to the GPU index (the order
of GPU agents in rocminfo) through ``results.sysinfo.txt`` or the JSON's ``otherData``.
KERN/CSV ``gpu-id`` is already the GPU index. Negative durations (EndNs < BeginNs) are read
as 0 and counted in ``meta["warnings"]``. ts 0 is the first event of the HSA system clock
(ns); ``meta["clock"]`` keeps its value, ``origin_ns`` is None.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tracekit.errors import TraceError
from tracekit.parsers.base import Progress
from tracekit.parsers.probe import Probe
from tracekit.parsers.rocprof.legacy import db, json_trace, kernel_csv
from tracekit.parsers.rocprof.legacy.agents import (
    Agent,
    agents_from_other_data,
    agents_from_rocminfo,
    devices,
)
from tracekit.parsers.rocprof.legacy.rows import build
from tracekit.parsers.rocprof.meta import skeleton
from tracekit.parsers.rocprof.sqlite_tables import is_results_db
from tracekit.parsers.rocprof.stats import legacy_summaries
from tracekit.timeline import Timeline

_KINDS = ((".db", "rocprof-v1-db"), (".json", "rocprof-v1-json"), (".csv", "rocprof-v1-csv"))


def sniff_db(probe: Probe) -> bool:
    return probe.is_sqlite and is_results_db(probe.tables)


def sniff_json(probe: Probe) -> bool:
    return json_trace.sniff_head(probe.head)


def sniff_csv(probe: Probe) -> bool:
    return probe.path.is_file() and kernel_csv.sniff_head(probe.head)


def sniff_dir(probe: Probe) -> bool:
    return probe.path.is_dir() and _choose(probe.path) is not None


def parse_db(path: Path, progress: Progress | None = None) -> Timeline:
    """Read a legacy rocprof ``results.db``."""
    _note(progress, "rocprof tables")
    frames = db.read(path)
    return _finish(frames, path, "rocprof-v1-db", {})


def parse_json(path: Path, progress: Progress | None = None) -> Timeline:
    """Read a legacy rocprof ``results.json``."""
    _note(progress, "rocprof JSON")
    frames, other = json_trace.read(path)
    return _finish(frames, path, "rocprof-v1-json", other)


def parse_csv(path: Path, progress: Progress | None = None) -> Timeline:
    """Read a legacy rocprof ``results.csv`` (kernels only)."""
    _note(progress, "rocprof CSV")
    return _finish(kernel_csv.read(path), path, "rocprof-v1-csv", {})


def parse_dir(path: Path, progress: Progress | None = None) -> Timeline:
    """Read the best file of a rocprof output folder (results.db > .json > .csv)."""
    chosen = _choose(path)
    if chosen is None:
        raise TraceError(f"{path}: folder holds no rocprof results.db, results.json or results.csv")
    file, others = chosen
    reader = {".db": parse_db, ".json": parse_json, ".csv": parse_csv}[file.suffix]
    timeline = reader(file, progress)
    timeline.meta["source"] = f"{path.name}/{file.name}"
    if others:
        timeline.meta["warnings"].append(
            f"folder holds other rocprof outputs ({', '.join(others)}); read {file.name}"
        )
    return timeline


def _choose(folder: Path) -> tuple[Path, list[str]] | None:
    """The preferred results file of a folder, and the names of other result sets."""
    try:
        names = {p.name for p in folder.iterdir() if p.is_file()}
    except OSError:
        return None
    stems = sorted(
        {n.rsplit(".", 1)[0] for n in names for ext, _ in _KINDS if n.endswith(ext)}
        & (
            {"results"}
            | {n[: -len(".sysinfo.txt")] for n in names if n.endswith(".sysinfo.txt")}
            | {n[: -len(".hip_stats.csv")] for n in names if n.endswith(".hip_stats.csv")}
            | {n[: -len(".stats.csv")] for n in names if n.endswith(".stats.csv")}
        ),
        key=lambda s: (s != "results", s),
    )
    for stem in stems:
        for ext, _ in _KINDS:
            file = folder / f"{stem}{ext}"
            if file.name in names and file.stat().st_size and _sniffs(file, ext):
                return file, [s for s in stems if s != stem]
    return None


def _sniffs(file: Path, ext: str) -> bool:
    probe = Probe(file)
    return {".db": sniff_db, ".json": sniff_json, ".csv": sniff_csv}[ext](probe)


def _finish(frames: Any, path: Path, fmt: str, other: dict[str, Any]) -> Timeline:
    agents, runtime = _agents(path, other)
    meta = skeleton(fmt, path.name, "rocprof (ROCm profiler v1)", hsa_runtime=runtime)
    meta["devices"], node_to_gpu = devices(agents)
    if summaries := legacy_summaries(path):
        meta["summaries"] = summaries
    return build(frames, meta, node_to_gpu)


def _agents(path: Path, other: dict[str, Any]) -> tuple[list[Agent], str | None]:
    """Agents from ``<stem>.sysinfo.txt`` next to ``path``, else the JSON's otherData."""
    sysinfo = path.with_name(path.name.rsplit(".", 1)[0] + ".sysinfo.txt")
    if sysinfo.is_file():
        try:
            text = sysinfo.read_text(errors="replace")
        except OSError:
            text = ""
        agents = agents_from_rocminfo(text)
        if agents:
            found = [ln for ln in text.splitlines() if ln.startswith("Runtime Version:")]
            return agents, found[0].split(":", 1)[1].strip() if found else None
    runtime = other.get("HSASystemAttributes.RuntimeVersion")
    return agents_from_other_data(other), None if runtime is None else str(runtime)


def _note(progress: Progress | None, message: str) -> None:
    if progress:
        progress(message)
