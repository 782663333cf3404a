"""Legacy rocprof (v1, ROCm <= 6; its ``--tool-version 2`` / rocprofv2 kernel CSV) outputs.

``rocprof --hip-trace --stats`` writes, next to each other: ``results.db`` (SQLite tables
HIP, HSA, OPS, COPY, KERN, rocTX with quoted names like "dev-id"), ``results.json`` (the same
rows as a Chrome trace), ``results.csv`` (kernel table of ``--stats``/counter runs),
``results.*stats.csv`` and ``results.sysinfo.txt`` (rocminfo). One parser per file kind,
and :data:`ROCPROF_V1_DIR` for a folder: it reads ``results.db`` when present, else
``results.json``, else ``results.csv`` (the database is the most complete: exact ns and the
API link as a number; the JSON links calls to device rows only through its flow events; the
CSV has kernels only), or the same files under another ``-o`` name. The ``*stats.csv`` files
beside the file read become ``meta["summaries"]`` (:mod:`.stats`).

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
from tracekit.load import Probe
from tracekit.parsers import Parser, Progress
from tracekit.parsers.rocprof import legacy_csv as csv_reader
from tracekit.parsers.rocprof import legacy_db as db_reader
from tracekit.parsers.rocprof import legacy_json as json_reader
from tracekit.parsers.rocprof.legacy_rows import (
    Agent,
    agents_from_other_data,
    agents_from_rocminfo,
    build,
    devices,
)
from tracekit.parsers.rocprof.stats import legacy_summaries
from tracekit.timeline import Timeline, empty_meta

_KINDS = ((".db", "rocprof-v1-db"), (".json", "rocprof-v1-json"), (".csv", "rocprof-v1-csv"))


def sniff_db(probe: Probe) -> bool:
    return probe.is_sqlite and db_reader.sniff_tables(probe.tables)


def sniff_json(probe: Probe) -> bool:
    return json_reader.sniff_head(probe.head)


def sniff_csv(probe: Probe) -> bool:
    return probe.path.is_file() and csv_reader.sniff_head(probe.head)


def sniff_dir(probe: Probe) -> bool:
    return probe.path.is_dir() and _choose(probe.path) is not None


def parse_db(path: Path, progress: Progress | None = None) -> Timeline:
    """Read a legacy rocprof ``results.db``."""
    _note(progress, "rocprof tables")
    frames = db_reader.read(path)
    return _finish(frames, path, "rocprof-v1-db", {})


def parse_json(path: Path, progress: Progress | None = None) -> Timeline:
    """Read a legacy rocprof ``results.json``."""
    _note(progress, "rocprof JSON")
    frames, other = json_reader.read(path)
    return _finish(frames, path, "rocprof-v1-json", other)


def parse_csv(path: Path, progress: Progress | None = None) -> Timeline:
    """Read a legacy rocprof ``results.csv`` (kernels only)."""
    _note(progress, "rocprof CSV")
    return _finish(csv_reader.read(path), path, "rocprof-v1-csv", {})


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
        & ({"results"} | {n[: -len(".sysinfo.txt")] for n in names if n.endswith(".sysinfo.txt")}
           | {n[: -len(".hip_stats.csv")] for n in names if n.endswith(".hip_stats.csv")}
           | {n[: -len(".stats.csv")] for n in names if n.endswith(".stats.csv")})
    , key=lambda s: (s != "results", s))  # fmt: skip
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
    meta = empty_meta()
    meta.update(format=fmt, source=path.name)
    agents, runtime = _agents(path, other)
    meta["producer"] = {"name": "rocprof (ROCm profiler v1)", "version": None,
                        "hsa_runtime": runtime}  # fmt: skip
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
            runtime = next((line.split(":", 1)[1].strip() for line in text.splitlines()
                            if line.startswith("Runtime Version:")), None)  # fmt: skip
            return agents, runtime
    runtime = other.get("HSASystemAttributes.RuntimeVersion")
    return agents_from_other_data(other), None if runtime is None else str(runtime)


def _note(progress: Progress | None, message: str) -> None:
    if progress:
        progress(message)


ROCPROF_V1_DB = Parser("rocprof-v1-db", "legacy rocprof results.db (HIP/HSA/OPS/COPY/KERN)",
                       sniff_db, parse_db)  # fmt: skip
ROCPROF_V1_JSON = Parser("rocprof-v1-json", "legacy rocprof results.json (Chrome trace)",
                         sniff_json, parse_json)  # fmt: skip
ROCPROF_V1_CSV = Parser("rocprof-v1-csv", "legacy rocprof results.csv / rocprofv2 kernel CSV",
                        sniff_csv, parse_csv)  # fmt: skip
ROCPROF_V1_DIR = Parser("rocprof-v1", "folder of legacy rocprof results.* files",
                        sniff_dir, parse_dir)  # fmt: skip
PARSERS = (ROCPROF_V1_DIR, ROCPROF_V1_DB, ROCPROF_V1_JSON, ROCPROF_V1_CSV)
