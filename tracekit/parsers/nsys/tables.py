"""Readers for the activity tables of an nsys export, each returning :class:`Part` rows."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from tracekit.errors import TraceError
from tracekit.parsers.assemble import Part
from tracekit.parsers.convert import int64s, shared_text
from tracekit.parsers.name_pool import NamePool
from tracekit.parsers.sqlite import SqliteSource

KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"
MEMCPY = "CUPTI_ACTIVITY_KIND_MEMCPY"
MEMSET = "CUPTI_ACTIVITY_KIND_MEMSET"
SYNC = "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"
RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
GRAPH = "CUPTI_ACTIVITY_KIND_GRAPH_TRACE"
DEVICE_TABLES = (KERNEL, GRAPH)
NVTX = "NVTX_EVENTS"

NONE_U32 = 4294967295  # CUPTI's "not applicable" for stream and event ids
EVENT_CLASS_BACKTRACE = 67  # 2.9.x writes every runtime call twice; this is the copy
NVTX_MARK, NVTX_PUSHPOP, NVTX_STARTEND, NVTX_THREAD, NVTX_DOMAIN = 34, 59, 60, 39, 75

# CUPTI enums (stable across CUDA versions; the ENUM_* tables of lazy exports agree).
COPY_KINDS = {
    1: "HtoD", 2: "DtoH", 3: "HtoA", 4: "AtoH", 5: "AtoA", 6: "AtoD", 7: "DtoA",
    8: "DtoD", 9: "HtoH", 10: "PtoP", 11: "UVM HtoD", 12: "UVM DtoH", 13: "UVM DtoD",
}  # fmt: skip
MEM_KINDS = {
    0: "Pageable", 1: "Pinned", 2: "Device", 3: "Array", 4: "Managed",
    5: "Device Static", 6: "Managed Static",
}  # fmt: skip
SYNC_TYPES = {
    1: "Event Sync", 2: "Stream Wait Event", 3: "Stream Sync", 4: "Context Sync",
}  # fmt: skip
_API_VERSION_SUFFIX = re.compile(r"_v\d{4,}$")
_MPI_RANK = re.compile(r"MPI Rank (\d+)")


class TableReader:
    """Reads each activity table of one export into :class:`Part` objects."""

    def __init__(self, db: SqliteSource, pool: NamePool) -> None:
        self.db = db
        self.pool = pool
        self.warnings: list[str] = []
        self.rank_of_pid: dict[int, int] = {}
        self.device_map: dict[tuple[int, int], int] = {}

    def _read(self, table: str, columns: tuple[str, ...], extra: str = "") -> pa.Table:
        """Plain columns of ``table`` (missing ones come back as typed nulls).

        Only plain columns are selected: connectorx types a computed column from its first
        row, so a NULL there would fail the whole read.
        """
        present = [c for c in columns if c in self.db.columns(table)]
        select = ", ".join(f'"{c}"' for c in present) + (f", {extra}" if extra else "")
        t = self.db.scan(table, select)
        for name in columns:
            if name not in present:
                t = t.append_column(name, pa.nulls(t.num_rows, pa.int64()))
        if "start" in columns and (missing := t.column("start").null_count):
            self.warnings.append(f"{missing} {table} rows without a start; dropped")
            t = t.filter(pc.is_valid(t.column("start")))
        return t

    def _duration(self, t: pa.Table, kind: str) -> pa.Array:
        start = int64s(t.column("start"))
        end = t.column("end").cast(pa.int64())
        dur = int64s(end) - start
        missing, negative = end.null_count, int((dur[end.is_valid().to_numpy()] < 0).sum())
        if missing:
            self.warnings.append(f"{missing} {kind} rows without an end; read as 0 ns")
        if negative:
            self.warnings.append(f"{negative} {kind} rows end before they start; read as 0 ns")
        return pa.array(np.where(end.is_valid().to_numpy(), np.maximum(dur, 0), 0))

    def _names_from_ids(self, ids: Any, kind: str) -> np.ndarray:
        name = self.pool.from_ids(ids)
        lost = int(((name < 0) & ~_nulls_mask(ids)).sum())
        if lost:
            self.warnings.append(f"{lost} {kind} names not found in StringIds; left empty")
        return name

    def _device_part(
        self,
        kind: str,
        t: pa.Table,
        name: np.ndarray,
        engine: str | None,
        args: pa.Array | None,
        stream: Any = None,
    ) -> Part:
        pid = _pid(t.column("globalPid"))
        columns = {
            "device": self._gpu_ids(pid, t.column("deviceId")),
            "stream": t.column("streamId") if stream is None else stream,
            "rank": 0,
            "pid": pid,
            "corr": t.column("correlationId"),
            "args": args,
        }
        return Part(kind, t.column("start"), self._duration(t, kind), name, engine, columns)

    def _gpu_ids(self, pid: pa.Array, device: Any) -> Any:
        """CUDA ordinals -> GPU ids where the export maps them (see ``cuda_device_map``)."""
        if not self.device_map:
            return device
        keys = np.array(sorted(self.device_map), dtype=np.int64).reshape(-1, 2)
        gpus = np.array([self.device_map[tuple(k)] for k in keys], dtype=np.int64)
        encoded = keys[:, 0] << 20 | keys[:, 1]
        ordinal = int64s(device)
        wanted = int64s(pid) << 20 | ordinal
        pos = np.clip(np.searchsorted(encoded, wanted), 0, len(encoded) - 1)
        mapped = np.where(encoded[pos] == wanted, gpus[pos], ordinal)
        return pa.array(mapped, mask=_nulls_mask(device) | _nulls_mask(pid))

    def kernels(self) -> list[Part]:
        cols = self.db.columns(KERNEL)
        if not cols:
            return []
        name_col = next(
            (c for c in ("demangledName", "shortName", "mangledName") if c in cols), None
        )
        if name_col is None:
            raise TraceError(f"{self.db.path}: {KERNEL} has no kernel name column; export again")
        args = _kernel_args_sql(cols)
        t = self._read(KERNEL, (*_DEVICE_COLUMNS, name_col), args and f"{args} AS args")
        name = self._names_from_ids(t.column(name_col), "kernel")
        args_column = shared_text(t.column("args")) if args else None
        return [self._device_part("kernel", t, name, "sm", args_column)]

    def graphs(self) -> list[Part]:
        """Whole CUDA-graph replays (``--cuda-graph-trace=graph``): one row per launch."""
        if not self.db.columns(GRAPH):
            return []
        t = self._read(GRAPH, (*_DEVICE_COLUMNS, "graphId", "graphExecId"))
        if not t.num_rows:
            return []
        self.warnings.append(
            f"{t.num_rows} CUDA graph launches traced as whole graphs, without their kernels;"
            " profile with `nsys profile --cuda-graph-trace=node` for per-kernel rows"
        )
        df = pl.from_arrow(t.select(["graphId", "graphExecId"]))
        names = df.select(pl.format("CUDA graph {}", pl.col("graphId").fill_null(-1)))
        args = df.select(
            pl.struct(graph_id="graphId", graph_exec_id="graphExecId").struct.json_encode()
        )
        name = self.pool.from_strings(names.to_series().to_arrow())
        return [self._device_part("kernel", t, name, "sm", args.to_series().to_arrow())]

    def memcpy(self) -> list[Part]:
        if not self.db.columns(MEMCPY):
            return []
        t = self._read(MEMCPY, (*_DEVICE_COLUMNS, "bytes", "copyKind", "srcKind", "dstKind"))
        df = pl.from_arrow(t.select(["bytes", "copyKind", "srcKind", "dstKind"])).select(
            copy=pl.col("copyKind").replace_strict(COPY_KINDS, default="Unknown"),
            src=pl.col("srcKind").replace_strict(MEM_KINDS, default="Unknown"),
            dst=pl.col("dstKind").replace_strict(MEM_KINDS, default="Unknown"),
            bytes=pl.col("bytes").cast(pl.Int64),
        )
        names = df.select(pl.format("Memcpy {} ({} -> {})", "copy", "src", "dst"))
        args = df.select(pl.struct(bytes="bytes", copy_kind="copy").struct.json_encode())
        name = self.pool.from_strings(names.to_series().to_arrow())
        return [self._device_part("memcpy", t, name, "copy", args.to_series().to_arrow())]

    def memset(self) -> list[Part]:
        if not self.db.columns(MEMSET):
            return []
        t = self._read(MEMSET, (*_DEVICE_COLUMNS, "bytes", "value", "memKind"))
        df = pl.from_arrow(t.select(["bytes", "value", "memKind"]))
        kind = pl.col("memKind").replace_strict(MEM_KINDS, default="Unknown")
        names = df.select(pl.format("Memset ({})", kind))
        args = df.select(pl.struct("bytes", "value").struct.json_encode())
        name = self.pool.from_strings(names.to_series().to_arrow())
        return [self._device_part("memset", t, name, None, args.to_series().to_arrow())]

    def sync(self) -> list[Part]:
        if not self.db.columns(SYNC):
            return []
        t = self._read(SYNC, (*_DEVICE_COLUMNS, "syncType", "eventId"))
        df = pl.from_arrow(t.select(["streamId", "syncType", "eventId"]))
        names = df.select(pl.col("syncType").replace_strict(SYNC_TYPES, default="Unknown Sync"))
        stream = df.select(pl.when(pl.col("streamId") != NONE_U32).then(pl.col("streamId")))
        args = df.select(
            pl.when(pl.col("eventId") != NONE_U32).then(
                pl.struct(event="eventId").struct.json_encode()
            )
        )
        name = self.pool.from_strings(names.to_series().to_arrow())
        part_args, part_stream = args.to_series().to_arrow(), stream.to_series().to_arrow()
        return [self._device_part("sync", t, name, None, part_args, part_stream)]

    def runtime(self) -> list[Part]:
        if not self.db.columns(RUNTIME):
            return []
        t = self._read(
            RUNTIME, ("start", "end", "eventClass", "globalTid", "correlationId", "nameId")
        )
        df = pl.from_arrow(t)
        backtrace = df.filter(pl.col("eventClass") == EVENT_CLASS_BACKTRACE)
        if backtrace.height:
            calls = df.filter(pl.col("eventClass") != EVENT_CLASS_BACKTRACE)
            # Keep a backtrace row only when its call has no row of its own.
            keys = ["globalTid", "correlationId"]
            lonely = backtrace.join(calls, on=keys, how="anti", nulls_equal=True)
            t = pl.concat([calls, lonely]).to_arrow()
        columns = {
            "device": -1,
            "rank": 0,
            "pid": _pid(t.column("globalTid")),
            "tid": _tid(t.column("globalTid")),
            "corr": t.column("correlationId"),
        }
        name = self._api_names(t.column("nameId"))
        return [Part("api", t.column("start"), self._duration(t, "api"), name, None, columns)]

    def _api_names(self, ids: Any) -> np.ndarray:
        """Map runtime name ids to names without nsys's ``_vNNNN`` API version suffix."""
        codes = self._names_from_ids(ids, "CUDA API")
        if not len(codes):
            return codes
        unique, inverse = np.unique(codes, return_inverse=True)
        labels = [self.pool.value_at(int(i)) for i in unique]
        stripped = [None if s is None else _API_VERSION_SUFFIX.sub("", s) for s in labels]
        return self.pool.from_strings(stripped)[inverse.reshape(-1)]

    def nvtx(self) -> list[Part]:
        cols = self.db.columns(NVTX)
        if not cols:
            return []
        wanted = (
            "start",
            "end",
            "eventType",
            "globalTid",
            "domainId",
            "category",
            "text",
            "textId",
        )
        t = self._read(NVTX, wanted)
        df = pl.from_arrow(t).filter(
            pl.col("eventType").is_in(
                [NVTX_MARK, NVTX_PUSHPOP, NVTX_STARTEND, NVTX_THREAD, NVTX_DOMAIN]
            )
        )
        text_ids = self.pool.from_ids(df["textId"].to_arrow())
        by_id = self.pool.dictionary_arrays([text_ids])[0].cast(pa.string())
        df = df.with_columns(text=pl.col("text").fill_null(pl.from_arrow(by_id)))
        self._ranks_from_thread_names(df.filter(pl.col("eventType") == NVTX_THREAD))
        domains = {
            int(d): str(s)
            for d, s in df.filter(pl.col("eventType") == NVTX_DOMAIN)
            .select("domainId", "text")
            .iter_rows()
            if d is not None and s is not None
        }
        rows = df.filter(pl.col("eventType").is_in([NVTX_MARK, NVTX_PUSHPOP, NVTX_STARTEND]))
        unclosed = rows.filter((pl.col("eventType") != NVTX_MARK) & pl.col("end").is_null())
        if unclosed.height:
            self.warnings.append(f"{unclosed.height} NVTX ranges never closed; dropped")
            rows = rows.filter((pl.col("eventType") == NVTX_MARK) | pl.col("end").is_not_null())
        parts = []
        for kind, types in (("range", [NVTX_PUSHPOP, NVTX_STARTEND]), ("marker", [NVTX_MARK])):
            sel = rows.filter(pl.col("eventType").is_in(types))
            if sel.height:
                parts.append(self._nvtx_part(kind, sel, domains))
        return parts

    def _nvtx_part(self, kind: str, sel: pl.DataFrame, domains: dict[int, str]) -> Part:
        if kind == "range":
            dur = self._duration(sel.select("start", "end").to_arrow(), "NVTX range")
        else:
            dur = pa.array(np.zeros(sel.height, dtype=np.int64))
        domain = pl.col("domainId").replace_strict(domains, default=None, return_dtype=pl.String)
        args = sel.select(
            pl.when(domain.is_not_null() | pl.col("category").is_not_null()).then(
                pl.struct(domain=domain, category="category").struct.json_encode()
            )
        )
        gtid = sel["globalTid"].to_arrow()
        columns = {
            "device": -1,
            "rank": 0,
            "pid": _pid(gtid),
            "tid": _tid(gtid),
            "args": args.to_series().to_arrow(),
        }
        name = self.pool.from_strings(sel["text"].to_arrow())
        return Part(kind, sel["start"].to_arrow(), dur, name, None, columns)

    def _ranks_from_thread_names(self, threads: pl.DataFrame) -> None:
        for gtid, text in threads.select("globalTid", "text").iter_rows():
            match = _MPI_RANK.fullmatch(text or "")
            if match and gtid is not None:
                self.rank_of_pid[(gtid >> 24) & 0xFFFFFF] = int(match.group(1))


