"""Legacy rocprof (v1/v2) rows in one normalized shape, whatever file they came from.

The database, JSON and CSV readers each produce :class:`Frames` — host API calls, device
operations and roctx markers as polars frames with the columns below — and
:func:`build` turns them into timeline parts. Agent descriptions (rocminfo text, or the
JSON's ``otherData``) map HSA node ids to GPU indices and fill ``meta["devices"]``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from tracekit.parsers.assemble import Part, assemble
from tracekit.parsers.names import NamePool
from tracekit.parsers.rocprof.args import STR, Field, json_args
from tracekit.parsers.rocprof.common import conform, durations, rebase
from tracekit.timeline import Timeline

CLOCK = "HSA system clock"
API_COLUMNS = {"begin": pl.Int64, "end": pl.Int64, "pid": pl.Int64, "tid": pl.Int64,
               "name": pl.String, "call": pl.String, "corr": pl.Int64}  # fmt: skip
DEVICE_COLUMNS = {
    "begin": pl.Int64, "end": pl.Int64, "node": pl.Int64, "gpu": pl.Int64, "queue": pl.Int64,
    "stream": pl.Int64, "name": pl.String, "pid": pl.Int64, "tid": pl.Int64, "corr": pl.Int64,
    "copy": pl.Boolean, "roctx": pl.String, "dispatch": pl.Int64, "grid": pl.Int64,
    "workgroup": pl.Int64, "lds": pl.Int64, "scratch": pl.Int64, "vgpr": pl.Int64,
    "accum_vgpr": pl.Int64, "sgpr": pl.Int64, "wave_size": pl.Int64,
}  # fmt: skip
MARK_COLUMNS = {"begin": pl.Int64, "end": pl.Int64, "pid": pl.Int64, "tid": pl.Int64,
                "name": pl.String}  # fmt: skip
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


@dataclass
class Agent:
    """One HSA agent as rocminfo describes it."""

    number: int
    values: dict[str, str]

    def get(self, *keys: str) -> str | None:
        for key in keys:
            if self.values.get(key):
                return self.values[key]
        return None


def agents_from_rocminfo(text: str) -> list[Agent]:
    """Agents of a ``rocminfo`` text (``results.sysinfo.txt``); keys lose their spaces."""
    agents: list[Agent] = []
    current: dict[str, str] | None = None
    segment = ""
    for line in text.splitlines():
        head = re.match(r"^Agent (\d+)\s*$", line)
        if head:
            current = {}
            agents.append(Agent(int(head.group(1)), current))
            segment = ""
            continue
        if current is None:
            continue
        match = re.match(r"^(\s+)([^:]+):\s*(.*?)\s*$", line)
        if not match:
            continue
        key = match.group(2).replace(" ", "")
        value = match.group(3)
        if key == "Segment":
            segment = value.replace(" ", "")
        elif key == "Size" and "Pool.GlobalSize" not in current and "GLOBAL" in segment:
            if "COARSEGRAINED" in segment and "FINE" not in segment:
                current["Pool.GlobalSize"] = value
        elif len(match.group(1)) == 2:
            current.setdefault(key, value)
    return agents


def agents_from_other_data(other: dict[str, Any]) -> list[Agent]:
    """Agents of the JSON's ``otherData`` (rocminfo flattened, spaces removed)."""
    by_number: dict[int, dict[str, str]] = {}
    pools: dict[tuple[int, str], dict[str, str]] = {}
    for key, value in other.items():
        match = re.match(r"^Agent(\d+)\.(.+)$", str(key))
        if not match:
            continue
        number, rest = int(match.group(1)), match.group(2)
        pool = re.match(r"^PoolInfo\.(Pool\d+)\.(\w+)$", rest)
        if pool:
            pools.setdefault((number, pool.group(1)), {})[pool.group(2)] = str(value)
        elif "." not in rest:
            by_number.setdefault(number, {}).setdefault(rest, str(value))
    for (number, _), info in sorted(pools.items()):
        values = by_number.setdefault(number, {})
        if info.get("Segment") == "GLOBAL" and info.get("FLAGS") == "COARSEGRAINED":
            values.setdefault("Pool.GlobalSize", info.get("Size", ""))
    return [Agent(n, v) for n, v in sorted(by_number.items())]


