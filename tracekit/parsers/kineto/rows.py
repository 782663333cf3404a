"""Kineto events -> timeline parts, one column at a time.

Categories of every vintage map to a timeline kind. Events are grouped by category first so
that each group reads only the fields its kind keeps; the kept args are re-encoded as compact
JSON by polars, not per event.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from operator import attrgetter
from typing import Any

import msgspec
import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from tracekit.parsers.assemble import Part
from tracekit.parsers.columns import floats, take, texts
from tracekit.parsers.kineto.decode import (
    INSTANT_GROUP,
    KEPT_PHASES,
    SKIP_GROUP,
    LenientEvent,
    to_ns,
    typed_ints,
)
from tracekit.parsers.names import NamePool

# category -> (kind, engine, on a device)
CATEGORIES: dict[str, tuple[str, str | None, bool]] = {
    "kernel": ("kernel", "sm", True),
    "Kernel": ("kernel", "sm", True),
    "gpu_memcpy": ("memcpy", "copy", True),
    "Memcpy": ("memcpy", "copy", True),
    "gpu_memset": ("memset", None, True),
    "Memset": ("memset", None, True),
    "cuda_sync": ("sync", None, True),
    "gpu_user_annotation": ("range", None, True),
    "cuda_profiler_range": ("range", None, True),
    "cuda_runtime": ("api", None, False),
    "cuda_driver": ("api", None, False),
    "Runtime": ("api", None, False),
    "cpu_op": ("op", None, False),
    "Operator": ("op", None, False),
    "python_function": ("op", None, False),
    "user_annotation": ("range", None, False),
    "Trace": ("range", None, False),
    "overhead": ("range", None, False),
}
LEGACY_CATEGORIES = ("Kernel", "Runtime", "Operator", "Memcpy", "Memset")
_INSTANT_SET = pa.array(KEPT_PHASES)
_TS, _DUR, _PH, _CAT, _NAME = (attrgetter(k) for k in ("ts", "dur", "ph", "cat", "name"))
_PID, _TID, _ARGS = (attrgetter(k) for k in ("pid", "tid", "args"))
NONE_STREAMS = (-1, 4294967295)
_NCCL = ("collective", "in_nelems", "out_nelems", "group_size", "dtype", "pg_name", "pg_desc",
         "pg_ranks")  # fmt: skip
# kind -> args keys written to the timeline (each only where the event has it)
ARGS_BY_KIND: dict[str, tuple[str, ...]] = {
    "kernel": ("external_id", "grid", "block", "registers", "shared_memory", "occupancy", *_NCCL),
    "memcpy": ("external_id", "bytes", "bandwidth"),
    "memset": ("external_id", "bytes", "bandwidth"),
    "sync": ("external_id", "wait_on_stream", "wait_on_event_corr", "event_id"),
    "op": ("external_id", *_NCCL),
    "api": ("external_id",),
}
_RAW_KEYS = ("grid", "block")  # JSON text as the trace wrote it
_FLOAT_KEYS = ("occupancy", "bandwidth")
_TEXT_KEYS = ("collective", "dtype", "pg_name", "pg_desc", "pg_ranks")


def _ints(values: list[Any], typed: bool = False) -> pa.Array:
    """Integers where the values are integers (or integral text); null elsewhere.
    ``typed``: the values come from the typed decoder (see :func:`typed_ints`)."""
    ints = typed_ints(values) if typed else None
    if ints is not None:
        return ints
    try:
        return pa.array(values, pa.int64())
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        pass
    odd = [i for i, kind in enumerate(map(type, values)) if kind is not int]
    fixed = values.copy()  # typically a few odd values among many integers
    for i in odd:
        fixed[i] = _as_int(values[i])
    try:
        return pa.array(fixed, pa.int64())
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):  # an int beyond 64 bits
        return pa.array([_as_int(v) for v in fixed], pa.int64())


def _as_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if -(2**63) <= value < 2**63 else None
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        text = value.strip().removeprefix("stream ").strip()
        try:
            return int(text, 16) if text.lower().startswith("0x") else int(text)
        except ValueError:
            return None
    return None


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
    if key in _RAW_KEYS:
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


NO_TS = "{n} {kind} events without a usable ts; dropped"
NO_DUR = "{n} {kind} events without dur; read as 0 ns"
NEGATIVE_DUR = "{n} {kind} events with negative dur; read as 0 ns"


def render_warnings(repairs: Counter[tuple[str, str]], unknown: Counter[str]) -> list[str]:
    """Warning lines for what the reader repaired or guessed, in a stable order."""
    lines = []
    if unknown:
        listing = ", ".join(
            f"{c} ({n})" for c, n in sorted(unknown.items(), key=lambda x: (-x[1], x[0]))
        )
        lines.append(f"unknown categories read as host ranges: {listing}")
    for (message, kind), n in repairs.items():
        if n:
            lines.append(message.format(n=n, kind=kind))
    return lines


class EventColumns:
    """Turns decoded events into :class:`Part` objects, category by category."""

    def __init__(self, events: list[Any], rank: int, include_python: bool,
                 raw_ts: Callable[[], list[bytes | None]], rank_in_args: bool) -> None:  # fmt: skip
        """``raw_ts`` returns the JSON text of every ``ts``; it is only called (here) when
        some timestamp is a float too large to hold ns."""
        self.events = events
        self.rank = rank
        self.include_python = include_python
        self.rank_in_args = rank_in_args
        self.repairs: Counter[tuple[str, str]] = Counter()  # (message, kind) -> events
        self.unknown: Counter[str] = Counter()  # unknown category -> events
        # All timestamps at once, while the JSON text (for coarse floats) is still at hand.
        self.typed = not events or type(events[0]) is not LenientEvent
        self.ts, self.ts_ok = to_ns(list(map(_TS, events)), raw=raw_ts, typed=self.typed)

    def _groups(self) -> dict[str, np.ndarray]:
        """Event indices per group: the category of complete events, "instant" for instant
        events, "skip" for everything else (flows, counters, metadata)."""
        cats = list(map(_CAT, self.events))  # typed events: cat is the group key
        if self.typed:  # str or None: polars converts them about twice as fast as pyarrow
            keys = pl.Series(cats, dtype=pl.String).to_arrow()
        else:  # ``ph`` is a decoded field
            keys = texts(cats)
            phases = pa.array(list(map(_PH, self.events)), pa.string())
            others = pc.if_else(pc.is_in(phases, _INSTANT_SET), INSTANT_GROUP, SKIP_GROUP)
            keys = pc.if_else(pc.equal(phases, "X"), keys, others)
        encoded = pc.dictionary_encode(keys)
        codes = encoded.indices.fill_null(-1).to_numpy(zero_copy_only=False)
        if len(encoded.dictionary) < 2**15:  # a stable sort of 16-bit keys is a radix sort
            codes = codes.astype(np.int16)
        order = np.argsort(codes, kind="stable")
        bounds = np.searchsorted(codes[order], np.arange(-1, len(encoded.dictionary) + 1))
        groups: dict[str, np.ndarray] = {}
        for code, value in enumerate([None, *encoded.dictionary.to_pylist()], start=-1):
            idx = order[bounds[code + 1] : bounds[code + 2]]
            if not len(idx):
                continue
            key = value if value in CATEGORIES or value in (INSTANT_GROUP, SKIP_GROUP) else "?"
            if key == "?":
                self.unknown["<none>" if value is None else value] += len(idx)
            groups[key] = np.concatenate([groups[key], idx]) if key in groups else idx
        if "?" in groups:
            groups["?"].sort()
        return groups

    def parts(self, pool: NamePool) -> list[Part]:
        """One part per category group, in a stable order."""
        parts = []
        for key, idx in sorted(self._groups().items()):
            if key == SKIP_GROUP or (key == "python_function" and not self.include_python):
                continue
            if key == INSTANT_GROUP:
                kind, engine, on_device = "marker", None, False
            else:
                kind, engine, on_device = CATEGORIES.get(key, ("range", None, False))
            part = self._part(idx, kind, engine, on_device, key in LEGACY_CATEGORIES, pool)
            if part is not None:
                parts.append(part)
        return parts

    def _ints(self, values: list[Any]) -> pa.Array:
        return _ints(values, self.typed)

    def _durations(self, events: list[Any], kind: str) -> np.ndarray:
        if kind == "marker":
            return np.zeros(len(events), dtype=np.int64)
        dur, ok = to_ns(list(map(_DUR, events)), typed=self.typed)
        self.repairs[(NO_DUR, kind)] += int((~ok).sum())
        self.repairs[(NEGATIVE_DUR, kind)] += int((ok & (dur < 0)).sum())
        return np.where(ok & (dur > 0), dur, 0)

    def _part(self, idx: np.ndarray, kind: str, engine: str | None, on_device: bool,
              legacy: bool, pool: NamePool) -> Part | None:  # fmt: skip
        events = take(self.events, idx)
        ts, ok = self.ts[idx], self.ts_ok[idx]
        if not ok.all():
            self.repairs[(NO_TS, kind)] += int((~ok).sum())
            events = [e for e, keep in zip(events, ok) if keep]
            ts = ts[ok]
        if not events:
            return None
        n = len(events)
        args = list(map(_ARGS, events))
        # The args type differs by phase (Args, InstantArgs, LenientArgs); rows without args
        # read as an empty one of the part's type.
        present = next((a for a in args if a is not None), None)
        empty = None if present is None else type(present)()
        if empty is not None and None in args:
            args = [a or empty for a in args]

        def get(name: str) -> list[Any]:
            return [None] * n if empty is None else list(map(attrgetter(name), args))

        columns: dict[str, Any] = {"corr": self._ints(get("correlation")), "rank": self.rank}
        if self.rank_in_args:
            columns["rank"] = self._ints(get("rank")).fill_null(self.rank)
        if on_device:
            device = self._ints(get("device"))
            if device.null_count:
                device = pc.coalesce(device, self._ints(list(map(_PID, events))))
            stream = self._ints(get("stream"))
            if stream.null_count:
                stream = pc.coalesce(stream, self._ints(list(map(_TID, events))))
            columns["device"] = device
            columns["stream"] = _without_sentinels(stream)
        else:
            columns["device"] = -1
            columns["pid"] = self._ints(list(map(_PID, events)))
            columns["tid"] = self._ints(list(map(_TID, events)))
        if kind in ARGS_BY_KIND:
            columns["args"] = self._args(kind, get, legacy, n)
        names = list(map(_NAME, events))
        try:
            name_array = pa.array(names, pa.string())
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            name_array = texts(names)
        name = pool.from_strings(name_array)
        return Part(kind, pa.array(ts), pa.array(self._durations(events, kind)), name, engine,
                    columns)  # fmt: skip

    def _args(self, kind: str, get: Callable[[str], list[Any]], legacy: bool, n: int) -> pa.Array:
        kept: dict[str, pa.Array] = {}
        for key in ARGS_BY_KIND[kind]:
            if key in _NCCL[1:] and "collective" not in kept:
                continue  # NCCL details only where a collective name is present
            values = get(key)
            if key == "external_id" and legacy:  # 2021 traces: "external id" on most rows
                values = [
                    v if v is not None else w for v, w in zip(values, get("external_id_legacy"))
                ]
            if key in _RAW_KEYS:
                array = _json_texts(values)
            elif key in _TEXT_KEYS:
                array = texts(values)
            elif key in _FLOAT_KEYS:
                array = floats(values)
            else:
                array = self._ints(values)
            if array.null_count < n:
                kept[key] = array
        return args_json(kept, n)
