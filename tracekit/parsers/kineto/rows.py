"""Kineto events -> timeline parts, one column at a time.

Categories of every vintage map to a timeline kind; device rows take device and stream from
``args`` (falling back to pid/tid, including the legacy ``"stream 7"`` form); the kept args
are re-encoded as compact JSON by polars, not per event.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec
import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from tracekit.parsers.assemble import Part
from tracekit.parsers.kineto.decode import to_ns
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
INSTANT_PHASES = ("i", "I", "R")
NONE_STREAMS = (-1, 4294967295)
_NCCL_ARGS = ("collective", "in_nelems", "out_nelems", "group_size", "dtype",
              "pg_name", "pg_desc", "pg_ranks")  # fmt: skip
# kind -> (keys always written when present, NCCL keys written on collective rows only)
_ARGS_BY_KIND: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "kernel": (
        ("external_id", "grid", "block", "registers", "shared_memory", "occupancy"),
        _NCCL_ARGS,
    ),
    "memcpy": (("external_id", "bytes", "bandwidth"), ()),
    "memset": (("external_id", "bytes", "bandwidth"), ()),
    "sync": (("external_id", "wait_on_stream", "wait_on_event_corr", "event_id"), ()),
    "op": (("external_id",), _NCCL_ARGS),
    "api": (("external_id",), ()),
}


def _field(args: np.ndarray, name: str) -> list[Any]:
    return [None if a is None else getattr(a, name) for a in args]


def _ints(values: list[Any]) -> pa.Array:
    """Integers where the values are integers (or integral text); null elsewhere."""
    try:
        return pa.array(values, pa.int64())
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        return pa.array([_as_int(v) for v in values], pa.int64())


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


def _coalesce(first: pa.Array, second: list[Any]) -> pa.Array:
    """``first`` where set, else ``second`` read as integers."""
    return first if not first.null_count else pc.coalesce(first, _ints(second))


def _without_sentinels(values: pa.Array) -> pa.Array:
    """Null where a stream id is missing or one of the "no stream" sentinels."""
    arr = values.fill_null(NONE_STREAMS[0]).to_numpy(zero_copy_only=False)
    none = np.isin(arr, NONE_STREAMS)
    return pa.array(np.where(none, 0, arr), mask=none)


def _external_ids(args: np.ndarray) -> list[Any]:
    return [
        None
        if a is None
        else (a.external_id if a.external_id is not None else a.external_id_legacy)
        for a in args
    ]


_FLOAT_KEYS = ("occupancy", "bandwidth")
_LIST_KEYS = ("grid", "block")
_TEXT_KEYS = ("collective", "dtype", "pg_name", "pg_desc", "pg_ranks")


def _normalise(key: str, values: list[Any]) -> pa.Array:
    """One Arrow type per kept key, whatever mix of types the trace used."""
    if key in _TEXT_KEYS:
        return pa.array([None if v is None else v if isinstance(v, str) else str(v)
                         for v in values], pa.string())  # fmt: skip
    if key in _LIST_KEYS:
        return pa.array([v if isinstance(v, list) else _list_from_text(v) for v in values],
                        pa.list_(pa.int64()))  # fmt: skip
    if key in _FLOAT_KEYS:
        try:
            return pa.array(values, pa.float64())
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            return pa.array([_as_float(v) for v in values], pa.float64())
    return _ints(values)


def _list_from_text(value: Any) -> list[int] | None:
    if not isinstance(value, str):
        return None
    try:
        parsed = msgspec.json.decode(value)
    except msgspec.DecodeError:
        return None
    return parsed if isinstance(parsed, list) and all(type(x) is int for x in parsed) else None


def _as_float(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _args_json(args: np.ndarray, base: tuple[str, ...], nccl: tuple[str, ...]) -> pa.Array:
    """Compact JSON of the kept args per row (NCCL keys only on collective rows)."""
    columns: dict[str, pa.Array] = {}
    for key in base + nccl:
        values = _external_ids(args) if key == "external_id" else _field(args, key)
        if any(v is not None for v in values):
            columns[key] = _normalise(key, values)
    if not columns:
        return pa.nulls(len(args), pa.string())
    frame = pl.DataFrame(columns)
    base_keys = [k for k in base if k in columns]
    nccl_keys = [k for k in nccl if k in columns]
    plain = pl.struct(base_keys).struct.json_encode() if base_keys else pl.lit(None, pl.String)
    if nccl_keys:
        full = pl.struct(base_keys + nccl_keys).struct.json_encode()
        expr = pl.when(pl.col(nccl_keys[0]).is_not_null()).then(full).otherwise(plain)
    else:
        expr = plain
    return frame.select(expr).to_series().to_arrow()


class EventColumns:
    """Turns decoded events into :class:`Part` objects, kind by kind."""

    def __init__(self, events: list[Any], rank: int, include_python: bool,
                 raw_ts: Callable[[], list[bytes | None]]) -> None:  # fmt: skip
        self.rank = rank
        self.include_python = include_python
        self.warnings: list[str] = []
        self.ph = pl.Series([e.ph for e in events], dtype=pl.String, strict=False)
        self.cat = pl.Series([e.cat for e in events], dtype=pl.String, strict=False)
        self.ts, self.ts_ok = to_ns([e.ts for e in events], raw=raw_ts)
        self.dur_values = np.array([e.dur for e in events], dtype=object)
        self.names = np.array([e.name for e in events], dtype=object)
        self.pids = np.array([e.pid for e in events], dtype=object)
        self.tids = np.array([e.tid for e in events], dtype=object)
        self.args = np.array([e.args for e in events], dtype=object)

    def _groups(self) -> dict[str, np.ndarray]:
        known = list(CATEGORIES)
        key = pl.select(
            pl.when(self.ph == "X")
            .then(pl.when(self.cat.is_in(known)).then(self.cat).otherwise(pl.lit("?")))
            .when(self.ph.is_in(INSTANT_PHASES))
            .then(pl.lit("instant"))
            .otherwise(pl.lit("skip"))
        ).to_series()
        groups = {}
        for value in key.unique().to_list():
            groups[value] = np.nonzero((key == value).to_numpy())[0]
        return groups

    def parts(self, pool: NamePool) -> list[Part]:
        """One part per category group, in a stable order."""
        groups = self._groups()
        if "?" in groups:
            counts = self.cat.gather(groups["?"]).fill_null("<none>").value_counts(sort=True)
            listing = ", ".join(f"{c} ({n})" for c, n in counts.rows())
            self.warnings.append(f"unknown categories read as host ranges: {listing}")
        parts = []
        for key in sorted(groups):
            if key == "skip" or (key == "python_function" and not self.include_python):
                continue
            if key == "instant":
                kind, engine, on_device = "marker", None, False
            else:
                kind, engine, on_device = CATEGORIES.get(key, ("range", None, False))
            part = self._part(groups[key], kind, engine, on_device, pool)
            if part is not None:
                parts.append(part)
        return parts

    def _part(self, idx: np.ndarray, kind: str, engine: str | None, on_device: bool,
              pool: NamePool) -> Part | None:  # fmt: skip
        ok = self.ts_ok[idx]
        if not ok.all():
            self.warnings.append(f"{int((~ok).sum())} {kind} events without a usable ts; dropped")
            idx = idx[ok]
        if not len(idx):
            return None
        if kind == "marker":
            dur = np.zeros(len(idx), dtype=np.int64)
        else:
            dur, dur_ok = to_ns(list(self.dur_values[idx]))
            if missing := int((~dur_ok).sum()):
                self.warnings.append(f"{missing} {kind} events without dur; read as 0 ns")
            if negative := int((dur_ok & (dur < 0)).sum()):
                self.warnings.append(f"{negative} {kind} events with negative dur; read as 0 ns")
            dur = np.where(dur_ok & (dur > 0), dur, 0)
        args = self.args[idx]
        rank = _ints(_field(args, "rank")).fill_null(self.rank)
        columns: dict[str, Any] = {"rank": rank, "corr": _ints(_field(args, "correlation"))}
        if on_device:
            columns["device"] = _coalesce(_ints(_field(args, "device")), list(self.pids[idx]))
            stream = _coalesce(_ints(_field(args, "stream")), list(self.tids[idx]))
            columns["stream"] = _without_sentinels(stream)
        else:
            columns["device"] = -1
            columns["pid"] = _ints(list(self.pids[idx]))
            columns["tid"] = _ints(list(self.tids[idx]))
        if kind in _ARGS_BY_KIND:
            columns["args"] = _args_json(args, *_ARGS_BY_KIND[kind])
        names = [n if isinstance(n, str) else None for n in self.names[idx]]
        name = pool.from_strings(pa.array(names, pa.string()))
        return Part(kind, pa.array(self.ts[idx]), pa.array(dur), name, engine, columns)