def devices(agents: list[Agent]) -> tuple[list[dict[str, Any]], dict[int, int]]:
    """GPU agents as timeline devices (index = order among GPUs), and node id -> index."""
    gpus = [a for a in agents if (a.get("DeviceType") or "").upper() == "GPU"]
    gpus.sort(key=lambda a: (_number(a.get("Node")) is None, _number(a.get("Node")) or 0))
    out, node_to_gpu = [], {}
    for index, agent in enumerate(gpus):
        node = _number(agent.get("Node"))
        if node is not None:
            node_to_gpu[node] = index
        out.append({
            "index": index, "name": agent.get("MarketingName", "Name"), "vendor": "AMD",
            "cores": _number(agent.get("ComputeUnit")),
            "memory": _kib(agent.get("Pool.GlobalSize")), "arch": agent.get("Name"),
            "node_id": node,
        })  # fmt: skip
    return out, node_to_gpu


def build(frames: Frames, meta: dict[str, Any], node_to_gpu: dict[int, int]) -> Timeline:
    """Timeline parts from normalized frames; ts 0 = the first event."""
    warnings = meta["warnings"]
    warnings.extend(frames.warnings)
    pool = NamePool()
    parts = []
    api = conform(frames.api, API_COLUMNS)
    if api.height:
        args = json_args(api, Field("args", pl.col("call"), STR))
        columns = {"device": -1, "rank": 0, "pid": api["pid"].to_arrow(),
                   "tid": api["tid"].to_arrow(), "corr": api["corr"].to_arrow(),
                   "args": args}  # fmt: skip
        dur = durations(api["begin"], api["end"], "API", warnings)
        name = pool.from_strings(api["name"].to_arrow())
        parts.append(Part("api", api["begin"].to_arrow(), dur, name, None, columns))
    parts += _device_parts(conform(frames.device, DEVICE_COLUMNS), pool, node_to_gpu, warnings)
    parts += _marker_parts(conform(frames.markers, MARK_COLUMNS), pool, warnings)
    table = rebase(assemble(parts, pool), meta, CLOCK)
    return Timeline(table, meta)


def _device_parts(df: pl.DataFrame, pool: NamePool, node_to_gpu: dict[int, int],
                  warnings: list[str]) -> list[Part]:  # fmt: skip
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
        pl.when(pl.col("name") == BARRIER).then(pl.lit("sync"))
        .when(pl.col("copy") & pl.col("name").str.contains("Fill")).then(pl.lit("memset"))
        .when(pl.col("copy")).then(pl.lit("memcpy"))
        .otherwise(pl.lit("kernel"))
    )  # fmt: skip
    df = df.with_columns(kind=kind)
    parts = []
    for kind_name, engine in (("kernel", "sm"), ("memcpy", "copy"), ("memset", None),
                              ("sync", None)):  # fmt: skip
        sel = df.filter(pl.col("kind") == kind_name)
        if not sel.height:
            continue
        args = json_args(
            sel,
            Field("hip_stream", pl.col("stream")),
            *(Field(key, pl.col(key)) for key in ("dispatch", "grid", "workgroup", "lds",
              "scratch", "vgpr", "accum_vgpr", "sgpr", "wave_size")),
            Field("node", pl.when(pl.col("gpu").is_null()).then(pl.col("node"))),
            Field("roctx", pl.when(pl.col("roctx") != pl.col("name")).then(pl.col("roctx")), STR),
        )  # fmt: skip
        columns = {"device": sel["device"].to_arrow(), "stream": sel["queue"].to_arrow(),
                   "rank": 0, "pid": sel["pid"].to_arrow(), "corr": sel["corr"].to_arrow(),
                   "args": args}  # fmt: skip
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
        columns = {"device": -1, "rank": 0, "pid": sel["pid"].to_arrow(),
                   "tid": sel["tid"].to_arrow()}  # fmt: skip
        name = pool.from_strings(sel["name"].to_arrow())
        parts.append(Part(kind, sel["begin"].to_arrow(), dur, name, None, columns))
    return parts


def _number(text: str | None) -> int | None:
    match = re.match(r"^\s*(\d+)", text or "")
    return int(match.group(1)) if match else None


def _kib(text: str | None) -> int | None:
    """``98650232(0x5e14878) KB`` -> bytes."""
    value = _number(text)
    return None if value is None or "KB" not in (text or "").upper() else value * 1024
