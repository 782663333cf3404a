"""msgspec decode of msprof / torch_npu timeline JSON, and the column helpers of the layers."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from tracekit.errors import TraceError
from tracekit.parsers.convert import field_values, ints, take
from tracekit.parsers.msprof.times import json_us_ns

F = msgspec.field


class Args(msgspec.Struct, gc=False):
    """The ``args`` keys kept from every layer (values typed loosely: producers vary)."""

    task_type: Any = F(name="Task Type", default=None)
    physic_stream: Any = F(name="Physic Stream Id", default=None)
    stream_id: Any = F(name="Stream Id", default=None)
    task_id: Any = F(name="Task Id", default=None)
    subtask_id: Any = F(name="Subtask Id", default=None)
    model_id: Any = F(name="Model Id", default=None)
    connection_id: Any = None
    hccl_model_id: Any = F(name="model id", default=None)
    data_type: Any = None
    alg_type: Any = None
    count: Any = None
    relay: Any = None
    retry: Any = None
    notify_id: Any = None
    plane_stream: Any = F(name="stream id", default=None)
    plane_task: Any = F(name="task id", default=None)
    context_id: Any = F(name="context id", default=None)
    hccl_task_type: Any = F(name="task type", default=None)
    src_rank: Any = F(name="src rank", default=None)
    dst_rank: Any = F(name="dst rank", default=None)
    transport: Any = F(name="transport type", default=None)
    size: Any = F(name="size(Byte)", default=None)
    plane_data_type: Any = F(name="data type", default=None)
    link_type: Any = F(name="link type", default=None)
    bandwidth: Any = F(name="bandwidth(GB/s)", default=None)
    mode: Any = F(name="Mode", default=None)
    level: Any = None
    seq: Any = F(name="Sequence number", default=None)
    correlation_id: Any = None
    iteration_id: Any = F(name="Iteration ID", default=None)
    name: Any = None
    labels: Any = None
    sort_index: Any = None


class Event(msgspec.Struct, gc=False):
    """One event, every kept field typed loosely (a tagged union by ``ph`` decodes slower: torch_npu
    writes ``ph`` last, so msgspec would scan each object twice)."""

    ph: Any = None
    name: Any = None
    pid: Any = None
    tid: Any = None
    ts: Any = None
    dur: Any = None
    cat: Any = None
    id: Any = None
    args: Args | None = None


_EMPTY = Args()


class _Wrapped(msgspec.Struct, gc=False):
    traceEvents: list[Event] | None = None


_LIST = msgspec.json.Decoder(list[Event])
_OBJECT = msgspec.json.Decoder(_Wrapped)


def decode_bytes(path: Path, data: bytes | bytearray | memoryview) -> list[Event]:
    """The events of a trace file's text (bare array or ``traceEvents`` object)."""
    head = bytes(data[:4096]).lstrip(b"\xef\xbb\xbf \t\r\n")
    try:
        if head[:1] == b"[":
            return _LIST.decode(data)
        if head[:1] == b"{":
            return _OBJECT.decode(data).traceEvents or []
    except msgspec.ValidationError as exc:
        raise TraceError(
            f"{path}: not an msprof timeline ({exc}); pass the JSON as written"
        ) from exc
    except (msgspec.DecodeError, UnicodeDecodeError) as exc:
        raise TraceError(
            f"{path}: not valid JSON ({str(exc)[:120]}); the file may be truncated, export again"
        ) from exc
    raise TraceError(f"{path}: not a JSON trace (does not start with '[' or '{{')")


@dataclass
class Codes:
    """Per-event values as codes into their distinct values; ``exact`` when Arrow encoded them
    (integers or text only: equal values are then identical, not only equal in Python)."""

    codes: np.ndarray
    values: list[Any]
    exact: bool