_DEVICE_COLUMNS = ("start", "end", "deviceId", "streamId", "correlationId", "globalPid")
_ARG_FIELDS = (  # (JSON key, kernel-table columns); printf's %d turns NULL into 0, and nsys
    ("grid", ("gridX", "gridY", "gridZ")),  # declares these NOT NULL
    ("block", ("blockX", "blockY", "blockZ")),
    ("registers", ("registersPerThread",)),
    ("shared_static", ("staticSharedMemory",)),
    ("shared_dynamic", ("dynamicSharedMemory",)),
)


def _kernel_args_sql(cols: tuple[str, ...]) -> str:
    """A SQL expression building the kernel args JSON from the columns this export has."""
    fields, values = [], []
    for key, names in _ARG_FIELDS:
        if all(n in cols for n in names):
            placeholders = ",".join(["%d"] * len(names))
            fields.append(f'"{key}":[{placeholders}]' if len(names) > 1 else f'"{key}":%d')
            values.extend(names)
    if not fields:
        return ""
    expr = f"printf('{{{','.join(fields)}', {', '.join(values)})"
    if "graphNodeId" in cols:
        expr += (
            " || CASE WHEN graphNodeId IS NULL THEN '}'"
            " ELSE printf(',\"graph_node\":%d}', graphNodeId) END"
        )
    else:
        expr += " || '}'"
    return f"CAST({expr} AS TEXT)"


def _pid(global_id: Any) -> pa.Array:
    arr = int64s(global_id)
    return pa.array((arr >> 24) & 0xFFFFFF, mask=_nulls_mask(global_id))


def _tid(global_id: Any) -> pa.Array:
    arr = int64s(global_id)
    return pa.array(arr & 0xFFFFFF, mask=_nulls_mask(global_id))


def _nulls_mask(values: Any) -> np.ndarray:
    if isinstance(values, np.ndarray):
        return np.zeros(len(values), dtype=bool)
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks() if values.num_chunks else pa.array([], pa.int64())
    return values.is_null().to_numpy(zero_copy_only=False)


def apply_ranks(table: pa.Table, rank_of_pid: dict[int, int]) -> pa.Table:
    """Set the rank column from a process -> MPI rank map."""
    pid = table.column("pid").fill_null(-1).to_numpy()
    ranks = np.zeros(len(pid), dtype=np.int32)
    for p, r in rank_of_pid.items():
        ranks[pid == p] = r
    return table.set_column(table.schema.get_field_index("rank"), "rank", pa.array(ranks))
