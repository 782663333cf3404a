"""Collected Kineto values -> timeline parts: the Arrow side of reading events.

:class:`Group` holds one category's values as Python lists, appended piece by piece;
:class:`Batch` converts the groups of a few pieces into Arrow columns in one go, so that
each conversion's fixed cost is paid once per batch.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tracekit.parsers.assemble import Part, assemble
from tracekit.parsers.convert import floats, ints, texts, to_ns
from tracekit.parsers.name_pool import NamePool

NONE_STREAMS = (-1, 4294967295)

NCCL = ("collective", "in_nelems", "out_nelems", "group_size", "dtype", "pg_name", "pg_desc",
        "pg_ranks", "seq")  # fmt: skip
# kind -> args keys written to the timeline (each only where the event has it)
ARGS_BY_KIND: dict[str, tuple[str, ...]] = {
    "kernel": ("external_id", "grid", "block", "registers", "shared_memory", "occupancy", *NCCL),
    "memcpy": ("external_id", "bytes", "bandwidth"),
    "memset": ("external_id", "bytes", "bandwidth"),
    "sync": ("external_id", "wait_on_stream", "wait_on_event_corr", "event_id"),
    "op": ("external_id", "input_dims", "input_types", "concrete_inputs", *NCCL),
    "api": ("external_id",),
}
_RAW_KEYS = ("grid", "block")  # JSON text as the trace wrote it
# JSON text copied out of the input as bytes
_BYTES_KEYS = ("input_dims", "input_types", "concrete_inputs")
_FLOAT_KEYS = ("occupancy", "bandwidth")
_TEXT_KEYS = ("collective", "dtype", "pg_name", "pg_desc", "pg_ranks")


_LIST_OR_NONE = {list, type(None)}
_JSON_LIST_OR_NULL = re.compile(rb"\[[^\[\]]*\]|null")


def _json_texts(values: list[Any]) -> pa.Array:
    """JSON text per value: flat lists like ``[8, 1, 1]`` are encoded as one array and cut
    in C; anything else (leniently decoded values) is encoded one by one."""
    kinds = set(map(type, values))
    if kinds == {list}:  # no nulls: ``[[8,1,1],[4,1,1]]`` -> "[8,1,1][4,1,1]" and offsets
        body = msgspec.json.encode(values)[1:-1].replace(b"],[", b"][")
        chars = np.frombuffer(body, np.uint8)
        starts = np.flatnonzero(chars == ord("["))
        # One "[" and one "]" per value: no nested list, no bracket inside a string, so
        # every "],[" replaced above was a boundary between two values.
        flat = len(starts) == len(values) == np.count_nonzero(chars == ord("]"))
        if flat and len(body) < 2**31:  # int32 offsets
            offsets = pa.py_buffer(np.append(starts, len(body)).astype(np.int32))
            return pa.StringArray.from_buffers(len(values), offsets, pa.py_buffer(body))
    if kinds <= _LIST_OR_NONE:
        body = msgspec.json.encode(values)[1:-1]
        pieces = _JSON_LIST_OR_NULL.findall(body)
        if len(pieces) == len(values) and b",".join(pieces) == body:  # no nested lists
            texts = pa.array(pieces, pa.binary()).cast(pa.string())
            return pc.if_else(pc.equal(texts, "null"), pa.scalar(None, pa.string()), texts)
    out = []
    for value in values:
        text = msgspec.json.encode(value).decode()
        out.append(None if text == "null" else text)
    return pa.array(out, pa.string())


def _without_sentinels(values: pa.Array) -> pa.Array:
    """Null where a stream id is missing or one of the "no stream" sentinels."""
    arr = values.fill_null(NONE_STREAMS[0]).to_numpy(zero_copy_only=False)
    none = np.isin(arr, NONE_STREAMS)
    return pa.array(np.where(none, 0, arr), mask=none)


def _json_text(key: str, values: pa.Array) -> pa.Array:
    """JSON text of each value of one args column (null stays null)."""
    if key in _RAW_KEYS or key in _BYTES_KEYS:
        return values  # already JSON text
    if key in _TEXT_KEYS:  # NCCL details: few rows, escaped by msgspec one by one
        texts = [None if v is None else msgspec.json.encode(v).decode() for v in values.to_pylist()]
        return pa.array(texts, pa.string())
    if pa.types.is_floating(values.type):  # JSON has no NaN or infinity
        values = pc.if_else(pc.is_finite(values), values, pa.scalar(None, values.type))
    return pc.cast(values, pa.string())


def args_json(columns: dict[str, pa.Array], n: int) -> pa.Array:
    """Compact JSON objects of the given columns, leaving out null values per row."""
    if not columns:
        return pa.nulls(n, pa.string())
    texts = {key: _json_text(key, values) for key, values in columns.items()}  # NaN -> null
    if len(texts) == 1:  # the common case (host rows: only "external_id"); null stays null
        ((key, text),) = texts.items()
        return pc.binary_join_element_wise(f'{{"{key}":', text, "}", "")
    if not any(text.null_count for text in texts.values()):  # e.g. every kernel row
        pieces: list[Any] = []
        for i, (key, text) in enumerate(texts.items()):
            pieces += [f'{"{" if i == 0 else ","}"{key}":', text]
        return pc.binary_join_element_wise(*pieces, "}", "")
    # Each pair carries its own leading comma and null pairs become "", so that no join sees
    # a null (pyarrow 26's null_handling="skip" drops rows whose inputs are all null).
    pairs = [
        pc.binary_join_element_wise(f',"{key}":', text, "").fill_null("")
        for key, text in texts.items()
    ]
    body = pc.binary_join_element_wise(*pairs, "") if len(pairs) > 1 else pairs[0]
    text = pc.binary_join_element_wise("{", pc.utf8_slice_codeunits(body, 1), "}", "")
    return pc.if_else(pc.equal(body, ""), pa.scalar(None, pa.string()), text)


class Group:
    """The values of one category's events, collected piece by piece as Python lists."""

    def __init__(self, kind: str, engine: str | None, on_device: bool) -> None:
        self.kind, self.engine, self.on_device = kind, engine, on_device
        self.rows = 0
        self.ts: list[np.ndarray] = []
        self.values: dict[str, list[Any]] = {}

    def add(self, column: str, values: list[Any]) -> None:
        """Append one piece's values of ``column`` (before :attr:`rows` counts that piece)."""
        self.column(column).extend(values)

    def column(self, name: str) -> list[Any]:
        """All rows' values of ``name``: None for the rows of pieces that had none."""
        values = self.values.setdefault(name, [])
        if len(values) < self.rows:
            values += [None] * (self.rows - len(values))
        return values


