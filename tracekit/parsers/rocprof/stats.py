"""rocprof's own statistics files, kept as vendor summaries for ``tracekit.checks``.

Legacy rocprof (``--stats``, ``--hip-trace`` …) writes ``<stem>.stats.csv`` (kernels: the KERN
table, or with ``--hip-trace``/``--sys-trace`` the OPS table), ``<stem>.hip_stats.csv``,
``<stem>.hsa_stats.csv`` and ``<stem>.copy_stats.csv`` next to ``<stem>.csv``/``.db``/``.json``;
rocprofv3 ``--stats`` writes ``<prefix>_kernel_stats.csv``, ``<prefix>_hip_api_stats.csv`` …
and ``<prefix>_memory_copy_stats.csv`` next to its traces. All start
``Name,Calls,TotalDurationNs`` (quoted header; rocprofv3 adds averages, min, max, stddev), one
row per name, ``TotalDurationNs`` the sum of ``end - begin`` in ns.

Each file becomes one ``meta["summaries"]`` entry (``tracekit.checks.vendor`` documents the
shape): ``kind`` is ``kernels`` (compared with the device rows), ``api`` or ``copies``;
``key`` is ``name`` and ``name_column`` is ``raw``: the keys are kernel names exactly as the
profiler wrote them, which is what the rows' ``name`` holds unless a later stage rewrites names.
rocprof's ``<barrier packet>`` entries of the OPS table are device barriers (``sync`` rows
here, not kernels): they are left out of the kernel summary and named in ``excluded``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from tracekit.parsers.rocprof.csv_header import read_header

COLUMNS = ("Name", "Calls", "TotalDurationNs")
BARRIER = "<barrier packet>"
# file-name suffix after the stem (legacy) -> summary kind
LEGACY = {
    ".stats.csv": "kernels",
    ".hip_stats.csv": "api",
    ".hsa_stats.csv": "api",
    ".copy_stats.csv": "copies",
}
# file-name suffix after the prefix (rocprofv3) -> summary kind
V3 = {
    "kernel_stats.csv": "kernels",
    "hip_api_stats.csv": "api",
    "hsa_api_stats.csv": "api",
    "rccl_api_stats.csv": "api",
    "memory_copy_stats.csv": "copies",
}


def read_stats(path: Path, kind: str) -> dict[str, Any] | None:
    """One stats file as a summary entry; None when it is missing or not a stats table."""
    if not path.is_file() or not set(COLUMNS) <= set(read_header(path)):
        return None
    try:
        raw = pl.read_csv(path, infer_schema=False, columns=list(COLUMNS), encoding="utf8-lossy")
    except (pl.exceptions.PolarsError, OSError):
        return None
    frame = raw.select(
        pl.col("Name").alias("key"),
        pl.col("Calls").str.strip_chars().cast(pl.Int64, strict=False).alias("calls"),
        pl.col("TotalDurationNs")
        .str.strip_chars()
        .cast(pl.Float64, strict=False)
        .round()
        .cast(pl.Int64)
        .alias("total_ns"),
    )
    # a row whose numbers cannot be read is left out (and counted) rather than compared
    readable = pl.col("key").is_not_null() & pl.col("calls").is_not_null()
    unreadable = frame.filter(~(readable & pl.col("total_ns").is_not_null())).height
    frame = frame.filter(readable & pl.col("total_ns").is_not_null())
    summary: dict[str, Any] = {
        "kind": kind,
        "source": path.name,
        "key": "name",
        "name_column": "raw",
        "rank": None,
    }
    if kind == "kernels" and (frame["key"] == BARRIER).any():
        frame = frame.filter(pl.col("key") != BARRIER)
        summary["excluded"] = [BARRIER]
    summary["rows"] = frame.to_dicts()
    if unreadable:
        summary["unreadable"] = unreadable
    return summary


def legacy_summaries(trace: Path) -> list[dict[str, Any]]:
    """The stats files beside a legacy rocprof ``<stem>.csv``/``.db``/``.json``."""
    stem = trace.name.rsplit(".", 1)[0]
    found = (read_stats(trace.with_name(stem + suffix), kind) for suffix, kind in LEGACY.items())
    return [s for s in found if s is not None]


def v3_summaries(folder: Path, prefix: str) -> list[dict[str, Any]]:
    """The ``--stats`` files of one rocprofv3 CSV run (``prefix`` as its trace files have)."""
    head = f"{prefix}_" if prefix else ""
    found = (read_stats(folder / (head + suffix), kind) for suffix, kind in V3.items())
    return [s for s in found if s is not None]
