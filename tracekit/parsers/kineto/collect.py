"""Decoded Kineto events -> the values tracekit keeps, collected piece by piece.

Categories of every vintage map to a timeline kind. Events are grouped by category first so
that each group reads only the fields its kind keeps; :mod:`.batch` turns the collected
values into Arrow columns.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from typing import Any

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tracekit.engine_frames import STEP_FUNCTIONS
from tracekit.parsers.convert import field_values, take, texts, to_ns
from tracekit.parsers.kineto.batch import (
    ARGS_BY_KIND,
    NCCL,
    NEGATIVE_DUR,
    NO_DUR,
    Batch,
    Group,
)
from tracekit.parsers.kineto.decode import (
    INSTANT_GROUP,
    KEPT_PHASES,
    SKIP_GROUP,
    LenientEvent,
)

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
_TS, _DUR, _PH, _CAT, _NAME = map(field_values, ("ts", "dur", "ph", "cat", "name"))
_PID, _TID, _ARGS = map(field_values, ("pid", "tid", "args"))


NO_TS = "{n} {kind} events without a usable ts; dropped"


def render_warnings(repairs: Counter[tuple[str, str]], unknown: Counter[str]) -> list[str]:
    """Warning lines for what the reader repaired or guessed, in a stable order."""
    lines = []
    if unknown:
        listing = ", ".join(
            f"{c} ({n})" for c, n in sorted(unknown.items(), key=lambda x: (-x[1], x[0]))
        )
        lines.append(f"unknown categories read as host ranges: {listing}")
    order = {NO_TS: 0, NO_DUR: 1, NEGATIVE_DUR: 2}  # the same whatever the read path
    for (message, kind), n in sorted(repairs.items(), key=lambda r: (order[r[0][0]], r[0][1])):
        if n:
            lines.append(message.format(n=n, kind=kind))
    return lines


def _codes(events: list[Any], typed: bool) -> tuple[list[str | None], np.ndarray]:
    """The distinct group keys of ``events`` and each event's position among them."""
    cats = _CAT(events)  # typed events: cat is the group key (str or None)
    if typed:  # a dict of the few distinct strings beats any conversion of all of them
        values = list(dict.fromkeys(cats))
        code_of = {value: code for code, value in enumerate(values)}
        return values, np.fromiter(map(code_of.__getitem__, cats), np.int32, len(cats))
    keys = texts(cats)  # lenient events: ``ph`` is a decoded field, ``cat`` may be any value
    phases = pa.array(_PH(events), pa.string())
    others = pc.if_else(pc.is_in(phases, _INSTANT_SET), INSTANT_GROUP, SKIP_GROUP)
    encoded = pc.dictionary_encode(pc.if_else(pc.equal(phases, "X"), keys, others))
    values = [*encoded.dictionary.to_pylist(), None]
    codes = encoded.indices.fill_null(len(values) - 1).to_numpy(zero_copy_only=False)
    return values, codes


def _step_functions(events: list[Any], idx: np.ndarray) -> np.ndarray:
    """The Python frames among ``events[idx]`` that are a serving engine's step function
    (``…/gpu_model_runner.py(3380): execute_model``): kept as step markers even when the
    other Python rows are dropped."""
    names = pa.array(_NAME(take(events, idx)), pa.string())
    keep = pc.match_substring_regex(names, STEP_FUNCTIONS).fill_null(False)
    return idx[keep.to_numpy(zero_copy_only=False)]