NO_DUR = "{n} {kind} events without dur; read as 0 ns"
NEGATIVE_DUR = "{n} {kind} events with negative dur; read as 0 ns"


class Batch:
    """The groups of a few pieces, turned into one timeline table by :meth:`table`."""

    def __init__(
        self, groups: dict[str, Group], typed: bool, rank: int, rank_in_args: bool
    ) -> None:
        """``typed``: every value came from the typed decoder (see :func:`typed_ints`)."""
        self.groups = groups
        self.typed = typed
        self.rank = rank
        self.rank_in_args = rank_in_args
        self.repairs: Counter[tuple[str, str]] = Counter()  # (message, kind) -> events

    def table(self) -> pa.Table:
        """The timeline table of every group, one part per group in a stable order."""
        pool = NamePool()
        return assemble([self._part(self.groups[key], pool) for key in sorted(self.groups)], pool)

    def _int_column(self, values: list[Any]) -> pa.Array:
        return ints(values, self.typed)

    def _durations(self, values: list[Any], kind: str) -> np.ndarray:
        dur, ok = to_ns(values, typed=self.typed)
        self.repairs[(NO_DUR, kind)] += int((~ok).sum())
        self.repairs[(NEGATIVE_DUR, kind)] += int((ok & (dur < 0)).sum())
        return np.where(ok & (dur > 0), dur, 0)

    def _part(self, group: Group, pool: NamePool) -> Part:
        n, kind, column = group.rows, group.kind, group.column
        columns: dict[str, Any] = {
            "corr": self._int_column(column("correlation")),
            "rank": self.rank,
        }
        if self.rank_in_args:
            columns["rank"] = self._int_column(column("rank")).fill_null(self.rank)
        if group.on_device:
            device = self._int_column(column("device"))
            if device.null_count:
                device = pc.coalesce(device, self._int_column(column("pid")))
            stream = self._int_column(column("stream"))
            if stream.null_count:
                stream = pc.coalesce(stream, self._int_column(column("tid")))
            columns["device"] = device
            columns["stream"] = _without_sentinels(stream)
        else:
            columns["device"] = -1
            columns["pid"] = self._int_column(column("pid"))
            columns["tid"] = self._int_column(column("tid"))
        if kind in ARGS_BY_KIND:
            columns["args"] = self._args(group, n)
        name = pool.from_strings(texts(column("name")))
        ts = np.concatenate(group.ts) if len(group.ts) > 1 else group.ts[0]
        if kind == "marker":
            durations = np.zeros(n, dtype=np.int64)
        else:
            durations = self._durations(column("dur"), kind)
        return Part(kind, pa.array(ts), pa.array(durations), name, group.engine, columns)

    def _args(self, group: Group, n: int) -> pa.Array:
        kept: dict[str, pa.Array] = {}
        for key in ARGS_BY_KIND[group.kind]:
            if key not in group.values:  # no piece had this key
                continue
            if key in NCCL[1:] and "collective" not in kept:
                continue  # NCCL details only on rows with a collective name
            values = group.column(key)
            if key in _RAW_KEYS:
                array = _json_texts(values)
            elif key in _BYTES_KEYS:
                array = pa.array(values, pa.binary()).cast(pa.string())
            elif key in _TEXT_KEYS:
                array = texts(values)
            elif key in _FLOAT_KEYS:
                array = floats(values)
            else:
                array = self._int_column(values)
            if key in NCCL[1:]:
                valid = kept["collective"].is_valid()
                array = pc.if_else(valid, array, pa.scalar(None, array.type))
            if array.null_count < n:
                kept[key] = array
        return args_json(kept, n)
