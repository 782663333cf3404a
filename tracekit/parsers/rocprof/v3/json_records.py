"""msgspec structs for rocprofv3 JSON output, declaring only the fields tracekit keeps, and
their conversion to numpy columns."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec
import numpy as np
import polars as pl

from tracekit.parsers.convert import ints, texts


class Handle(msgspec.Struct, gc=False):
    handle: int = 0


class Corr(msgspec.Struct, gc=False):
    internal: int = 0
    external: int = 0


class Dim3(msgspec.Struct, gc=False):
    x: int = 0
    y: int = 0
    z: int = 0


class DispatchInfo(msgspec.Struct, gc=False):
    agent_id: Handle = msgspec.field(default_factory=Handle)
    queue_id: Handle = msgspec.field(default_factory=Handle)
    kernel_id: int = 0
    dispatch_id: int = 0
    private_segment_size: int = 0
    group_segment_size: int = 0
    workgroup_size: Dim3 = msgspec.field(default_factory=Dim3)
    grid_size: Dim3 = msgspec.field(default_factory=Dim3)


class Record(msgspec.Struct, gc=False):
    """The fields of every buffer record kind tracekit reads (absent ones keep defaults)."""

    kind: int = 0
    operation: int = 0
    thread_id: int = 0
    correlation_id: Corr = msgspec.field(default_factory=Corr)
    start_timestamp: int = 0
    end_timestamp: int | None = None
    dispatch_info: DispatchInfo = msgspec.field(default_factory=DispatchInfo)  # kernel_dispatch
    stream_id: Handle | None = None  # kernel_dispatch, memory_copy (newer output)
    src_agent_id: Handle = msgspec.field(default_factory=Handle)  # memory_copy
    dst_agent_id: Handle = msgspec.field(default_factory=Handle)
    bytes: int | None = None
    agent_id: Handle = msgspec.field(default_factory=Handle)  # memory_allocation, scratch_memory
    queue_id: Handle | None = None  # scratch_memory
    address: str | int | None = None  # memory_allocation
    allocation_size: int | None = None
    flags: int | None = None  # scratch_memory


class BufferRecords(msgspec.Struct, gc=False):
    kernel_dispatch: list[Record] = []
    memory_copy: list[Record] = []
    memory_allocation: list[Record] = []
    scratch_memory: list[Record] = []
    hip_api: list[Record] = []
    hsa_api: list[Record] = []
    marker_api: list[Record] = []
    rccl_api: list[Record] = []
    rocdecode_api: list[Record] = []
    rocjpeg_api: list[Record] = []


class KindNames(msgspec.Struct, gc=False):
    kind: str = ""
    operations: list[str] = []


class Message(msgspec.Struct, gc=False):
    key: int = 0
    value: str = ""


class Strings(msgspec.Struct, gc=False):
    buffer_records: list[KindNames] = []
    marker_api: list[Message] = []


class KernelSymbol(msgspec.Struct, gc=False):
    kernel_id: int = 0
    kernel_name: str = ""
    formatted_kernel_name: str = ""
    demangled_kernel_name: str = ""
    sgpr_count: int = 0
    arch_vgpr_count: int = 0
    accum_vgpr_count: int = 0


class MemBank(msgspec.Struct, gc=False):
    size_in_bytes: int = 0


class AgentRecord(msgspec.Struct, gc=False):
    id: Handle = msgspec.field(default_factory=Handle)
    type: int = 0
    cpu_cores_count: int = 0
    cu_count: int = 0
    name: str = ""
    product_name: str = ""
    node_id: int | None = None
    logical_node_id: int | None = None
    gpu_index: int | None = None
    mem_banks: list[MemBank] = []


class Node(msgspec.Struct, gc=False):
    hostname: str | None = None


class Config(msgspec.Struct, gc=False):
    kernel_rename: bool = False


class Process(msgspec.Struct, gc=False):
    pid: int | None = None
    init_time: int | None = None
    fini_time: int | None = None
    command: list[str] = []
    node: Node = msgspec.field(default_factory=Node)
    config: Config = msgspec.field(default_factory=Config)


class Tool(msgspec.Struct, gc=False):
    metadata: Process = msgspec.field(default_factory=Process)
    agents: list[AgentRecord] = []
    strings: Strings = msgspec.field(default_factory=Strings)
    kernel_symbols: list[KernelSymbol] = []
    buffer_records: BufferRecords = msgspec.field(default_factory=BufferRecords)


class Root(msgspec.Struct, gc=False):
    tool: list[Tool] | None = msgspec.field(name="rocprofiler-sdk-tool", default=None)


def _ints(values: Sequence[Any]) -> np.ndarray:
    return np.fromiter(values, dtype=np.int64, count=len(values))


def _nullable(values: list[Any]) -> pl.Series:
    return pl.Series(ints(values, typed=True))


def columns_of(records: list[Record], kind: str) -> dict[str, Any]:
    """Columns of the fields ``kind`` uses (one comprehension per field): numpy int64
    arrays, or Int64 polars Series for fields that may be absent."""
    cols: dict[str, Any] = {
        "start": _ints([r.start_timestamp for r in records]),
        "end": _nullable([r.end_timestamp for r in records]),
        "kind": _ints([r.kind for r in records]),
        "op": _ints([r.operation for r in records]),
        "tid": _ints([r.thread_id for r in records]),
        "corr": _ints([r.correlation_id.internal for r in records]),
    }
    if kind == "kernel":
        infos = [r.dispatch_info for r in records]
        cols |= {
            "agent": _ints([i.agent_id.handle for i in infos]),
            "queue": _ints([i.queue_id.handle for i in infos]),
            "kernel_id": _ints([i.kernel_id for i in infos]),
            "lds": _ints([i.group_segment_size for i in infos]),
            "scratch": _ints([i.private_segment_size for i in infos]),
            **{f"grid_{a}": _ints([getattr(i.grid_size, a) for i in infos]) for a in "xyz"},
            **{f"block_{a}": _ints([getattr(i.workgroup_size, a) for i in infos]) for a in "xyz"},
        }
    if kind in ("kernel", "memcpy"):
        cols["stream"] = _nullable(
            [None if r.stream_id is None else r.stream_id.handle for r in records]
        )
    if kind == "memcpy":
        cols |= {
            "src": _ints([r.src_agent_id.handle for r in records]),
            "dst": _ints([r.dst_agent_id.handle for r in records]),
            "bytes": _nullable([r.bytes for r in records]),
        }
    if kind in ("memory_allocation", "scratch_memory"):
        cols |= {
            "agent": _ints([r.agent_id.handle for r in records]),
            "bytes": _nullable([r.allocation_size for r in records]),
            "address": pl.Series(texts([r.address for r in records])),
            "queue": _nullable(
                [None if r.queue_id is None else r.queue_id.handle for r in records]
            ),
            "flags": _nullable([r.flags for r in records]),
        }
    return cols
