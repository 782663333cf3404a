"""Readers for the activity tables of an nsys export, each returning :class:`Part` rows."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from tracekit.parsers._sqlite import SqliteSource
from tracekit.parsers.assemble import Part
from tracekit.parsers.names import NamePool

KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"
MEMCPY = "CUPTI_ACTIVITY_KIND_MEMCPY"
MEMSET = "CUPTI_ACTIVITY_KIND_MEMSET"
SYNC = "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"
RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
NVTX = "NVTX_EVENTS"

NONE_U32 = 4294967295  # CUPTI's "not applicable" for stream and event ids
EVENT_CLASS_BACKTRACE = 67  # 2.9.x writes every runtime call twice; this is the copy
NVTX_MARK, NVTX_PUSHPOP, NVTX_STARTEND, NVTX_THREAD, NVTX_DOMAIN = 34, 59, 60, 39, 75

# CUPTI enums (stable across CUDA versions; the ENUM_* tables of lazy exports agree).
COPY_KINDS = {
    1: "HtoD", 2: "DtoH", 3: "HtoA", 4: "AtoH", 5: "AtoA", 6: "AtoD", 7: "DtoA",
    8: "DtoD", 9: "HtoH", 10: "PtoP", 11: "HtoD", 12: "DtoH", 13: "DtoD",
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

    def _device_part(self, kind: str, t: pa.Table, name: np.ndarray, engine: str | None,
                     args: pa.Array | None, stream: Any = None) -> Part:  # fmt: skip
        pid = _pid(t.column("globalPid"))
        columns = {
            "device": self._gpu_ids(pid, t.column("deviceId")),
            "stream": t.column("streamId") if stream is None else stream,
            "rank": 0,
            "pid": pid,
            "corr": t.column("correlationId"),
            "args": args,
        }
        return Part(kind, t.column("start"), _duration(t), name, engine, columns)

    def _gpu_ids(self, pid: pa.Array, device: Any) -> Any:
        """CUDA ordinals -> GPU ids where the export maps them (see ``cuda_device_map``)."""
        if not self.device_map:
            return device
        keys = np.array(sorted(self.device_map), dtype=np.int64).reshape(-1, 2)
        gpus = np.array([self.device_map[tuple(k)] for k in keys], dtype=np.int64)
        encoded = keys[:, 0] << 20 | keys[:, 1]
        ordinal = _int64(device)
        wanted = _int64(pid) << 20 | ordinal
        pos = np.clip(np.searchsorted(encoded, wanted), 0, len(encoded) - 1)
        return pa.array(np.where(encoded[pos] == wanted, gpus[pos], ordinal))

    def kernels(self) -> list[Part]:
        cols = self.db.columns(KERNEL)
        name_col = next(c for c in ("demangledName", "shortName", "mangledName") if c in cols)
        args = (
            'printf(\'{"grid":[%d,%d,%d],"block":[%d,%d,%d],"registers":%d,'
            '"shared_static":%d,"shared_dynamic":%d\', gridX, gridY, gridZ, blockX, blockY,'
            " blockZ, registersPerThread, staticSharedMemory, dynamicSharedMemory)"
        )
        if "graphNodeId" in cols:
            args += (
                " || CASE WHEN graphNodeId IS NULL THEN '}'"
                " ELSE printf(',\"graph_node\":%d}', graphNodeId) END"
            )
        else:
            args += " || '}'"
        select = (
            'start, "end", deviceId, streamId, correlationId, globalPid,'
            f" {name_col} AS nameId, CAST({args} AS TEXT) AS args"
        )
        t = self.db.scan(KERNEL, select)
        name = self.pool.from_ids(t.column("nameId"))
        return [self._device_part("kernel", t, name, "sm", t.column("args"))]

    def memcpy(self) -> list[Part]:
        cols = self.db.columns(MEMCPY)
        if not cols:
            return []
        src = "srcKind" if "srcKind" in cols else "NULL"
        dst = "dstKind" if "dstKind" in cols else "NULL"
        t = self.db.scan(
            MEMCPY,
            f'start, "end", deviceId, streamId, correlationId, globalPid, bytes,'
            f" copyKind, {src} AS srcKind, {dst} AS dstKind",
        )
        df = pl.from_arrow(t).select(
            copy=pl.col("copyKind").replace_strict(COPY_KINDS, default="Unknown"),
            src=pl.col("srcKind").replace_strict(MEM_KINDS, default="Unknown"),
            dst=pl.col("dstKind").replace_strict(MEM_KINDS, default="Unknown"),
            bytes=pl.col("bytes").cast(pl.Int64),
        )
        names = df.select(
            pl.format("Memcpy {} ({} -> {})", "copy", "src", "dst").alias("n")
        ).to_series()
        args = df.select(pl.struct(bytes="bytes", copy_kind="copy").struct.json_encode())
        name = self.pool.from_strings(names.to_arrow())
        return [self._device_part("memcpy", t, name, "copy", args.to_series().to_arrow())]

    def memset(self) -> list[Part]:
        cols = self.db.columns(MEMSET)
        if not cols:
            return []
        mem = "memKind" if "memKind" in cols else "NULL"
        t = self.db.scan(
            MEMSET,
            f'start, "end", deviceId, streamId, correlationId, globalPid, bytes, value,'
            f" {mem} AS memKind",
        )
        df = pl.from_arrow(t)
        names = df.select(
            pl.format("Memset ({})", pl.col("memKind").replace_strict(MEM_KINDS, default="Unknown"))
        ).to_series()
        args = df.select(pl.struct("bytes", "value").struct.json_encode())
        name = self.pool.from_strings(names.to_arrow())
        return [self._device_part("memset", t, name, None, args.to_series().to_arrow())]

    def sync(self) -> list[Part]:
        if not self.db.columns(SYNC):
            return []
        t = self.db.scan(
            SYNC,
            'start, "end", deviceId, streamId, correlationId, globalPid, syncType, eventId',
        )
        df = pl.from_arrow(t)
        names = df.select(
            pl.col("syncType").replace_strict(SYNC_TYPES, default="Unknown Sync")
        ).to_series()
        stream = df.select(
            pl.when(pl.col("streamId") != NONE_U32).then(pl.col("streamId"))
        ).to_series()
        args = df.select(
            pl.when(pl.col("eventId") != NONE_U32).then(
                pl.struct(event="eventId").struct.json_encode()
            )
        )
        name = self.pool.from_strings(names.to_arrow())
        args = args.to_series().to_arrow()
        return [self._device_part("sync", t, name, None, args, stream.to_arrow())]

    def runtime(self) -> list[Part]:
        if not self.db.columns(RUNTIME):
            return []
        t = self.db.scan(
            RUNTIME,
            'start, "end", eventClass, globalTid, correlationId, nameId',
        )
        df = pl.from_arrow(t)
        backtrace = df.filter(pl.col("eventClass") == EVENT_CLASS_BACKTRACE)
        if backtrace.height:
            calls = df.filter(pl.col("eventClass") != EVENT_CLASS_BACKTRACE)
            # Keep a backtrace row only when its call has no row of its own.
            lonely = backtrace.join(calls, on=["globalTid", "correlationId"], how="anti")
            df = pl.concat([calls, lonely])
            t = df.to_arrow()
        ids = t.column("nameId").cast(pa.int64()).fill_null(-1).to_numpy(zero_copy_only=False)
        name = self._api_names(ids)
        columns = {
            "device": -1,
            "rank": 0,
            "pid": _pid(t.column("globalTid")),
            "tid": _tid(t.column("globalTid")),
            "corr": t.column("correlationId"),
        }
        return [Part("api", t.column("start"), _duration(t), name, None, columns)]

    def _api_names(self, ids: np.ndarray) -> np.ndarray:
        """Map runtime name ids to names without nsys's ``_vNNNN`` API version suffix."""
        if not len(ids):
            return np.empty(0, dtype=np.int64)
        offset = int(ids.min())  # ids are small string-table keys; -1 marks a missing name
        seen = np.zeros(int(ids.max()) - offset + 1, dtype=bool)
        seen[ids - offset] = True
        unique = np.nonzero(seen)[0] + offset
        labels = [self.pool.value_of_id(int(i)) for i in unique]
        stripped = [None if s is None else _API_VERSION_SUFFIX.sub("", s) for s in labels]
        index_of = np.full(len(seen), -1, dtype=np.int64)
        index_of[unique - offset] = self.pool.from_strings(stripped)
        return index_of[ids - offset]

    def nvtx(self) -> list[Part]:
        cols = self.db.columns(NVTX)
        if not cols:
            return []
        text = "COALESCE(n.text, s.value)" if "textId" in cols else "n.text"
        join = 'LEFT JOIN "StringIds" s ON s.id = n.textId' if "textId" in cols else ""
        category = "n.category" if "category" in cols else "NULL"
        domain = "n.domainId" if "domainId" in cols else "0"
        t = self.db.arrow(
            f'SELECT n.start AS start, n."end" AS "end", n.eventType AS eventType,'
            f" n.globalTid AS globalTid, {domain} AS domainId, {category} AS category,"
            f" CAST({text} AS TEXT) AS text FROM {NVTX} n {join}"
            f" WHERE n.eventType IN ({NVTX_MARK}, {NVTX_PUSHPOP}, {NVTX_STARTEND},"
            f" {NVTX_THREAD}, {NVTX_DOMAIN})"
        )
        df = pl.from_arrow(t)
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
            if not sel.height:
                continue
            dur = (
                (sel["end"] - sel["start"]).clip(lower_bound=0)
                if kind == "range"
                else pl.zeros(sel.height, pl.Int64, eager=True)
            )
            domain = pl.col("domainId").replace_strict(
                domains, default=None, return_dtype=pl.String
            )
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
            parts.append(Part(kind, sel["start"].to_arrow(), dur.to_arrow(), name, None, columns))
        return parts

    def _ranks_from_thread_names(self, threads: pl.DataFrame) -> None:
        for gtid, text in threads.select("globalTid", "text").iter_rows():
            match = _MPI_RANK.fullmatch(text or "")
            if match and gtid is not None:
                self.rank_of_pid[(gtid >> 24) & 0xFFFFFF] = int(match.group(1))