class EventColumns:
    """Collects the values of decoded events piece by piece (:meth:`add`), one
    :class:`Group` per category, and hands them over as a :class:`Batch` (:meth:`take_batch`).

    A piece's events can be freed once added: only the values kept are held, as Python lists,
    and they are converted to Arrow arrays once per batch of pieces, not once per piece.
    """

    def __init__(self, rank: int, include_python: bool, rank_in_args: bool) -> None:
        self.rank = rank
        self.include_python = include_python
        self.rank_in_args = rank_in_args
        self.repairs: Counter[tuple[str, str]] = Counter()  # (message, kind) -> events
        self.unknown: Counter[str] = Counter()  # unknown category -> events
        self.typed = True  # every piece of this batch came from the typed decoder
        self.rows = 0  # events added since the last batch was taken
        self._groups: dict[str, Group] = {}

    def add(self, events: list[Any], raw_ts: Callable[[], list[bytes | None]]) -> None:
        """Collect the values of one piece of decoded events. ``raw_ts`` returns the JSON text
        of every ``ts``; it is only called (here) when some timestamp is a float too large to
        hold ns."""
        if not events:
            return
        typed = type(events[0]) is not LenientEvent
        self.typed = self.typed and typed
        # All timestamps at once, while the JSON text (for coarse floats) is still at hand.
        ts, ts_ok = to_ns(_TS(events), raw=raw_ts, typed=typed)
        for key, idx in self._grouped(events, typed).items():
            if key == "python_function" and not self.include_python:
                idx = _step_functions(events, idx)
            if key == SKIP_GROUP or not len(idx):
                continue
            self._collect(key, take(events, idx), ts[idx], ts_ok[idx])
        self.rows += len(events)

    def _grouped(self, events: list[Any], typed: bool) -> dict[str, np.ndarray]:
        """Event indices per group: the category of complete events, "instant" for instant
        events, "skip" for everything else (flows, counters, metadata)."""
        values, codes = _codes(events, typed)
        if len(values) < 2**15:  # a stable sort of 16-bit keys is a radix sort
            codes = codes.astype(np.int16)
        order = np.argsort(codes, kind="stable")
        bounds = np.searchsorted(codes[order], np.arange(len(values) + 1))
        groups: dict[str, np.ndarray] = {}
        for code, value in enumerate(values):
            idx = order[bounds[code] : bounds[code + 1]]
            if not len(idx):
                continue
            key = value if value in CATEGORIES or value in (INSTANT_GROUP, SKIP_GROUP) else "?"
            if key == "?":
                self.unknown["<none>" if value is None else value] += len(idx)
            groups[key] = np.concatenate([groups[key], idx]) if key in groups else idx
        if "?" in groups:
            groups["?"].sort()
        return groups

    def _collect(self, key: str, events: list[Any], ts: np.ndarray, ok: np.ndarray) -> None:
        if key == INSTANT_GROUP:
            kind, engine, on_device = "marker", None, False
        else:
            kind, engine, on_device = CATEGORIES.get(key, ("range", None, False))
        if not ok.all():
            self.repairs[(NO_TS, kind)] += int((~ok).sum())
            events = [e for e, keep in zip(events, ok) if keep]
            ts = ts[ok]
        if not events:
            return
        group = self._groups.get(key)
        if group is None:
            self._groups[key] = group = Group(kind, engine, on_device)
        n = len(events)
        args = _ARGS(events)
        # The args type differs by phase (Args, InstantArgs, LenientArgs); rows without args
        # read as an empty one of the piece's type.
        present = next((a for a in args if a is not None), None)
        empty = None if present is None else type(present)()
        if empty is not None and None in args:
            args = [a or empty for a in args]

        def get(name: str) -> list[Any]:
            return [None] * n if empty is None else field_values(name)(args)

        group.ts.append(ts)
        group.add("correlation", get("correlation"))
        if self.rank_in_args:
            group.add("rank", get("rank"))
        if on_device:
            group.add("device", get("device"))
            group.add("stream", get("stream"))
        group.add("pid", _PID(events))
        group.add("tid", _TID(events))
        if kind in ARGS_BY_KIND:
            self._collect_args(group, get, key in LEGACY_CATEGORIES, n)
        group.add("name", _NAME(events))
        if kind != "marker":
            group.add("dur", _DUR(events))
        group.rows += n

    @staticmethod
    def _collect_args(group: Group, get: Callable[[str], list[Any]], legacy: bool, n: int) -> None:
        collectives = False  # "collective" comes before the NCCL details in ARGS_BY_KIND
        for key in ARGS_BY_KIND[group.kind]:
            if key in NCCL[1:] and not collectives:
                continue  # NCCL details are kept only on rows with a collective name
            values = get(key)
            if key == "external_id" and legacy:  # 2021 traces: "external id" on most rows
                values = [
                    v if v is not None else w for v, w in zip(values, get("external_id_legacy"))
                ]
            if key == "collective":
                collectives = values.count(None) < n
            if key == "input_dims":  # Raw views of the input text, copied out
                values = _json_column(values)
            elif key in ("input_types", "concrete_inputs"):  # strings: spaces kept
                values = _json_column(values, compact=False)
            group.add(key, values)

    def take_batch(self) -> Batch:
        """The values collected since the last call, to be turned into a table."""
        batch = Batch(self._groups, self.typed, self.rank, self.rank_in_args)
        self._groups, self.rows, self.typed = {}, 0, True
        return batch


_LINE_BREAKS = re.compile(rb"\r?\n[ \t]*")


def _json_column(values: list[Any], compact: bool = True) -> list[bytes | None]:
    """:func:`_json_bytes` of every value; a column of Raw texts (the typed decoder's) is
    joined, cleaned and split again in one pass each instead of a call per value."""
    if not values:
        return []
    try:
        # no JSON text holds a NUL byte (control characters in strings are escaped)
        joined = b"\0".join(values)
    except TypeError:  # values decoded leniently (lists, strings) or None
        return [_json_bytes(v, compact) for v in values]
    joined = joined.translate(None, b" \n\t\r") if compact else _LINE_BREAKS.sub(b"", joined)
    return [None if text == b"null" else text for text in joined.split(b"\0")]


def _json_bytes(value: Any, compact: bool = True) -> bytes | None:
    """JSON text of an operator's input list as bytes: a Raw's own text (copied, so that it
    pins nothing; ``compact`` drops its spaces, safe for shapes, which hold no strings), or
    a leniently decoded value encoded again; None for none."""
    if value is None:
        return None
    if not isinstance(value, msgspec.Raw):
        return msgspec.json.encode(value)
    text = bytes(value)
    # pretty-printed traces put every item on a line of its own; no string here holds a
    # line break, so dropping each break with the indentation after it is safe
    text = text.translate(None, b" \n\t\r") if compact else _LINE_BREAKS.sub(b"", text)
    return None if text == b"null" else text
