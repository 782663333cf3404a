"""One uuid set of rocpd tables: its catalogue, bulk reads (each row table joined to its
``rocpd_event`` row in SQL) and the lookups the row readers of :mod:`.rows` share."""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import Executor, Future
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from tracekit.errors import TraceError
from tracekit.parsers.name_pool import NamePool
from tracekit.parsers.rocprof.rocpd.info import AGENT_COLUMNS, id_mapping, read_agents
from tracekit.parsers.rocprof.table import conform
from tracekit.parsers.sqlite import SHARED_CONNECTIONS, SqliteSource

SYMBOL_BIT = 1 << 39  # kernel-symbol names share the name pool with the string table
SET_SHIFT = 40  # each uuid set gets its own id range in the pool
EVENT_COLUMNS = ("category_id", "stack_id", "correlation_id")
_TEXT = {"string", "display_name", "kernel_name", "command", "type"}
_ID_CHUNK = 20_000  # event ids per ``IN (…)`` list when reading roctx messages
Read = tuple[str, tuple[str, ...], bool]  # base table name, columns, joined to its events


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
    """Reads one :class:`TableSet`: info tables at once, row tables on request (see
    :mod:`.rows`); ``pool`` is set before rows are read."""

    def __init__(self, db: SqliteSource, tset: TableSet, index: int, warnings: list[str]):
        self.db, self.tset, self.warnings = db, tset, warnings
        self.key = index << SET_SHIFT
        self.pool = NamePool()
        self._pending: dict[Read, Future[pl.DataFrame | None]] = {}
        self.strings = self.frame("rocpd_string", ("id", "string"))
        if self.strings is None:
            raise TraceError(f"{db.path}: rocpd string table{tset.suffix} is missing; export again")
        sym = self.frame(
            "rocpd_info_kernel_symbol",
            (
                "id",
                "display_name",
                "kernel_name",
                "sgpr_count",
                "arch_vgpr_count",
                "accum_vgpr_count",
            ),
        )
        self.symbols = sym if sym is not None else pl.DataFrame({"id": []}, {"id": pl.Int64})
        procs = self.frame("rocpd_info_process", ("id", "pid", "command"))
        threads = self.frame("rocpd_info_thread", ("id", "tid"))
        self.pid_of = id_mapping(procs, "pid")
        self.tid_of = id_mapping(threads, "tid")
        self.processes = (
            []
            if procs is None
            else [{"pid": p, "command": c} for p, c in procs.select("pid", "command").iter_rows()]
        )
        self.gpu_of: dict[int, int] = {}
        self.agent_label: dict[Any, str] = {}
        self.devices = self._agents()

    # -- catalogue and reads ----------------------------------------------------------------

    def columns(self, name: str) -> tuple[str, ...]:
        return tuple(r[1] for r in self.db.con.execute(f'PRAGMA table_info("{name}")'))

    def prefetch(self, pool: Executor, reads: Iterable[Read]) -> None:
        """Start reading row tables in the background, in order: connectorx releases the
        GIL, so SQLite reads the next table while polars works on the previous one. Where
        the SQLite connection cannot be shared between threads, tables are read on demand."""
        if not SHARED_CONNECTIONS:
            return
        for read in reads:
            self._pending[read] = pool.submit(self._read, *read)

    def frame(
        self, base: str, columns: tuple[str, ...], events: bool = False
    ) -> pl.DataFrame | None:
        """Plain columns of a table or view (missing ones as nulls); None when it is absent.

        With ``events``, the row's ``rocpd_event`` fields (:data:`EVENT_COLUMNS`) are joined
        in SQL through ``event_id``: the event ids are the events' rowids, so each lookup is
        one B-tree seek, and no event row is read that no row of this table names. Plain
        columns only: connectorx types a computed column from its first row. A prefetched
        read is waited for.
        """
        pending = self._pending.pop((base, columns, events), None)
        return pending.result() if pending is not None else self._read(base, columns, events)

    def _read(self, base: str, columns: tuple[str, ...], events: bool) -> pl.DataFrame | None:
        name = self.tset.get(base)
        if name is None:
            return None
        have = set(self.columns(name))
        present = [c for c in columns if c in have]
        if not present:
            return None
        select = [f't."{c}"' for c in present]
        join, event = "", self.tset.get("rocpd_event")
        if events and event and "event_id" in have:
            got = [c for c in EVENT_COLUMNS if c in self.columns(event)]
            select += [f'e."{c}" AS "{c}"' for c in got]
            join = f'LEFT JOIN "{event}" AS e ON e.id = t."event_id"'
        wanted = (*columns, *EVENT_COLUMNS) if events else columns
        if self.tset.is_table(name):
            table = self.db.scan(name, ", ".join(select), join)
        else:
            table = self.db.arrow(f'SELECT {", ".join(select)} FROM "{name}" AS t {join}')
        df = pl.from_arrow(table)
        assert isinstance(df, pl.DataFrame)
        types = {c: pl.String if c in _TEXT else pl.Int64 for c in wanted}
        return conform(df, types).rechunk()  # connectorx answers in many small batches

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
        have = set(self.columns(name))
        cols = [c for c in AGENT_COLUMNS if c in have]
        rows = self.db.con.execute(f'SELECT {", ".join(cols)} FROM "{name}"').fetchall()
        devices, self.gpu_of, self.agent_label = read_agents([dict(zip(cols, r)) for r in rows])
        return devices

    def messages(self, event_ids: pl.Series) -> pl.DataFrame:
        """roctx messages (``rocpd_event.extdata`` ``$.message``) of these events, read by id."""
        frame = pl.DataFrame(schema={"event_id": pl.Int64, "message": pl.String})
        name = self.tset.get("rocpd_event")
        ids = event_ids.drop_nulls().unique().sort().to_list()
        if not name or not ids or "extdata" not in self.columns(name):
            return frame
        raws = []
        for i in range(0, len(ids), _ID_CHUNK):
            listed = ", ".join(str(int(v)) for v in ids[i : i + _ID_CHUNK])
            sql = f'SELECT id, extdata FROM "{name}" WHERE id IN ({listed})'
            raw = pl.from_arrow(self.db.arrow(sql))
            assert isinstance(raw, pl.DataFrame)
            raws.append(raw.select(pl.col("id").cast(pl.Int64), pl.col("extdata").cast(pl.String)))
        raw = pl.concat(raws)
        try:
            message = raw["extdata"].str.json_path_match("$.message")
        except pl.exceptions.ComputeError:
            return frame
        return pl.DataFrame({"event_id": raw["id"], "message": message}).drop_nulls()

    def note_unread(self) -> None:
        """Count the rows of tables this reader does not turn into timeline rows."""
        unread = (
            ("rocpd_memory_allocate", "memory allocation"),
            ("rocpd_pmc_event", "counter value"),
        )
        for base, what in unread:
            name = self.tset.get(base)
            if name is None:
                continue
            count = self.db.scalar(f'SELECT count(*) FROM "{name}"') or 0
            if count:
                self.warnings.append(f"{count} rocpd {what} rows not read (no timeline kind)")

    # -- lookups ----------------------------------------------------------------------------

    def valid(self, df: pl.DataFrame, kind: str) -> pl.DataFrame:
        """Rows with a start and an end; the others are dropped and counted."""
        missing = pl.col("start").is_null() | pl.col("end").is_null()
        bad = df.select(missing.sum()).item()
        if bad:
            self.warnings.append(f"{bad} {kind} rows without a start or end; dropped")
            df = df.filter(~missing)
        return df

    def strings_of(self, ids: pl.Series) -> pl.Series:
        """The string-table text of each id (null when absent)."""
        wanted = ids.unique().drop_nulls()
        found = self.strings.filter(pl.col("id").is_in(wanted.implode()))
        return ids.replace_strict(
            found["id"], found["string"], default=None, return_dtype=pl.String
        )

    def names(self, df: pl.DataFrame, messages: bool = False) -> np.ndarray:
        """Name indices from ``name_id``; with ``messages``, a roctx message where the row's
        event has one."""
        index = self.pool.from_ids((df["name_id"] + self.key).to_arrow())
        if messages and df.height:
            found = self.messages(df["event_id"])
            if found.height:
                text = df.select("event_id").join(
                    found, on="event_id", how="left", maintain_order="left"
                )["message"]
                by_message = self.pool.from_strings(text.to_arrow())
                index = np.where(by_message >= 0, by_message, index)
        return index

    def gpu(self, agents: pl.Series, kind: str) -> pa.Array:
        """GPU index of each agent id; rows on agents that are not GPUs get none."""
        if not self.gpu_of:
            return agents.to_arrow()
        mapped = agents.replace_strict(self.gpu_of, default=None, return_dtype=pl.Int64)
        lost = int((mapped.is_null() & agents.is_not_null()).sum())
        if lost:
            self.warnings.append(f"{lost} {kind} rows on agents that are not GPUs; device empty")
        return mapped.to_arrow()

    @staticmethod
    def map_ids(ids: pl.Series, mapping: dict[int, int]) -> pa.Array:
        """``mapping`` applied to ids (process / thread table ids to pid / tid)."""
        if all(k == v for k, v in mapping.items()):  # rocprofiler-sdk uses the ids themselves
            return ids.to_arrow()
        return ids.replace_strict(mapping, default=ids, return_dtype=pl.Int64).to_arrow()

    def count_unnamed(self, name: np.ndarray, kind: str) -> None:
        lost = int((name < 0).sum())
        if lost:
            self.warnings.append(f"{lost} {kind} names not found in the rocpd tables; left empty")