def _duration(t: pa.Table) -> pa.Array:
    start = t.column("start").cast(pa.int64()).to_numpy()
    end = t.column("end").cast(pa.int64()).fill_null(0).to_numpy(zero_copy_only=False)
    return pa.array(np.maximum(end - start, 0))


def _pid(global_id: Any) -> pa.Array:
    arr = _int64(global_id)
    return pa.array((arr >> 24) & 0xFFFFFF, mask=_nulls(global_id))


def _tid(global_id: Any) -> pa.Array:
    arr = _int64(global_id)
    return pa.array(arr & 0xFFFFFF, mask=_nulls(global_id))


def _int64(values: Any) -> np.ndarray:
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks() if values.num_chunks else pa.array([], pa.int64())
    return values.cast(pa.int64()).fill_null(0).to_numpy(zero_copy_only=False)


def _nulls(values: Any) -> np.ndarray | None:
    if values.null_count == 0:
        return None
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    return values.is_null().to_numpy(zero_copy_only=False)


def apply_ranks(table: pa.Table, rank_of_pid: dict[int, int]) -> pa.Table:
    """Set the rank column from a process -> MPI rank map."""
    pid = table.column("pid").to_numpy()
    ranks = np.zeros(len(pid), dtype=np.int32)
    for p, r in rank_of_pid.items():
        ranks[pid == p] = r
    return table.set_column(table.schema.get_field_index("rank"), "rank", pa.array(ranks))
