"""Readers for one uuid set of rocpd tables: kernels, regions, instants, memory copies."""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from tracekit.errors import TraceError
from tracekit.parsers._sqlite import SqliteSource
from tracekit.parsers.assemble import Part
from tracekit.parsers.names import NamePool
from tracekit.parsers.rocprof.args import INT, STR, Field, json_args
from tracekit.parsers.rocprof.common import durations
from tracekit.parsers.rocprof.rocpd_info import (
    AGENT_COLUMNS,
    category_group,
    correlation,
    id_mapping,
    nonzero,
    read_agents,
)

SYMBOL_BIT = 1 << 39  # kernel-symbol names share the name pool with the string table
SET_SHIFT = 40  # each uuid set gets its own id range in the pool
_EVENT_COLUMNS = ("id", "category_id", "stack_id", "correlation_id")
_DISPATCH_COLUMNS = (
    "pid", "agent_id", "kernel_id", "dispatch_id", "queue_id", "stream_id", "start",
    "end", "private_segment_size", "group_segment_size", "workgroup_size_x",
    "workgroup_size_y", "workgroup_size_z", "grid_size_x", "grid_size_y", "grid_size_z",
    "region_name_id", "event_id",
)  # fmt: skip
_REGION_COLUMNS = ("pid", "tid", "start", "end", "name_id", "event_id")
_COPY_COLUMNS = ("pid", "tid", "start", "end", "name_id", "dst_agent_id", "src_agent_id",
                 "size", "queue_id", "stream_id", "event_id")  # fmt: skip
_TEXT = {"string", "display_name", "kernel_name", "command", "type"}


class TableSet:
    """The rocpd tables (or views) of one uuid suffix, looked up by their base name."""

    def __init__(self, suffix: str, objects: dict[str, str]) -> None:
        self.suffix = suffix
        self.objects = objects

    def get(self, base: str) -> str | None:
        name = base + self.suffix
        return name if name in self.objects else None

    def is_table(self, name: str) -> bool:
        return self.objects.get(name) == "table"