def distinct(values: list[Any]) -> Codes:
    """The values as :class:`Codes`: integers and text are encoded by Arrow, other values (mixed
    types, floats, booleans) by a dict, keeping Python's equality."""
    try:
        array = pa.array(values)
        if array.type == pa.null():
            return Codes(np.zeros(len(values), np.int64), [None] if len(values) else [], True)
        if array.type in (pa.int64(), pa.string()):
            encoded = pc.dictionary_encode(array)
            uniques = encoded.dictionary.to_pylist()
            codes = encoded.indices.fill_null(len(uniques)).to_numpy(zero_copy_only=False)
            uniques = [*uniques, None] if array.null_count else uniques
            return Codes(codes.astype(np.int64), uniques, True)
    except (pa.ArrowException, OverflowError, TypeError, ValueError):
        pass
    index: dict[Any, int] = {}
    codes = np.fromiter((index.setdefault(v, len(index)) for v in values), np.int64, len(values))
    return Codes(codes, list(index), False)


class Reader:
    """Column extraction for subsets (positions) of one slice's events, with the columns every
    layer shares read once: ``ph``, ``cat``, the pid codes and, when first asked, the tids."""

    def __init__(
        self, events: list[Any], threads: dict, ph: pa.Array, cat: pa.Array, pids: Codes
    ) -> None:
        self.events = events
        self.threads = threads
        self.ph, self.cat, self.pids = ph, cat, pids
        self._tids: Codes | None = None
        self.bad_ts: dict[str, int] = {}

    @property
    def tids(self) -> Codes:
        if self._tids is None:
            self._tids = distinct(field_values("tid")(self.events))
        return self._tids

    def pick(self, idx: np.ndarray) -> list[Any]:
        return take(self.events, idx)

    @staticmethod
    def args(events: list[Any]) -> list[Args]:
        return [e.args or _EMPTY for e in events]

    def ids(self, key: str, idx: np.ndarray) -> pa.Array:
        """``pid`` or ``tid`` of the events at ``idx`` as integers (null when not one)."""
        column = self.pids if key == "pid" else self.tids
        if column.exact:
            return ints(column.values).take(column.codes[idx])
        return ints(field_values(key)(self.pick(idx)))

    def base(self, events: list[Any], site: str) -> dict[str, Any]:
        """ts/dur (epoch or monotonic ns, as written) of X events, and the rows with a usable
        ts (the others are counted in a warning)."""
        ts, ok = json_us_ns(field_values("ts")(events))
        dur, dur_ok = json_us_ns(field_values("dur")(events))
        dur = np.where(dur_ok & (dur > 0), dur, 0)
        bad = int((~ok).sum())
        if bad:
            self.bad_ts[site] = self.bad_ts.get(site, 0) + bad
        return {"ts": ts, "dur": dur, "keep": ok}

    def per_thread(self, idx: np.ndarray, fn: Callable[[Any, Any, str | None], Any]) -> Any:
        """``fn(pid, tid, thread name)`` per event at ``idx``, computed once per distinct
        thread."""
        pids, tids = self.pids, self.tids
        width = max(len(tids.values), 1)
        pairs, inverse = np.unique(pids.codes[idx] * width + tids.codes[idx], return_inverse=True)
        found = [(pids.values[k // width], tids.values[k % width]) for k in pairs.tolist()]
        values = np.empty(len(found), dtype=object)
        values[:] = [fn(p, t, self.threads.get((p, t))) for p, t in found]
        return values[inverse.reshape(-1)]


def frame(columns: dict[str, Any], keep: np.ndarray) -> pl.DataFrame:
    """A frame of ``columns``, only the rows where ``keep``."""
    frame = pl.DataFrame(columns)
    return frame if keep.all() else frame.filter(pl.Series(keep))


def mask(found: pa.Array) -> np.ndarray:
    """A boolean Arrow array as numpy, null read as False."""
    return found.fill_null(False).to_numpy(zero_copy_only=False)


def where(found: pa.Array) -> np.ndarray:
    """Positions where a boolean Arrow array is true."""
    return np.nonzero(mask(found))[0]
