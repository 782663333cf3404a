"""rocpd info tables and event fields: agents as devices, categories, correlation ids."""

from __future__ import annotations

import json
from typing import Any

import polars as pl
import pyarrow as pa

from tracekit.parsers.convert import as_int
from tracekit.parsers.rocprof.meta import device

API_PREFIXES = (
    "HIP_",
    "HSA_",
    "RCCL_",
    "MARKER_CONTROL",
    "MARKER_NAME",
    "ROCDECODE_",
    "ROCJPEG_",
    "OMPT",
    "OPENMP",
    "KFD",
    "MPI",
)
MARKER_PREFIX = "MARKER_CORE"  # roctx ranges and marks
AGENT_COLUMNS = (
    "id",
    "type",
    "absolute_index",
    "logical_index",
    "type_index",
    "name",
    "model_name",
    "vendor_name",
    "product_name",
    "extdata",
)


def read_agents(
    agents: list[dict[str, Any]],
) -> tuple[list[dict[str, Any]], dict[int, int], dict[Any, str]]:
    """GPU agents as timeline devices, agent id -> GPU index, and agent id -> "GPUn"/"CPUn".

    The GPU index is rocprofiler-sdk's ``gpu_index`` (extdata), else the agent's
    ``type_index``; ``node_id`` keeps the absolute (KFD node) index.
    """
    devices, gpu_of, label = [], {}, {}
    cpus = 0
    for agent in agents:
        ext = _extdata(agent.get("extdata"))
        agent_id = agent.get("id")
        if agent.get("type") != "GPU" or not isinstance(agent_id, int):
            label[agent_id] = f"CPU{cpus}"
            cpus += 1
            continue
        index = ext.get("gpu_index")
        if not isinstance(index, int) or index < 0:
            index = agent.get("type_index")
        gpu_of[agent_id] = index
        label[agent_id] = f"GPU{index}"
        name = agent.get("product_name") or agent.get("name")
        cores = as_int(ext.get("cu_count"))
        node = agent.get("absolute_index")
        devices.append(
            device(index, name, cores, _memory(ext), arch=agent.get("name"), node_id=node)
        )
    devices.sort(key=lambda d: (d["index"] is None, d["index"] or 0))
    return devices, gpu_of, label


def category_group(category: str | None) -> str:
    """``api`` (runtime/library calls), ``marker`` (roctx) or ``other``, by category."""
    if category is not None and category.startswith(API_PREFIXES):
        return "api"
    if category is not None and category.startswith(MARKER_PREFIX):
        return "marker"
    return "other"


def nonzero(column: str) -> pl.Expr:
    return pl.when(pl.col(column) != 0).then(pl.col(column))


def correlation(df: pl.DataFrame) -> pa.Array:
    """Internal correlation id (stack_id); the external id only where that is missing."""
    stack = df["stack_id"]
    ext = df["correlation_id"]
    value = pl.select(
        pl.when(stack.is_not_null() & (stack != 0))
        .then(stack)
        .when(ext.is_not_null() & (ext != 0))
        .then(ext)
    ).to_series()
    return value.to_arrow()


def id_mapping(df: pl.DataFrame | None, column: str) -> dict[int, int]:
    if df is None:
        return {}
    return {i: v for i, v in df.select("id", column).iter_rows() if i is not None and v is not None}


def _extdata(raw: Any) -> dict[str, Any]:
    if not isinstance(raw, (str, bytes)):
        return {}
    try:
        value = json.loads(raw)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _memory(ext: dict[str, Any]) -> int | None:
    banks = [b for b in ext.get("mem_banks") or [] if isinstance(b, dict)]
    sizes = [b.get("size_in_bytes") for b in banks if b.get("heap_type") in (1, 2)]
    sizes = [s for s in sizes if isinstance(s, int)] or [
        s for s in (b.get("size_in_bytes") for b in banks[:1]) if isinstance(s, int)
    ]
    return sum(sizes) if sizes else None