class SetReader:
    """Reads one :class:`TableSet` into :class:`Part` rows; ``pool`` is set before reading."""

    def __init__(self, db: SqliteSource, tset: TableSet, index: int, warnings: list[str]):
        self.db, self.tset, self.warnings = db, tset, warnings
        self.key = index << SET_SHIFT
        self.pool = NamePool()
        self._events: pl.DataFrame | None = None
        self._message_frame: pl.DataFrame | None = None
        self.strings = self._frame("rocpd_string", ("id", "string"))
        if self.strings is None:
            raise TraceError(f"{db.path}: rocpd string table{tset.suffix} is missing; export again")
        sym = self._frame("rocpd_info_kernel_symbol", ("id", "display_name", "kernel_name",
                          "sgpr_count", "arch_vgpr_count", "accum_vgpr_count"))  # fmt: skip
        self.symbols = sym if sym is not None else pl.DataFrame({"id": []}, {"id": pl.Int64})
        procs = self._frame("rocpd_info_process", ("id", "pid", "command"))
        threads = self._frame("rocpd_info_thread", ("id", "tid"))
        self.pid_of = id_mapping(procs, "pid")
        self.tid_of = id_mapping(threads, "tid")
        self.processes = [] if procs is None else [
            {"pid": p, "command": c} for p, c in procs.select("pid", "command").iter_rows()
        ]  # fmt: skip
        self.gpu_of: dict[int, int] = {}
        self.agent_label: dict[Any, str] = {}
        self.devices = self._agents()

    # -- catalogue --------------------------------------------------------------------------

    def _columns(self, name: str) -> tuple[str, ...]:
        return tuple(r[1] for r in self.db.con.execute(f'PRAGMA table_info("{name}")'))

    def _frame(self, base: str, columns: tuple[str, ...]) -> pl.DataFrame | None:
        """Plain columns of a table or view (missing ones as nulls); None when it is absent.

        Plain columns only: connectorx types a computed column from its first row.
        """
        name = self.tset.get(base)
        if name is None:
            return None
        have = set(self._columns(name))
        present = [c for c in columns if c in have]
        if not present:
            return None
        select = ", ".join(f'"{c}"' for c in present)
        if self.tset.is_table(name):
            table = self.db.scan(name, select)
        else:
            table = self.db.arrow(f'SELECT {select} FROM "{name}"')
        df = pl.from_arrow(table)
        assert isinstance(df, pl.DataFrame)
        return df.select(
            (pl.col(c) if c in present else pl.lit(None))
            .cast(pl.String if c in _TEXT else pl.Int64, strict=False)
            .alias(c)
            for c in columns
        )

    def named_ids(self) -> tuple[pa.Array, pa.Array]:
        """String-table ids and kernel-symbol ids, offset into this set's pool range."""
        sym = self.symbols
        if "display_name" in sym.columns:
            sym_names = sym.select(
                id=pl.col("id") + (self.key | SYMBOL_BIT),
                string=pl.coalesce("display_name", "kernel_name"),
            )
        else:
            sym_names = pl.DataFrame(schema={"id": pl.Int64, "string": pl.String})
        strings = self.strings.select(pl.col("id") + self.key, "string")
        both = pl.concat([strings, sym_names])
        return both["id"].to_arrow(), both["string"].to_arrow()

    def _agents(self) -> list[dict[str, Any]]:
        """GPU agents as timeline devices; fills the agent id -> GPU index map."""
        name = self.tset.get("rocpd_info_agent")
        if name is None:
            self.warnings.append("no rocpd agent table; device indices are agent ids")
            return []
        have = set(self._columns(name))
        cols = [c for c in AGENT_COLUMNS if c in have]
        rows = self.db.con.execute(f'SELECT {", ".join(cols)} FROM "{name}"').fetchall()
        devices, self.gpu_of, self.agent_label = read_agents([dict(zip(cols, r)) for r in rows])
        return devices

    def _events_frame(self) -> pl.DataFrame:
        if self._events is None:
            ev = self._frame("rocpd_event", _EVENT_COLUMNS)
            self._events = ev if ev is not None else pl.DataFrame(
                schema={c: pl.Int64 for c in _EVENT_COLUMNS}
            )  # fmt: skip
        return self._events

    def _with_events(self, df: pl.DataFrame) -> pl.DataFrame:
        """Add category_id, stack_id and correlation_id from each row's event.

        Event ids are an AUTOINCREMENT key, so mostly dense: a position array indexed by id
        gathers them far faster than a hash join; sparse ids fall back to the join.
        """
        ev = self._events_frame()
        ids = ev["id"].fill_null(-1).to_numpy()
        if not len(ids) or ids.min() < 0 or ids.max() > 4 * len(ids) + 1024:
            ev = ev.rename({"id": "event_id"})
            return df.join(ev, on="event_id", how="left", maintain_order="left")
        pos = np.full(int(ids.max()) + 1, -1, dtype=np.int64)
        pos[ids] = np.arange(len(ids))
        wanted = df["event_id"].fill_null(-1).to_numpy()
        inside = (wanted >= 0) & (wanted < len(pos))
        row = np.where(inside, pos[np.where(inside, wanted, 0)], -1)
        index = pl.Series(pa.array(row, mask=row < 0))
        return df.hstack(ev.drop("id")[index])

    # -- rows -------------------------------------------------------------------------------

    def kernels(self) -> list[Part]:
        df = self._frame("rocpd_kernel_dispatch", _DISPATCH_COLUMNS)
        if df is None or not df.height:
            return []
        df = self._valid(self._with_events(df), "kernel")
        sym = self.symbols
        for c in ("sgpr_count", "arch_vgpr_count", "accum_vgpr_count"):
            if c not in sym.columns:
                sym = sym.with_columns(pl.lit(None, pl.Int64).alias(c))
        df = df.join(
            sym.select(pl.col("id").alias("kernel_id"), "sgpr_count", "arch_vgpr_count",
                       "accum_vgpr_count"),
            on="kernel_id", how="left", maintain_order="left",
        )  # fmt: skip
        region = self._strings_of(df["region_name_id"])
        df = df.with_columns(region=pl.when(region != "").then(region))
        args = json_args(
            df,
            Field("grid", tuple(f"grid_size_{a}" for a in "xyz"), INT, True),
            Field("workgroup", tuple(f"workgroup_size_{a}" for a in "xyz"), INT, True),
            Field("lds", pl.col("group_segment_size"), INT, True),
            Field("scratch", pl.col("private_segment_size"), INT, True),
            Field("vgpr", pl.col("arch_vgpr_count"), INT, True),
            Field("accum_vgpr", pl.col("accum_vgpr_count"), INT, True),
            Field("sgpr", pl.col("sgpr_count"), INT, True),
            Field("hip_stream", pl.col("stream_id"), INT, True),
            Field("dispatch_id", pl.col("dispatch_id")),
            Field("region", pl.col("region"), STR),
            Field("ext_corr", nonzero("correlation_id")),
        )
        name = self.pool.from_ids((df["kernel_id"] + (self.key | SYMBOL_BIT)).to_arrow())
        self._count_unnamed(name, "kernel")
        columns = {
            "device": self._gpu(df["agent_id"], "kernel"),
            "stream": df["queue_id"].to_arrow(),
            "rank": 0,
            "pid": self._map(df["pid"], self.pid_of),
            "corr": correlation(df),
            "args": args,
        }
        dur = durations(df["start"], df["end"], "kernel", self.warnings)
        return [Part("kernel", df["start"].to_arrow(), dur, name, "sm", columns)]

    def regions(self) -> list[Part]:
        df = self._frame("rocpd_region", _REGION_COLUMNS)
        if df is None or not df.height:
            return []
        df = self._valid(self._with_events(df), "region")
        category = self._strings_of(df["category_id"])
        kinds = self._region_kinds(category, df["start"] == df["end"])
        df = df.with_columns(category=category, kind=kinds)
        parts = []
        for (kind,), sel in sorted(df.partition_by("kind", as_dict=True).items()):
            args = json_args(
                sel,
                Field("category", pl.col("category"), STR, True),
                Field("ext_corr", nonzero("correlation_id")),
            )
            if kind == "marker":
                dur: Any = pa.array(np.zeros(sel.height, dtype=np.int64))
            else:
                dur = durations(sel["start"], sel["end"], f"{kind} region", self.warnings)
            name = self._names(sel, "name_id")
            self._count_unnamed(name, "region")
            columns = {
                "device": -1, "rank": 0,
                "pid": self._map(sel["pid"], self.pid_of),
                "tid": self._map(sel["tid"], self.tid_of),
                "corr": correlation(sel) if kind == "api" else None,
                "args": args,
            }  # fmt: skip
            parts.append(Part(kind, sel["start"].to_arrow(), dur, name, None, columns))
        return parts

    def samples(self) -> list[Part]:
        """Instants: rocprofiler-sdk stores API records with start == end (roctxMarkA, …)
        as ``rocpd_sample`` rows on a per-thread track named by their category."""
        df = self._frame("rocpd_sample", ("track_id", "timestamp", "event_id"))
        tracks = self._frame("rocpd_track", ("id", "pid", "tid", "name_id"))
        if df is None or not df.height or tracks is None:
            return []
        df = df.join(tracks.rename({"id": "track_id"}), on="track_id", how="left",
                     maintain_order="left")  # fmt: skip
        df = self._with_events(df.filter(pl.col("timestamp").is_not_null()))
        category = self._strings_of(df["category_id"]).fill_null(self._strings_of(df["name_id"]))
        group = {c: category_group(c) for c in category.unique().to_list()}
        kind = category.replace_strict(group, default="other", return_dtype=pl.String)
        df = df.with_columns(category=category, kind=kind)
        if skipped := int((kind == "other").sum()):
            self.warnings.append(f"{skipped} rocpd samples of other categories not read")
        parts = []
        for (group_name,), sel in sorted(df.partition_by("kind", as_dict=True).items()):
            if group_name == "other":
                continue
            args = json_args(sel, Field("category", pl.col("category"), STR, True),
                             Field("ext_corr", nonzero("correlation_id")))  # fmt: skip
            name = self._names(sel, "name_id")
            api = group_name == "api"
            if api:
                self.warnings.append(
                    f"{sel.height} zero-length API calls are rocpd samples without their"
                    " function name; named by their category"
                )
            columns = {
                "device": -1, "rank": 0, "pid": self._map(sel["pid"], self.pid_of),
                "tid": self._map(sel["tid"], self.tid_of),
                "corr": correlation(sel) if api else None, "args": args,
            }  # fmt: skip
            dur = pa.array(np.zeros(sel.height, dtype=np.int64))
            kind_name = "api" if api else "marker"
            parts.append(Part(kind_name, sel["timestamp"].to_arrow(), dur, name, None, columns))
        return parts

    def _messages(self) -> pl.DataFrame:
        """roctx messages (``rocpd_event.extdata`` ``$.message``) of marker events."""
        if self._message_frame is None:
            frame = pl.DataFrame(schema={"event_id": pl.Int64, "message": pl.String})
            markers = self.strings.filter(pl.col("string").str.starts_with("MARKER_"))["id"]
            name = self.tset.get("rocpd_event")
            if name and len(markers) and "extdata" in self._columns(name):
                ids = ", ".join(str(int(i)) for i in markers.to_list())
                sql = f'SELECT id, extdata FROM "{name}" WHERE category_id IN ({ids})'
                raw = pl.from_arrow(self.db.arrow(sql))
                assert isinstance(raw, pl.DataFrame)
                if raw.height:
                    text = raw["extdata"].cast(pl.String)
                    try:
                        message = text.str.json_path_match("$.message")
                    except pl.exceptions.ComputeError:
                        message = pl.Series([None] * raw.height, dtype=pl.String)
                    frame = pl.DataFrame({"event_id": raw["id"].cast(pl.Int64),
                                          "message": message}).drop_nulls()  # fmt: skip
            self._message_frame = frame
        return self._message_frame

    def _names(self, df: pl.DataFrame, id_column: str) -> np.ndarray:
        """Name indices: the roctx message where the event has one, else the string id."""
        index = self.pool.from_ids((df[id_column] + self.key).to_arrow())
        messages = self._messages()
        if messages.height and df.height:
            text = df.select("event_id").join(messages, on="event_id", how="left",
                                              maintain_order="left")["message"]  # fmt: skip
            if text.is_not_null().any():
                by_message = self.pool.from_strings(text.to_arrow())
                index = np.where(by_message >= 0, by_message, index)
        return index

    def copies(self) -> list[Part]:
        df = self._frame("rocpd_memory_copy", _COPY_COLUMNS)
        if df is None or not df.height:
            return []
        df = self._valid(self._with_events(df), "memory copy")
        dst = df["dst_agent_id"].replace_strict(self.gpu_of, default=None, return_dtype=pl.Int64)
        src = df["src_agent_id"].replace_strict(self.gpu_of, default=None, return_dtype=pl.Int64)
        labels = {k: v for k, v in self.agent_label.items() if k is not None}
        df = df.with_columns(
            device=dst.fill_null(src),
            src=pl.col("src_agent_id").replace_strict(labels, default=None, return_dtype=pl.String),
            dst=pl.col("dst_agent_id").replace_strict(labels, default=None, return_dtype=pl.String),
        )
        if unmapped := int(df["device"].is_null().sum()):
            self.warnings.append(
                f"{unmapped} memory copy rows touch no known GPU; device left empty"
            )
        args = json_args(
            df,
            Field("bytes", pl.col("size"), INT, True),
            Field("src", pl.col("src"), STR, True),
            Field("dst", pl.col("dst"), STR, True),
            Field("hip_stream", pl.col("stream_id"), INT, True),
            Field("ext_corr", nonzero("correlation_id")),
        )
        name = self.pool.from_ids((df["name_id"] + self.key).to_arrow())
        self._count_unnamed(name, "memory copy")
        columns = {
            "device": df["device"].to_arrow(), "stream": df["queue_id"].to_arrow(), "rank": 0,
            "pid": self._map(df["pid"], self.pid_of), "corr": correlation(df), "args": args,
        }  # fmt: skip
        dur = durations(df["start"], df["end"], "memory copy", self.warnings)
        return [Part("memcpy", df["start"].to_arrow(), dur, name, "copy", columns)]

    def note_unread(self) -> None:
        """Count the rows of tables this reader does not turn into timeline rows."""
        unread = (("rocpd_memory_allocate", "memory allocation"),
                  ("rocpd_pmc_event", "counter value"))  # fmt: skip
        for base, what in unread:
            name = self.tset.get(base)
            if name is None:
                continue
            count = self.db.scalar(f'SELECT count(*) FROM "{name}"') or 0
            if count:
                self.warnings.append(f"{count} rocpd {what} rows not read (no timeline kind)")

    # -- helpers ----------------------------------------------------------------------------

    def _valid(self, df: pl.DataFrame, kind: str) -> pl.DataFrame:
        bad = df.filter(pl.col("start").is_null() | pl.col("end").is_null()).height
        if bad:
            self.warnings.append(f"{bad} {kind} rows without a start or end; dropped")
            df = df.filter(pl.col("start").is_not_null() & pl.col("end").is_not_null())
        return df

    def _strings_of(self, ids: pl.Series) -> pl.Series:
        """The string-table text of each id (null when absent)."""
        wanted = ids.unique().drop_nulls()
        found = self.strings.filter(pl.col("id").is_in(wanted.implode()))
        return ids.replace_strict(found["id"], found["string"], default=None,
                                  return_dtype=pl.String)  # fmt: skip

    def _region_kinds(self, category: pl.Series, instant: pl.Series) -> pl.Series:
        """api / range / marker per row, decided once per distinct category."""
        group = {c: category_group(c) for c in category.unique().to_list()}
        codes = category.replace_strict(group, default="other", return_dtype=pl.String)
        if others := int((codes == "other").sum()):
            names = sorted(str(c) for c, g in group.items() if g == "other")
            self.warnings.append(
                f"{others} regions of categories {', '.join(names)} read as ranges"
            )
        return pl.select(
            pl.when(codes == "api").then(pl.lit("api"))
            .when((codes == "marker") & instant).then(pl.lit("marker"))
            .otherwise(pl.lit("range"))
        ).to_series()  # fmt: skip

    def _gpu(self, agents: pl.Series, kind: str) -> pa.Array:
        mapped = agents.replace_strict(self.gpu_of, default=None, return_dtype=pl.Int64)
        if not self.gpu_of:
            return agents.to_arrow()
        lost = int((mapped.is_null() & agents.is_not_null()).sum())
        if lost:
            self.warnings.append(f"{lost} {kind} rows on agents that are not GPUs; device empty")
        return mapped.to_arrow()

    @staticmethod
    def _map(ids: pl.Series, mapping: dict[int, int]) -> pa.Array:
        if not mapping:
            return ids.to_arrow()
        return ids.replace_strict(mapping, default=ids, return_dtype=pl.Int64).to_arrow()

    def _count_unnamed(self, name: np.ndarray, kind: str) -> None:
        lost = int((name < 0).sum())
        if lost:
            self.warnings.append(f"{lost} {kind} names not found in the rocpd tables; left empty")
