"""Huawei Ascend: msprof ``PROF_*`` folders, torch_npu ``*_ascend_pt`` / MindSpore ``*_ascend_ms``
output (text and db exports), ``msprof_*.db`` files and folders holding several ranks.

Modules, one job each: :mod:`.layout` (which files a path names), :mod:`.trace_json` (timeline
JSON -> per-layer frames; decoded by :mod:`.trace_decode`, layers built by :mod:`.trace_layers`,
large files split over processes by :mod:`.parallel` and :mod:`.worker`, cut where the work
evens out by :mod:`.split`, parts handed back through :mod:`.part_io`), :mod:`.csv_tables`
(op_summary / kernel_details / task_time / step_trace_time), :mod:`.db` (SQLite exports),
:mod:`.device` (tasks joined with op details), :mod:`.engines` (the three task-type vocabularies
-> kind and engine), :mod:`.hccl` (collectives and their plane tasks, counted once),
:mod:`.comm_tasks` (the hardware tasks of a collective), :mod:`.device_index` (where each
export records the NPU device index), :mod:`.mc2` (fused compute-communication operators),
:mod:`.host` (Python / CANN rows, flows, steps), :mod:`.meta` (chips, cores, clocks),
:mod:`.text` (one text source), :mod:`.times` (µs text and floats -> ns).

Rows, in the timeline's terms: device tasks on their streams (``kernel`` with engine ``aic`` /
``aiv`` / ``mix`` / ``ai_cpu`` / ``dsa``; ``memcpy``; ``sync`` for event and notify tasks;
``marker`` for profiling / timeout bookkeeping tasks), HCCL operators as ``comm`` rows on the
stream of their first task, and the operators' tasks as ``comm`` rows naming their operator in
``args.op``: plane tasks (notifies with engine ``comm``, data moves ``sdma`` / ``comm`` by
transport, with src/dst rank, transport, size and bandwidth in ``args``), or the hardware rows
where the export lists no plane (engine kept where the task type names one). Python ops
(``op``), task-queue and CANN calls (``api``), steps (``range``). ``device`` is the NPU index
the export records (:mod:`.device_index`), null when it records none. ``corr`` is the Ascend
connection id. ts is relative to the earliest row; ``origin_ns`` is its epoch time.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import polars as pl

from tracekit.errors import TraceError
from tracekit.load import Probe
from tracekit.parsers import Parser, Progress
from tracekit.parsers.msprof import layout, mc2
from tracekit.parsers.msprof.csv_tables import csv_role, read_header
from tracekit.parsers.msprof.db import read_db
from tracekit.parsers.msprof.device import unknown_types
from tracekit.parsers.msprof.meta import devices_list, rank_of
from tracekit.parsers.msprof.rows import Loaded, conform, to_table
from tracekit.parsers.msprof.text import first_ts, read_text
from tracekit.timeline import Timeline, empty_meta

DB_MARKERS = (
    "STRING_IDS",
    "CANN_API",
    "COMMUNICATION_OP",
    "PYTORCH_API",
    "NPU_INFO",
    "TASK",
    "COMPUTE_TASK_INFO",
    "SESSION_TIME_INFO",
)
ANALYSIS_TABLES = (
    "StepTraceTime",
    "CommAnalyzerTime",
    "CommAnalyzerBandwidth",
    "CommAnalyzerMatrix",
)


def _dir_is_ascend(path: Path, depth: int = 4) -> bool:
    name = path.name
    if name in (layout.OUTPUT, layout.MS_OUTPUT) or name.startswith("PROF_"):
        return True
    if name.endswith(("_ascend_pt", "_ascend_ms")) or (path / layout.OUTPUT).is_dir():
        return True
    try:
        children = sorted(path.iterdir())
    except OSError:
        return False
    for child in children:
        if child.is_file():
            if layout._TIMELINE_JSON.match(child.name) and layout.json_is_ascend(child, 1 << 16):
                return True
            if child.suffix == ".csv" and csv_role(read_header(child)) in ("op", "task_time"):
                return True
    if layout.ms1x(path):
        return True
    return depth > 0 and any(_dir_is_ascend(c, depth - 1) for c in children if c.is_dir())


def sniff(probe: Probe) -> bool:
    """An Ascend output folder, timeline JSON or op_summary / kernel_details / task_time CSV."""
    path = probe.path
    if path.is_dir():
        return _dir_is_ascend(path)
    if probe.is_sqlite:
        return False
    if path.name.lower().endswith(".csv"):
        return csv_role(read_header(path)) in ("op", "task_time")
    head = probe.head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if head[:1] not in (b"[", b"{") and not probe.head.startswith(b"\x1f\x8b"):
        return False
    if b'"schemaVersion"' in probe.text_head[: 1 << 16]:  # a PyTorch-profiler (Kineto) trace
        return False
    return layout.json_is_ascend(path)


def sniff_db(probe: Probe) -> bool:
    """An msprof / torch_npu SQLite export (``STRING_IDS`` with Ascend tables), or the
    derived ``analysis.db`` of torch_npu (claimed to say what it is)."""
    tables = probe.tables
    if "STRING_IDS" in tables and any(t in tables for t in DB_MARKERS[1:]):
        return True
    return (
        bool(tables)
        and all(t in tables or t.startswith(("sqlite_", "status_info")) for t in tables)
        and any(t in tables for t in ANALYSIS_TABLES)
    )


def _load(source: layout.Source, include_python: bool) -> Loaded:
    if source.kind == "db":
        return read_db(source, include_python)
    return read_text(source, include_python)


def _ranks(path: Path, sources: list[layout.Source], warnings: list[str]) -> list[int]:
    """One rank per source: as recorded; numbered by folder order when none records one."""
    ranks = [s.rank for s in sources]
    if len(sources) == 1:
        return [ranks[0] if ranks[0] is not None else 0]
    if all(r is None for r in ranks):
        warnings.append(f"{len(sources)} outputs record no rank; ranks numbered by folder order")
        return list(range(len(sources)))
    if None in ranks or len(set(ranks)) < len(ranks):
        listing = ", ".join(
            f"{s.root.name}: {'?' if r is None else r}" for s, r in zip(sources[:6], ranks)
        )
        raise TraceError(
            f"{path}: holds {len(sources)} Ascend outputs of different runs (ranks repeat or are "
            f"missing: {listing}); pass the folder of one run"
        )
    return [int(r) for r in ranks]  # type: ignore[arg-type]


def parse(path: Path, progress: Progress | None = None, include_python: bool = False) -> Timeline:
    """Read any Ascend profiler output (see the module docstring) into one Timeline."""
    note = progress or (lambda _msg: None)
    if path.is_file() and sniff_db(Probe(path)) and not sniff_db_trace(path):
        raise TraceError(
            f"{path}: torch_npu analysis.db holds derived step and communication "
            "statistics, no events; pass ascend_pytorch_profiler_N.db"
        )
    sources = layout.discover(path)
    warnings: list[str] = []
    ranks = _ranks(path, [_with_rank(s) for s in sources], warnings)
    loaded = []
    for source in sources:
        note(f"reading {source.root.name}")
        loaded.append(_load(source, include_python))
    frames = []
    for one, rank in zip(loaded, ranks):
        prefix = f"rank {rank}: " if len(loaded) > 1 else ""
        warnings += [prefix + w for w in one.warnings]
        for frame in one.frames:
            frames.append(
                conform(frame.drop("_unknown", "_type", strict=False)).with_columns(
                    pl.lit(rank, pl.Int32).alias("rank")
                )
            )
        unknown = [unknown_types(f) for f in one.frames if "_unknown" in f.columns]
        warnings += [prefix + w for w in unknown if w]
    if not any(f.height for f in frames):
        raise TraceError(
            f"{path}: Ascend output with no rows (no device task, operator or API "
            "call); the export was cut short, export again"
        )
    note("assembling")
    origin = first_ts(frames) or 0
    with ThreadPoolExecutor(max_workers=1) as pool:  # both release the GIL
        counts = pool.submit(mc2.summary, frames)
        table = to_table(frames, origin)
        meta = _metadata(path, loaded, ranks, table, warnings, counts)
    meta["origin_ns"] = None if any(x.monotonic for x in loaded) else origin
    if meta["origin_ns"] is None:
        meta["clock"] = {"domain": "CLOCK_MONOTONIC_RAW", "zero_ns": origin}
    return Timeline(table, meta)


def _with_rank(source: layout.Source) -> layout.Source:
    """The source with the rank its metadata records (profiler_info, info.json, db map)."""
    if source.rank is None:
        source.rank = rank_of(source)
    return source


def sniff_db_trace(path: Path) -> bool:
    """True for an Ascend db with event tables (not only msprof-analyze statistics)."""
    tables = Probe(path).tables
    return "STRING_IDS" in tables


def _metadata(
    path: Path,
    loaded: list[Loaded],
    ranks: list[int],
    table: Any,
    warnings: list[str],
    mc2_counts: Future,
) -> dict[str, Any]:
    meta = empty_meta()
    first = loaded[0].meta
    meta["format"] = "msprof-db" if first.get("layout", "").endswith("db") else "msprof"
    meta["source"] = path.name
    meta["layout"] = first.get("layout")
    meta["producer"] = first.get("producer", {"name": "msprof"})
    meta["ranks"] = sorted(set(ranks))
    devices = pl.from_arrow(table.select(["device"]))["device"]  # type: ignore[index]
    used = {int(d) for d in devices.drop_nulls().unique().to_list() if d >= 0}
    known: dict[int, dict[str, Any]] = {}
    chips: dict[int, str] = {}
    for one in loaded:
        known.update(one.devices)
        chips.update(one.chips)
    meta["devices"] = devices_list(used, known, chips)
    if devices.filter(devices.is_null()).len() and not used:
        warnings.append("the output records no device index; device left null")
    if len(loaded) == 1:
        for key in (
            "files",
            "steps",
            "step_trace_us",
            "summaries",
            "overlap_analysis_ns",
            "stream_id_key",
            "clock",
        ):
            if key in first:
                meta[key] = first[key]
    else:
        meta["files"] = {str(r): one.meta.get("files", []) for one, r in zip(loaded, ranks)}
        meta["steps"] = sorted({s for one in loaded for s in one.meta.get("steps", [])})
        meta["summaries"] = [  # each rank's summary compared with that rank's rows only
            {**x, "rank": r} for one, r in zip(loaded, ranks) for x in one.meta.get("summaries", [])
        ]
        per_rank = {
            str(r): one.meta["overlap_analysis_ns"]
            for one, r in zip(loaded, ranks)
            if "overlap_analysis_ns" in one.meta
        }
        if per_rank:
            meta["overlap_analysis_ns"] = per_rank
    meta["mc2"] = mc2_counts.result()
    meta["warnings"] = warnings
    return meta


MSPROF = Parser(
    "msprof",
    "Huawei Ascend msprof PROF_ folder, torch_npu/MindSpore *_ascend_pt|ms output, timeline JSON "
    "or op_summary/kernel_details CSV (a folder of ranks reads as one timeline)",
    sniff,
    parse,
)
MSPROF_DB = Parser(
    "msprof-db",
    "Huawei Ascend msprof_*.db / ascend_pytorch_profiler_N.db SQLite export",
    sniff_db,
    parse,
)
