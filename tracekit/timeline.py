"""The normalized timeline: one Arrow table of events plus JSON metadata.

Every parser ends in a :class:`Timeline`; everything downstream reads only this.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.feather as feather
import pyarrow.parquet as pq

from tracekit.errors import TraceError

SCHEMA_VERSION = 1
META_KEY = b"tracekit"

KINDS = ("kernel", "memcpy", "memset", "comm", "sync", "api", "range", "op", "marker")
DEVICE_KINDS = ("kernel", "memcpy", "memset", "comm", "sync")
WORK_KINDS = ("kernel", "comm", "memcpy", "memset")  # rows that make a device busy
# A communication row that is one task of a larger one (an HCCL collective's hardware task)
# names it in ``args`` under this key: interval unions keep it, sums of time leave it out
# (its collective counts), so no time is counted twice.
PART_OF = "op"
_PART_ARG = f'"{PART_OF}":\\s*"'  # the key naming the row's op, with a text value


def is_part() -> pl.Expr:
    """True for a row that is one task of another row (see :data:`PART_OF`); on large frames
    :func:`part_mask` is cheaper."""
    return (pl.col("kind") == "comm") & pl.col("args").str.contains(_PART_ARG).fill_null(False)


def part_mask(frame: pl.DataFrame) -> pl.Series:
    """:func:`is_part` of every row of ``frame``, its ``args`` searched on the communication
    rows alone (a device trace has millions of kernels with long args and few such rows)."""
    comm = frame.select((pl.col("kind") == "comm").fill_null(False).arg_true())[:, 0]
    found = pl.repeat(False, frame.height, dtype=pl.Boolean, eager=True).alias("is_part")
    if not comm.len():
        return found
    hits = frame.select(pl.col("args").gather(comm).str.contains(_PART_ARG))[:, 0]
    return found.scatter(comm, hits.fill_null(False))


_DICT = pa.dictionary(pa.int32(), pa.string())

SCHEMA = pa.schema(
    [
        pa.field("ts", pa.int64(), nullable=False),
        pa.field("dur", pa.int64(), nullable=False),
        pa.field("kind", _DICT),
        pa.field("name", _DICT),
        pa.field("device", pa.int32()),
        pa.field("stream", pa.int64()),
        pa.field("rank", pa.int32()),
        pa.field("pid", pa.int64()),
        pa.field("tid", pa.int64()),
        pa.field("corr", pa.int64()),
        pa.field("engine", _DICT),
        pa.field("args", pa.string()),
    ]
)
COLUMNS = tuple(SCHEMA.names)
# ``args`` may be held as Arrow's string view: rows of one text then share its bytes (a
# device trace repeats a few thousand texts millions of times; 1.1 GB spelled out at 10M
# rows). :attr:`Timeline.events` hands it over as ``string``, the schema's type.
_ARGS = SCHEMA.get_field_index("args")
VIEW_SCHEMA = SCHEMA.set(_ARGS, pa.field("args", pa.string_view()))


def empty_meta() -> dict[str, Any]:
    """Return the metadata skeleton every parser fills in."""
    return {
        "format": None,
        "producer": {},
        "source": None,
        "origin_ns": None,
        "devices": [],
        "ranks": [0],
        "schema_version": SCHEMA_VERSION,
        "warnings": [],
    }


def _compact(array: pa.ChunkedArray) -> bool:
    """Every chunk's dictionary holds distinct non-null values, each used by a row: what
    encoding the values afresh would give, so the dictionary can be cast as it is."""
    for chunk in array.chunks:
        values = chunk.dictionary
        if values.null_count or pc.count_distinct(values).as_py() != len(values):
            return False
        if pc.count_distinct(chunk.indices).as_py() != len(values):
            return False
    return True


def _as_dictionary(array: pa.Array | pa.ChunkedArray) -> pa.ChunkedArray:
    array = array if isinstance(array, pa.ChunkedArray) else pa.chunked_array([array])
    if pa.types.is_dictionary(array.type):
        if array.type == _DICT:
            return array
        if _compact(array):  # indices and dictionary cast, values never spelled out per row
            try:
                return array.cast(_DICT)
            except (pa.ArrowNotImplementedError, pa.ArrowInvalid):
                pass
        array = array.cast(pa.string())
    return pc.dictionary_encode(array.cast(pa.string())).cast(_DICT)


def build_table(columns: Mapping[str, Any], length: int | None = None) -> pa.Table:
    """Build an events table in :data:`SCHEMA` from a mapping of column -> array-like.

    Missing columns become all-null; values are cast to the schema's types, but ``args``
    given as a string view stays one (:data:`VIEW_SCHEMA`).
    """
    n = length
    if n is None:
        n = len(columns["ts"])
    arrays = []
    for field in SCHEMA:
        value = columns.get(field.name)
        if value is None:
            arrays.append(pa.nulls(n, field.type))
            continue
        if isinstance(value, (pl.Series, pl.DataFrame)):
            value = value.to_arrow()
        if not isinstance(value, (pa.Array, pa.ChunkedArray)):
            value = pa.array(value)
        if pa.types.is_dictionary(field.type):
            arrays.append(_as_dictionary(value))
        elif field.name == "args" and value.type == pa.string_view():
            arrays.append(value)
        else:
            arrays.append(value.cast(field.type))
    viewed = arrays[_ARGS].type == pa.string_view()
    return pa.Table.from_arrays(arrays, schema=VIEW_SCHEMA if viewed else SCHEMA)


def _in_one_chunk(column: pa.ChunkedArray) -> pa.ChunkedArray:
    """``column`` in one chunk, or as it is when one chunk cannot hold it (text past the 2 GiB
    that 32-bit offsets reach)."""
    try:
        return pa.chunked_array([column.combine_chunks()], column.type)
    except (pa.ArrowInvalid, pa.ArrowCapacityError):
        return column


def spelled_out(views: pa.ChunkedArray, limit: int = 2**30) -> pa.ChunkedArray:
    """A string-view column as plain strings (by polars: 5x faster than Arrow's cast), in
    chunks of at most ``limit`` bytes of text (a string chunk's offsets end at 2 GiB)."""
    chunks = []
    for chunk in views.chunks:
        text = pl.Series(chunk)
        ends = text.str.len_bytes().cast(pl.Int64).fill_null(0).cum_sum().to_numpy()
        cuts = np.searchsorted(ends, np.arange(limit, ends[-1] if len(ends) else 0, limit))
        for start, stop in zip([0, *cuts.tolist()], [*cuts.tolist(), len(text)]):
            # each piece converted on its own: its own buffers, offsets from 0
            chunks.append(text.slice(start, stop - start).to_arrow().cast(pa.string()))
    return pa.chunked_array(chunks, pa.string())


class Timeline:
    """Events of one trace (an Arrow table in :data:`SCHEMA`, its ``args`` possibly held as
    a string view: :attr:`stored`) and their metadata."""

    def __init__(self, events: pa.Table, meta: Mapping[str, Any] | None = None) -> None:
        base = empty_meta()
        base.update(dict(meta or {}))
        self._events = events.replace_schema_metadata(None)
        self._df: pl.DataFrame | None = None
        self.meta: dict[str, Any] = base

    @property
    def events(self) -> pa.Table:
        """The events as a pyarrow Table in :data:`SCHEMA`, with the metadata attached to its
        schema (``args`` held as a string view is spelled out here)."""
        table = self._events
        if table.schema.field("args").type == pa.string_view():
            table = table.set_column(_ARGS, SCHEMA.field(_ARGS), spelled_out(table[_ARGS]))
        return table.replace_schema_metadata({META_KEY: json.dumps(self.meta)})

    @property
    def stored(self) -> pa.Table:
        """The events as held, without metadata: :data:`SCHEMA`, but ``args`` may be a string
        view (rows of one text share its bytes); for reading without a copy."""
        return self._events

    @property
    def df(self) -> pl.DataFrame:
        """The events as a polars DataFrame (dictionary columns become Categorical)."""
        if self._df is None:
            self._df = pl.from_arrow(self._events)  # type: ignore[assignment]
        return self._df  # type: ignore[return-value]

    def combine_chunks(self) -> None:
        """Every column of the events in one chunk (readers hand over their batches as chunks),
        combined two columns at a time so that each column's old chunks can be freed soon after
        it is copied. Call it before :attr:`df` is first read.

        A polars frame of chunked columns is re-cut and copied whole (``args`` included) by
        the first filter after a column of another chunking joins it (the taxonomy's flags, a
        step column): 0.7 GiB at 10M rows, and again by every later such filter."""
        if all(column.num_chunks <= 1 for column in self._events.columns):
            return
        schema, columns = self._events.schema, self._events.columns
        todo = [i for i, column in enumerate(columns) if column.num_chunks > 1]
        try:
            self._events = pa.table({})  # the old columns are now held by the list alone
            # two at a time: Arrow copies without the GIL, and most of the time is the first
            # touch of the new buffers (the big text column beside the others: 0.45 -> 0.1 s
            # at 1.5M rows on 2 cores)
            with ThreadPoolExecutor(2) as pool:
                for i, combined in zip(todo, pool.map(_in_one_chunk, (columns[i] for i in todo))):
                    columns[i] = combined
        finally:
            self._events = pa.Table.from_arrays(columns, schema=schema)
            self._df = None

    def __len__(self) -> int:
        return self._events.num_rows

    def __repr__(self) -> str:
        return f"Timeline({self.meta.get('format')!r}, {len(self)} events)"

    def warn(self, message: str) -> None:
        """Record something the parser had to guess or drop."""
        self.meta["warnings"].append(message)

    def validate(self) -> list[str]:
        """Return the schema violations found (an empty list when the timeline is sound)."""
        problems = []
        table = self._events
        types = [(f.name, f.type) for f in table.schema]
        if types not in ([(f.name, f.type) for f in s] for s in (SCHEMA, VIEW_SCHEMA)):
            problems.append("columns or types differ from the timeline schema")
            return problems
        for col in ("ts", "dur"):
            nulls = table.column(col).null_count
            if nulls:
                problems.append(f"{col} has {nulls} null values")
        negative = pc.sum(pc.less(table.column("dur"), 0)).as_py() or 0
        if negative:
            problems.append(f"dur is negative in {negative} rows")
        kinds = set(table.column("kind").unique().to_pylist()) - {None}
        unknown = sorted(kinds - set(KINDS))
        if unknown:
            problems.append(f"unknown kinds: {', '.join(unknown)}")
        missing_kind = table.column("kind").null_count
        if missing_kind:
            problems.append(f"kind is null in {missing_kind} rows")
        return problems

    @classmethod
    def from_arrow(cls, table: pa.Table, source: str = "") -> Timeline:
        """Rebuild a Timeline from a table written by :func:`tracekit.export.save`."""
        raw = (table.schema.metadata or {}).get(META_KEY)
        if raw is None:
            raise TraceError(
                f"{source}: Arrow data without tracekit metadata; not a saved timeline"
            )
        missing = [c for c in COLUMNS if c not in table.column_names]
        if missing:
            raise TraceError(f"{source}: saved timeline lacks columns {', '.join(missing)}")
        meta = json.loads(raw)
        if not isinstance(meta, dict):
            raise TraceError(
                f"{source}: tracekit metadata is not a JSON object; not a saved timeline"
            )
        table = build_table({c: table.column(c) for c in COLUMNS}, table.num_rows)
        return cls(table, meta)

    @classmethod
    def read(cls, path: str | Path) -> Timeline:
        """Read a timeline saved as Parquet or Arrow IPC; refuse one that breaks the schema."""
        path = Path(path)
        with path.open("rb") as fh:
            magic = fh.read(6)
        if magic[:4] == b"PAR1":
            table = pq.read_table(path)
        elif magic == b"ARROW1":
            table = feather.read_table(path)
        else:
            raise TraceError(f"{path}: not a Parquet or Arrow IPC file")
        timeline = cls.from_arrow(table, str(path))
        problems = timeline.validate()
        if problems:
            raise TraceError(
                f"{path}: saved timeline breaks the schema ({'; '.join(problems)});"
                " convert the original trace again"
            )
        return timeline
