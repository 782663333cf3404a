"""Any Ascend profiler output -> one Timeline: the sources a path names (:mod:`.layout`), each
read by :mod:`.text` or :mod:`.db`, one rank each, their rows on one table (:func:`.rows.to_table`)
with the metadata of all."""

from __future__ import annotations

import re
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import polars as pl

from tracekit.errors import TraceError
from tracekit.parsers.base import Progress
from tracekit.parsers.msprof import layout, mc2
from tracekit.parsers.msprof.db import read_db
from tracekit.parsers.msprof.detect import sniff_db, sniff_db_trace
from tracekit.parsers.msprof.device import unknown_types
from tracekit.parsers.msprof.meta import devices_list, rank_of
from tracekit.parsers.msprof.rows import Loaded, conform, to_table
from tracekit.parsers.msprof.text import first_ts, read_text
from tracekit.parsers.probe import Probe
from tracekit.timeline import Timeline, empty_meta


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
        one.frames = []  # held by ``frames`` alone, which the table takes apart
    if not any(f.height for f in frames):
        raise TraceError(
            f"{path}: Ascend output with no rows (no device task, operator or API "
            "call); the export was cut short, export again"
        )
    note("assembling")
    origin = first_ts(frames) or 0
    with ThreadPoolExecutor(max_workers=1) as pool:  # both release the GIL
        counts = pool.submit(mc2.summary, [f.select("kind", "args") for f in frames])
        table = to_table(frames, origin)
        meta = _metadata(path, loaded, ranks, table, warnings, counts)
    # each output is one process: its recorded rank, else one per output in folder order
    recorded = any(s.rank is not None for s in sources)
    meta["rank_source"] = "hccl" if recorded else "process" if len(sources) > 1 else "none"
    meta["origin_ns"] = None if any(x.monotonic for x in loaded) else origin
    if meta["origin_ns"] is None:
        meta["clock"] = {"domain": "CLOCK_MONOTONIC_RAW", "zero_ns": origin}
    return Timeline(table, meta)


_CUT = re.compile(r"(?:rank \d+: )?([^:]+): the (?:trace|file) is cut short")


def _with_rank(source: layout.Source) -> layout.Source:
    """The source with the rank its metadata records (profiler_info, info.json, db map)."""
    if source.rank is None:
        source.rank = rank_of(source)
    return source


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
    cut = [m[1] for w in warnings if (m := _CUT.match(w))]
    if cut:
        meta["truncated"] = {"files": cut}
    return meta
