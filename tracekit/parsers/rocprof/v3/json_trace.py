"""rocprofv3 ``--output-format json`` (``*_results.json``, ``.json.gz``).

``{"rocprofiler-sdk-tool": [one object per process]}``; each holds ``agents``, ``strings``
(kind and operation names per buffer-record kind, roctx messages), ``kernel_symbols`` and
``buffer_records`` (kernel_dispatch, memory_copy, memory_allocation, scratch_memory,
hip_api, hsa_api, marker_api, rccl_api, rocdecode_api, rocjpeg_api). Decoded with msgspec
structs that declare only the fields kept.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import polars as pl

from tracekit.errors import TraceError
from tracekit.parsers.assemble import Part
from tracekit.parsers.base import Progress
from tracekit.parsers.io import read_bytes
from tracekit.parsers.name_pool import NamePool
from tracekit.parsers.probe import Probe
from tracekit.parsers.rocprof import sdk
from tracekit.parsers.rocprof.args import INT, STR, Field, blank_as_null, json_args
from tracekit.parsers.rocprof.meta import skeleton
from tracekit.parsers.rocprof.table import durations, events_table
from tracekit.parsers.rocprof.v3.agents import Agent, AgentTable
from tracekit.parsers.rocprof.v3.json_records import Process, Root, Tool, columns_of
from tracekit.timeline import Timeline

JSON_KEY = b'"rocprofiler-sdk-tool"'
_API_BUFFERS = ("hip_api", "hsa_api", "marker_api", "rccl_api", "rocdecode_api", "rocjpeg_api")


def _agents(tool: Tool) -> AgentTable:
    agents = []
    for a in tool.agents:
        kind = {1: "CPU", 2: "GPU"}.get(a.type, "UNK")
        memory = sum(b.size_in_bytes for b in a.mem_banks) if kind == "GPU" else 0
        agents.append(
            Agent(
                node_id=a.node_id,
                logical_node_id=a.logical_node_id,
                type=kind,
                name=a.product_name or None,
                arch=a.name or None,
                cores=a.cu_count if kind == "GPU" else a.cpu_cores_count,
                memory=memory or None,
                handle=a.id.handle,
                gpu_index=a.gpu_index if kind == "GPU" else None,
            )
        )
    return AgentTable(agents)


class ProcessReader:
    """Rows of one process object of the JSON output."""

    def __init__(self, tool: Tool, pool: NamePool, warnings: list[str]) -> None:
        self.tool = tool
        self.pool = pool
        self.warnings = warnings
        self.agents = _agents(tool)
        self.pid = tool.metadata.pid
        handles = [a.handle for a in self.agents.agents]
        self._handles = np.array(handles, dtype=np.int64)
        self._gpu = np.array(
            [-1 if a.gpu_index is None else a.gpu_index for a in self.agents.agents], dtype=np.int64
        )
        kinds = tool.strings.buffer_records
        self._kind_names = [k.kind for k in kinds]
        offsets = np.cumsum([0] + [len(k.operations) for k in kinds])
        self._op_offset = offsets[:-1]
        self._op_count = np.array([len(k.operations) for k in kinds], dtype=np.int64)
        flat = [op for k in kinds for op in k.operations]
        self._op_text = np.array([*flat, None], dtype=object)  # last slot: unknown
        self._op_names = np.append(self.pool.from_strings(flat), -1)
        messages = sorted((m.key, m.value) for m in tool.strings.marker_api)
        self._msg_keys = np.array([k for k, _ in messages], dtype=np.int64)
        self._msg_text = np.array([*(v for _, v in messages), None], dtype=object)

    def _device(self, handles: np.ndarray) -> pl.Series:
        """GPU index per agent handle (null for CPU or unknown agents)."""
        if not len(self._handles):
            return pl.Series([None] * len(handles), dtype=pl.Int32)
        order = np.argsort(self._handles)
        pos = np.clip(np.searchsorted(self._handles[order], handles), 0, len(order) - 1)
        found = self._handles[order][pos] == handles
        gpu = np.where(found, self._gpu[order][pos], -1)
        return pl.Series(gpu, dtype=pl.Int32).replace(-1, None)

    def _operations(self, kind: np.ndarray, op: np.ndarray, label: str) -> np.ndarray:
        """Flat index of ``strings.buffer_records[kind].operations[op]`` (last slot: unknown)."""
        unknown = len(self._op_text) - 1
        valid = (kind >= 0) & (kind < len(self._op_count))
        safe_kind = np.where(valid, kind, 0)
        if len(self._op_count):
            valid &= (op >= 0) & (op < self._op_count[safe_kind])
        else:
            valid[:] = False
        if (~valid).any():
            self.warnings.append(f"{int((~valid).sum())} {label} rows with an unknown operation")
        if not len(self._op_count):
            return np.full(len(kind), unknown)
        return np.where(valid, self._op_offset[safe_kind] + np.where(valid, op, 0), unknown)

    def _operation_names(self, kind: np.ndarray, op: np.ndarray, label: str) -> np.ndarray:
        """Pool indices of the operation names (-1 when unknown)."""
        return self._op_names[self._operations(kind, op, label)]

    def _messages(self, corr: np.ndarray) -> pl.Series:
        """roctx message per correlation id (``strings.marker_api``), null where none."""
        none = len(self._msg_text) - 1
        if not len(self._msg_keys):
            return pl.Series([None] * len(corr), dtype=pl.String)
        pos = np.clip(np.searchsorted(self._msg_keys, corr), 0, len(self._msg_keys) - 1)
        index = np.where(self._msg_keys[pos] == corr, pos, none)
        return pl.Series(self._msg_text[index].tolist(), dtype=pl.String)

    def _base(self, cols: dict[str, np.ndarray], label: str) -> tuple[np.ndarray, np.ndarray]:
        start = cols["start"]
        return start, durations(start, cols["end"], label, self.warnings)

    def _symbols(self, kernel_id: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per dispatch: whether ``kernel_symbols`` has its kernel id, and at which position."""
        ids = np.array([s.kernel_id for s in self.tool.kernel_symbols], dtype=np.int64)
        if not len(ids):
            return np.zeros(len(kernel_id), dtype=bool), np.zeros(len(kernel_id), dtype=np.int64)
        order = np.argsort(ids, kind="stable")
        pos = order[np.clip(np.searchsorted(ids[order], kernel_id), 0, len(ids) - 1)]
        return ids[pos] == kernel_id, pos

    def kernels(self) -> list[Part]:
        cols = columns_of(self.tool.buffer_records.kernel_dispatch, "kernel")
        if not len(cols["start"]):
            return []
        start, dur = self._base(cols, "kernel")
        symbols = self.tool.kernel_symbols
        found, pos = self._symbols(cols["kernel_id"])
        names = self.pool.from_strings(
            [
                s.formatted_kernel_name or s.demangled_kernel_name or s.kernel_name or None
                for s in symbols
            ]
        )
        name = np.where(found, names[pos] if len(names) else -1, -1)
        if (~found).any():
            self.warnings.append(
                f"{int((~found).sum())} kernels with an id missing from"
                " kernel_symbols; left without a name"
            )
        regs = {}
        for key, attr in (
            ("vgpr", "arch_vgpr_count"),
            ("accum_vgpr", "accum_vgpr_count"),
            ("sgpr", "sgpr_count"),
        ):
            values = np.array([getattr(s, attr) for s in symbols] or [0], dtype=np.int64)
            regs[key] = pl.select(
                pl.when(pl.Series(found)).then(pl.Series(values[pos]))
            ).to_series()
        frame = pl.DataFrame(
            {
                **{k: v for k, v in cols.items() if k.startswith(("grid", "block"))},
                "lds": cols["lds"],
                "scratch": cols["scratch"],
                **regs,
                "hip_stream": cols["stream"],
            }
        )
        fields = [
            Field("block", ("block_x", "block_y", "block_z"), INT, True),
            *(
                Field(k, k, INT, True)
                for k in ("lds", "scratch", "vgpr", "accum_vgpr", "sgpr", "hip_stream")
            ),
            Field("grid", ("grid_x", "grid_y", "grid_z"), INT, True),
        ]
        columns = {
            "device": self._device(cols["agent"]).to_arrow(),
            "stream": cols["queue"],
            "rank": 0,
            "pid": self.pid,
            "corr": cols["corr"],
            "args": json_args(frame, *fields, split=7),
        }
        return [Part("kernel", start, dur, name, "sm", columns)]

    def memcpy(self) -> list[Part]:
        cols = columns_of(self.tool.buffer_records.memory_copy, "memcpy")
        if not len(cols["start"]):
            return []
        start, dur = self._base(cols, "memory copy")
        src, dst = self._device(cols["src"]), self._device(cols["dst"])
        device = pl.select(src.fill_null(dst)).to_series()  # the GPU end of the copy
        frame = pl.DataFrame(
            {"src": src, "dst": dst, "bytes": cols["bytes"], "hip_stream": cols["stream"]}
        )
        keys = {
            "src_device": "src",
            "dst_device": "dst",
            "bytes": "bytes",
            "hip_stream": "hip_stream",
        }
        fields = [Field(k, c, INT, True) for k, c in keys.items()]
        columns = {
            "device": device.to_arrow(),
            "rank": 0,
            "pid": self.pid,
            "corr": cols["corr"],
            "args": json_args(frame, *fields),
        }
        name = self._operation_names(cols["kind"], cols["op"], "memory copy")
        return [Part("memcpy", start, dur, name, "copy", columns)]

    def host_ops(self) -> list[Part]:
        """Memory allocation and scratch memory records: runtime work on a host thread."""
        parts = []
        for buffer, extra in (
            ("memory_allocation", ("bytes", "address")),
            ("scratch_memory", ("queue", "flags")),
        ):
            cols = columns_of(getattr(self.tool.buffer_records, buffer), buffer)
            if not len(cols["start"]):
                continue
            start, dur = self._base(cols, buffer.replace("_", " "))
            data = {"device": self._device(cols["agent"]), **{k: cols[k] for k in extra}}
            frame = pl.DataFrame(data)
            fields = [
                Field(k, blank_as_null(k), STR, True) if k == "address" else Field(k, k, INT, True)
                for k in ("device", *extra)
            ]
            columns = {
                "device": -1,
                "rank": 0,
                "pid": self.pid,
                "tid": cols["tid"],
                "corr": cols["corr"],
                "args": json_args(frame, *fields),
            }
            name = self._operation_names(cols["kind"], cols["op"], buffer.replace("_", " "))
            parts.append(Part("api", start, dur, name, None, columns))
        return parts

    def api(self) -> list[Part]:
        parts = []
        for buffer in _API_BUFFERS:
            cols = columns_of(getattr(self.tool.buffer_records, buffer), "api")
            if not len(cols["start"]):
                continue
            start, dur = self._base(cols, buffer.replace("_", " "))
            flat = self._operations(cols["kind"], cols["op"], buffer.replace("_", " "))
            name = self._op_names[flat]
            op_name = pl.Series(self._op_text[flat].tolist(), dtype=pl.String)
            domain = pl.Series(cols["kind"]).replace_strict(
                dict(enumerate(self._kind_names)), default=None, return_dtype=pl.String
            )
            if buffer == "marker_api":  # roctx messages replace roctxMarkA / RangePushA …
                text = self._messages(cols["corr"])
                has = (text.is_not_null() & domain.is_in(sdk.MARKER_DOMAINS)).to_numpy()
                name = np.where(has, self.pool.from_strings(text.to_arrow()), name)
                op_name = pl.select(
                    pl.when(pl.Series(has)).then(text).otherwise(op_name)
                ).to_series()
            end = cols["end"].fill_null(-1).to_numpy()
            kinds = sdk.api_kinds(domain, op_name, start, end)
            args = json_args(domain.to_frame("domain"), Field("domain", "domain", STR, True))
            for code, kind in enumerate(sdk.API_KINDS):
                sel = np.nonzero(kinds == code)[0]
                if len(sel):
                    columns = {
                        "device": -1,
                        "rank": 0,
                        "pid": self.pid,
                        "tid": cols["tid"][sel],
                        "corr": cols["corr"][sel],
                        "args": args.take(sel),
                    }
                    parts.append(Part(kind, start[sel], dur[sel], name[sel], None, columns))
        return parts


