"""Legacy rocprof (v1/v2) rows in one normalized shape, whatever file they came from.

The database, JSON and CSV readers each produce :class:`Frames` — host API calls, device
operations and roctx markers as polars frames with the columns below — and :func:`build`
turns them into timeline parts and the events table (through
:func:`tracekit.parsers.rocprof.table.events_table`: ``assemble``, then ts 0 at the first event).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from tracekit.parsers.assemble import Part
from tracekit.parsers.name_pool import NamePool
from tracekit.parsers.rocprof.args import STR, Field, json_args
from tracekit.parsers.rocprof.table import conform, durations, events_table
from tracekit.timeline import Timeline

CLOCK = "HSA system clock"
API_COLUMNS = {
    "begin": pl.Int64,
    "end": pl.Int64,
    "pid": pl.Int64,
    "tid": pl.Int64,
    "name": pl.String,
    "call": pl.String,
    "corr": pl.Int64,
}
DEVICE_COLUMNS = {
    "begin": pl.Int64,
    "end": pl.Int64,
    "node": pl.Int64,
    "gpu": pl.Int64,
    "queue": pl.Int64,
    "stream": pl.Int64,
    "name": pl.String,
    "pid": pl.Int64,
    "tid": pl.Int64,
    "corr": pl.Int64,
    "copy": pl.Boolean,
    "roctx": pl.String,
    "dispatch": pl.Int64,
    "grid": pl.Int64,
    "workgroup": pl.Int64,
    "lds": pl.Int64,
    "scratch": pl.Int64,
    "vgpr": pl.Int64,
    "accum_vgpr": pl.Int64,
    "sgpr": pl.Int64,
    "wave_size": pl.Int64,
}
MARK_COLUMNS = {
    "begin": pl.Int64,
    "end": pl.Int64,
    "pid": pl.Int64,
    "tid": pl.Int64,
    "name": pl.String,
}
BARRIER = "<barrier packet>"
HSA_CORR_OFFSET = 1 << 40  # HSA and HIP number their calls separately; keep the links apart


def unquote(expr: pl.Expr) -> pl.Expr:
    """Drop one pair of surrounding double quotes (rocprof stores kernel names quoted)."""
    quoted = expr.str.starts_with('"') & expr.str.ends_with('"') & (expr.str.len_chars() > 1)
    return pl.when(quoted).then(expr.str.slice(1, expr.str.len_chars() - 2)).otherwise(expr)


@dataclass
class Frames:
    """Normalized rows of one legacy rocprof output."""

    api: pl.DataFrame | None = None
    device: pl.DataFrame | None = None
    markers: pl.DataFrame | None = None
    warnings: list[str] = field(default_factory=list)


def build(frames: Frames, meta: dict[str, Any], node_to_gpu: dict[int, int]) -> Timeline:
    """Timeline parts from normalized frames; ts 0 = the first event."""
    warnings = meta["warnings"]
    warnings.extend(frames.warnings)
    pool = NamePool()
    parts = []
    api = conform(frames.api, API_COLUMNS)
    if api.height:
        args = json_args(api, Field("args", pl.col("call"), STR))
        columns = {
            "device": -1,
            "rank": 0,
            "pid": api["pid"].to_arrow(),
            "tid": api["tid"].to_arrow(),
            "corr": api["corr"].to_arrow(),
            "args": args,
        }
        dur = durations(api["begin"], api["end"], "API", warnings)
        name = pool.from_strings(api["name"].to_arrow())
        parts.append(Part("api", api["begin"].to_arrow(), dur, name, None, columns))
    parts += _device_parts(conform(frames.device, DEVICE_COLUMNS), pool, node_to_gpu, warnings)
    parts += _marker_parts(conform(frames.markers, MARK_COLUMNS), pool, warnings)
    table = events_table(parts, pool, meta, CLOCK)
    return Timeline(table, meta)


def _device_parts(
    df: pl.DataFrame, pool: NamePool, node_to_gpu: dict[int, int], warnings: list[str]
) -> list[Part]:
    if not df.height:
        return []
    df = df.with_columns(name=unquote(pl.col("name")), roctx=unquote(pl.col("roctx")))
    from_node = pl.col("node").replace_strict(node_to_gpu, default=None, return_dtype=pl.Int64)
    unmapped = df.filter(pl.col("gpu").is_null() & pl.col("node").is_not_null())
    if node_to_gpu:
        unmapped = unmapped.filter(from_node.is_null())
    if unmapped.height:
        warnings.append(
            f"{unmapped.height} device rows on HSA nodes without a GPU description; device ="
            " the node id"
        )
    device = pl.coalesce("gpu", from_node, "node") if node_to_gpu else pl.coalesce("gpu", "node")
    df = df.with_columns(device=device)
    kind = (
        pl.when(pl.col("name") == BARRIER)
        .then(pl.lit("sync"))
        .when(pl.col("copy") & pl.col("name").str.contains("Fill"))
        .then(pl.lit("memset"))
        .when(pl.col("copy"))
        .then(pl.lit("memcpy"))
        .otherwise(pl.lit("kernel"))
    )
    df = df.with_columns(kind=kind)
    parts = []
    for kind_name, engine in (
        ("kernel", "sm"),
        ("memcpy", "copy"),
        ("memset", None),
        ("sync", None),
    ):
        sel = df.filter(pl.col("kind") == kind_name)
        if not sel.height:
            continue
        args = json_args(
            sel,
            Field("hip_stream", pl.col("stream")),
            *(
                Field(key, pl.col(key))
                for key in (
                    "dispatch",
                    "grid",
                    "workgroup",
                    "lds",
                    "scratch",
                    "vgpr",
                    "accum_vgpr",
                    "sgpr",
                    "wave_size",
                )
            ),
            Field("node", pl.when(pl.col("gpu").is_null()).then(pl.col("node"))),
            Field("roctx", pl.when(pl.col("roctx") != pl.col("name")).then(pl.col("roctx")), STR),
        )
        columns = {
            "device": sel["device"].to_arrow(),
            "stream": sel["queue"].to_arrow(),
            "rank": 0,
            "pid": sel["pid"].to_arrow(),
            "corr": sel["corr"].to_arrow(),
            "args": args,
        }
        dur = durations(sel["begin"], sel["end"], kind_name, warnings)
        name = pool.from_strings(sel["name"].to_arrow())
        parts.append(Part(kind_name, sel["begin"].to_arrow(), dur, name, engine, columns))
    return parts


def _marker_parts(df: pl.DataFrame, pool: NamePool, warnings: list[str]) -> list[Part]:
    """roctx rows: a mark is stored with end = begin + 1 ns; it becomes a 0 ns marker."""
    if not df.height:
        return []
    parts = []
    instant = (pl.col("end") - pl.col("begin")) <= 1
    for kind, sel in (("marker", df.filter(instant)), ("range", df.filter(~instant))):
        if not sel.height:
            continue
        if kind == "marker":
            dur: Any = pa.array(np.zeros(sel.height, dtype=np.int64))
        else:
            dur = durations(sel["begin"], sel["end"], "roctx range", warnings)
        columns = {
            "device": -1,
            "rank": 0,
            "pid": sel["pid"].to_arrow(),
            "tid": sel["tid"].to_arrow(),
        }
        name = pool.from_strings(sel["name"].to_arrow())
        parts.append(Part(kind, sel["begin"].to_arrow(), dur, name, None, columns))
    return parts