def sniff(probe: Probe) -> bool:
    """A JSON object whose first key is ``rocprofiler-sdk-tool`` (plain or gzip)."""
    if not probe.path.is_file():
        return False
    text = probe.text_head[: 1 << 14].lstrip(b"\xef\xbb\xbf \t\r\n")
    return text.startswith(b"{") and text[1:].lstrip().startswith(JSON_KEY)


def _decode(path: Path) -> Root:
    data = read_bytes(path)
    try:
        return msgspec.json.decode(data, type=Root)
    except msgspec.ValidationError as exc:
        raise TraceError(f"{path}: JSON is not rocprofv3 output as expected ({exc})") from exc
    except msgspec.DecodeError as exc:
        raise TraceError(f"{path}: not valid JSON ({exc}); the file may be truncated") from exc


def parse(path: Path, progress: Progress | None = None) -> Timeline:
    """Read a rocprofv3 JSON file into a Timeline (every process object in it)."""
    note = progress or (lambda _msg: None)
    note(f"reading {path.name}")
    root = _decode(path)
    if not root.tool:
        raise TraceError(f"{path}: no 'rocprofiler-sdk-tool' data; not rocprofv3 JSON output")
    pool = NamePool()
    warnings: list[str] = []
    parts: list[Part] = []
    readers = []
    for tool in root.tool:
        reader = ProcessReader(tool, pool, warnings)
        readers.append(reader)
        note(f"process {reader.pid}")
        parts += [*reader.kernels(), *reader.memcpy(), *reader.host_ops(), *reader.api()]
        if tool.metadata.config.kernel_rename:
            warnings.append("kernel_rename was on: kernels keep their symbol names")
    meta = skeleton("rocprofv3-json", path.name, sdk.PRODUCER)
    table = events_table(parts, pool, meta, sdk.CLOCK)
    meta["devices"] = readers[0].agents.devices(set()) if readers else []
    meta["processes"] = [_process_meta(r.tool.metadata) for r in readers]
    meta["warnings"] = warnings
    return Timeline(table, meta)


def _process_meta(m: Process) -> dict[str, Any]:
    return {
        "pid": m.pid,
        "hostname": m.node.hostname,
        "command": " ".join(m.command) or None,
        "init_ns": m.init_time,
        "fini_ns": m.fini_time,
    }
