"""msprof / torch_npu Chrome-trace JSON (``msprof_*.json``, ``trace_view.json``,
``device_N/timeline/*.json``) decoded with msgspec into per-layer polars frames.

The file is a bare JSON array (an object with ``traceEvents`` also reads). Processes are named
by ``process_name`` metadata: ``Python``, ``CANN``, ``Ascend Hardware``, ``HCCL`` (or
``Communication``), ``Overlap Analysis``, ``Step Trace`` and counter processes (``HBM``,
``AI Core Freq`` …, skipped). A process without ``process_name`` (torch_npu Level0 writes the
CANN process with thread names and flow starts only) is read as CANN when its threads are named
``Thread <tid>`` or it starts ``HostToDevice`` flows, with a warning. Overlap Analysis threads are
matched by their name, never by tid (msprof changed the tid order in 2026).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from operator import attrgetter
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from tracekit.errors import TraceError
from tracekit.parsers.kineto.decode import read_bytes
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


class Event(msgspec.Struct, gc=False):
    ph: Any = None
    name: Any = None
    pid: Any = None
    tid: Any = None
    ts: Any = None
    dur: Any = None
    cat: Any = None
    id: Any = None
    args: Args | None = None


class _Wrapped(msgspec.Struct, gc=False):
    traceEvents: list[Event] | None = None


_LIST = msgspec.json.Decoder(list[Event])
_OBJECT = msgspec.json.Decoder(_Wrapped)
_EMPTY = Args()

HARDWARE, HCCL, CANN, PYTHON, OVERLAP, STEP = "hw", "hccl", "cann", "python", "overlap", "step"
ROLES = {
    "Ascend Hardware": HARDWARE,
    "HCCL": HCCL,
    "Communication": HCCL,
    "CANN": CANN,
    "Python": PYTHON,
    "Overlap Analysis": OVERLAP,
    "Step Trace": STEP,
}
_DEVICE_LABEL = re.compile(r"^NPU\s*(\d+)$")
_CANN_THREAD = re.compile(r"^Thread \d+$")
_STREAM_THREAD = re.compile(r"^Stream (\d+)$")
COMM_THREAD = re.compile(r"Communication|Aicpu", re.IGNORECASE)
PLANE_THREAD = re.compile(r"^Plane (\d+)$")


@dataclass
class Layers:
    """The rows of one trace file, per layer, with their metadata."""

    hardware: pl.DataFrame | None = None
    hccl_ops: pl.DataFrame | None = None
    hccl_tasks: pl.DataFrame | None = None
    host: list[pl.DataFrame] = field(default_factory=list)
    steps: pl.DataFrame | None = None
    flows: pl.DataFrame | None = None
    overlap_ns: dict[str, int] = field(default_factory=dict)
    device: int | None = None
    stream_keys: list[str] = field(default_factory=list)
    processes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def decode(path: Path) -> list[Event]:
    """The events of a trace file (plain or gzip; bare array or ``traceEvents`` object)."""
    data = read_bytes(path)
    head = data[:4096].lstrip(b"\xef\xbb\xbf \t\r\n")
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


def _ints(values: list[Any]) -> pa.Array:
    try:
        return pa.array(values, pa.int64())
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        return pa.array([_as_int(v) for v in values], pa.int64())


def _as_int(value: Any) -> int | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return value if -(2**63) <= value < 2**63 else None
    if isinstance(value, float):
        return int(value) if value.is_integer() else None
    try:
        return int(str(value).strip())
    except ValueError:
        return None


def _floats(values: list[Any]) -> pa.Array:
    try:
        return pa.array(values, pa.float64())
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        out = []
        for v in values:
            try:
                out.append(None if v is None else float(v))
            except (TypeError, ValueError):
                out.append(None)
        return pa.array(out, pa.float64())


def _texts(values: list[Any]) -> pa.Array:
    try:
        return pa.array(values, pa.string())
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return pa.array([None if v is None else str(v) for v in values], pa.string())


class _Reader:
    """Column extraction for subsets of the decoded events."""

    def __init__(self, events: list[Event]) -> None:
        self.events = events
        self.warnings: list[str] = []

    def pick(self, idx: np.ndarray) -> list[Event]:
        events = self.events
        return [events[i] for i in idx]

    @staticmethod
    def args(events: list[Event]) -> list[Args]:
        return [e.args or _EMPTY for e in events]

    def base(self, events: list[Event], label: str) -> dict[str, Any] | None:
        """ts/dur (epoch or monotonic ns, as written) and name of X events; drops rows without
        a usable ts (counted in a warning)."""
        ts, ok = json_us_ns([e.ts for e in events])
        dur, dur_ok = json_us_ns([e.dur for e in events])
        dur = np.where(dur_ok & (dur > 0), dur, 0)
        bad = int((~ok).sum())
        if bad:
            self.warnings.append(f"{bad} {label} events without a usable ts; dropped")
        return {"ts": ts, "dur": dur, "keep": ok}


def _frame(columns: dict[str, Any], keep: np.ndarray) -> pl.DataFrame:
    frame = pl.DataFrame({k: v for k, v in columns.items()})
    return frame if keep.all() else frame.filter(pl.Series(keep))


def _meta(events: list[Event], ph: np.ndarray) -> tuple[dict, dict, dict]:
    """process names, process labels and thread names from the ``M`` events."""
    procs: dict[Any, str] = {}
    labels: dict[Any, str] = {}
    threads: dict[tuple[Any, Any], str] = {}
    for i in np.nonzero(ph == "M")[0]:
        e = events[i]
        value = e.args.name if e.args is not None else None
        if e.name == "process_name" and value is not None:
            procs[e.pid] = str(value)
        elif e.name == "thread_name" and value is not None:
            threads[(e.pid, e.tid)] = str(value)
        elif e.name == "process_labels" and e.args is not None and e.args.labels is not None:
            labels[e.pid] = str(e.args.labels)
    return procs, labels, threads


def _roles(
    procs: dict, threads: dict, flow_pids: set, pids: set, warnings: list[str]
) -> dict[Any, str]:
    roles = {pid: ROLES[name] for pid, name in procs.items() if name in ROLES}
    for pid in sorted(pids - set(procs), key=str):
        names = [n for (p, _), n in threads.items() if p == pid]
        if pid in flow_pids or (names and all(_CANN_THREAD.match(n) for n in names)):
            roles[pid] = CANN
            warnings.append(
                f"process {pid} has no process_name event; read as CANN (its threads are named"
                " 'Thread <tid>' / it starts HostToDevice flows)"
            )
        else:
            warnings.append(f"process {pid} has no process_name event; its events are skipped")
    return roles


def read_layers(path: Path, include_python: bool = False) -> Layers:
    """Decode one timeline file into :class:`Layers` (times as written: epoch or monotonic)."""
    events = decode(path)
    out = Layers()
    if not events:
        return out
    ph = np.array([e.ph for e in events], dtype=object)
    procs, labels, threads = _meta(events, ph)
    pid_list = [e.pid for e in events]
    is_flow_start = ph == "s"
    flow_pids = {
        events[i].pid for i in np.nonzero(is_flow_start)[0] if events[i].cat == "HostToDevice"
    }
    roles = _roles(procs, threads, flow_pids, set(pid_list), out.warnings)
    out.processes = sorted(set(procs.values()))
    for pid, label in labels.items():
        match = _DEVICE_LABEL.match(label.strip())
        if match and roles.get(pid) in (HARDWARE, HCCL):
            out.device = int(match.group(1))
    role = np.array([roles.get(p) for p in pid_list], dtype=object)
    reader = _Reader(events)
    complete = ph == "X"
    for name, fn in (
        (HARDWARE, _hardware),
        (HCCL, _hccl),
        (CANN, _cann),
        (PYTHON, _python),
        (OVERLAP, _overlap),
        (STEP, _steps),
    ):
        idx = np.nonzero(complete & (role == name))[0]
        if len(idx):
            fn(reader, idx, out, threads, include_python)
    flows = np.nonzero((ph == "s") | (ph == "f"))[0]
    if len(flows):
        _flows(reader, flows, out)
    out.warnings.extend(reader.warnings)
    return out


def _hardware(reader: _Reader, idx: np.ndarray, out: Layers, threads: dict, _: bool) -> None:
    events = reader.pick(idx)
    names = [threads.get((e.pid, e.tid), "") for e in events]
    step_rows = np.array([n.startswith("Step Trace") for n in names], dtype=bool)
    if step_rows.any():
        _step_frame(reader, [e for e, s in zip(events, step_rows) if s], out)
        events = [e for e, s in zip(events, step_rows) if not s]
    if not events:
        return
    base = reader.base(events, "Ascend Hardware")
    args = reader.args(events)
    get = lambda key: list(map(attrgetter(key), args))  # noqa: E731
    stream = pc.coalesce(
        _ints(get("physic_stream")), _ints(get("stream_id")), _ints([e.tid for e in events])
    )
    columns = {
        "ts": base["ts"],
        "dur": base["dur"],
        "name": _texts([e.name for e in events]),
        "task_type": _texts(get("task_type")),
        "stream": stream,
        "task_id": _ints(get("task_id")),
        "subtask_id": _ints(get("subtask_id")),
        "model_id": _ints(get("model_id")),
        "corr": _ints(get("connection_id")),
    }
    if any(a.physic_stream is not None for a in args):
        out.stream_keys.append("Physic Stream Id")
    if any(a.stream_id is not None for a in args):
        out.stream_keys.append("Stream Id")
    out.hardware = _frame(columns, base["keep"])


def _group_of(threads: dict, pid: Any) -> list[tuple[int, str]]:
    groups = []
    for (p, tid), name in threads.items():
        if p == pid and COMM_THREAD.search(name) and not PLANE_THREAD.match(name):
            tid_int = _as_int(tid)
            if tid_int is not None:
                groups.append((tid_int, name.strip()))
    return sorted(groups)


def _hccl(reader: _Reader, idx: np.ndarray, out: Layers, threads: dict, _: bool) -> None:
    events = reader.pick(idx)
    thread = [threads.get((e.pid, e.tid), "").strip() for e in events]
    plane = np.array([bool(PLANE_THREAD.match(n)) for n in thread], dtype=bool)
    groups = {pid: _group_of(threads, pid) for pid in {e.pid for e in events}}

    def owner(e: Event, name: str) -> str | None:
        if name and not PLANE_THREAD.match(name):
            return name
        tid = _as_int(e.tid)
        known = groups.get(e.pid, [])
        found = [n for t, n in known if tid is not None and t < tid]
        if not found and len(known) == 1:  # older msprof: one group thread, after the planes
            return known[0][1]
        return found[-1] if found else None

    group = [owner(e, n) for e, n in zip(events, thread)]
    ops = [e for e, p in zip(events, plane) if not p]
    op_group = [g for g, p in zip(group, plane) if not p]
    if ops:
        base = reader.base(ops, "HCCL")
        args = reader.args(ops)
        get = lambda key: list(map(attrgetter(key), args))  # noqa: E731
        columns = {
            "ts": base["ts"],
            "dur": base["dur"],
            "name": _texts([e.name for e in ops]),
            "thread": _texts(op_group),
            "corr": _ints(get("connection_id")),
            "model_id": _ints(get("hccl_model_id")),
            "data_type": _texts(get("data_type")),
            "alg_type": _texts(get("alg_type")),
            "count": _ints(get("count")),
            "relay": _ints(get("relay")),
            "retry": _ints(get("retry")),
        }
        out.hccl_ops = _frame(columns, base["keep"])
    tasks = [e for e, p in zip(events, plane) if p]
    if tasks:
        base = reader.base(tasks, "HCCL task")
        args = reader.args(tasks)
        get = lambda key: list(map(attrgetter(key), args))  # noqa: E731
        columns = {
            "ts": base["ts"],
            "dur": base["dur"],
            "name": _texts([e.name for e in tasks]),
            "thread": _texts([g for g, p in zip(group, plane) if p]),
            "plane": _ints(
                [int(PLANE_THREAD.match(n).group(1)) for n, p in zip(thread, plane) if p]
            ),
            "stream": _ints(get("plane_stream")),
            "task_id": _ints(get("plane_task")),
            "context_id": _ints(get("context_id")),
            "task_type": _texts(get("hccl_task_type")),
            "notify_id": _texts(get("notify_id")),
            "src_rank": _ints(get("src_rank")),
            "dst_rank": _ints(get("dst_rank")),
            "transport": _texts(get("transport")),
            "size": _ints(get("size")),
            "data_type": _texts(get("plane_data_type")),
            "link_type": _texts(get("link_type")),
            "bandwidth": _floats(get("bandwidth")),
            "model_id": _ints(get("hccl_model_id")),
        }
        out.hccl_tasks = _frame(columns, base["keep"])


def _host_frame(
    reader: _Reader,
    events: list[Event],
    kind: str,
    label: str,
    extra: Callable[[list[Args]], dict[str, Any]],
) -> pl.DataFrame:
    base = reader.base(events, label)
    columns = {
        "ts": base["ts"],
        "dur": base["dur"],
        "kind": pa.array([kind] * len(events)),
        "name": _texts([e.name for e in events]),
        "pid": _ints([e.pid for e in events]),
        "tid": _ints([e.tid for e in events]),
        **extra(reader.args(events)),
    }
    return _frame(columns, base["keep"])


def _cann(reader: _Reader, idx: np.ndarray, out: Layers, threads: dict, _: bool) -> None:
    events = reader.pick(idx)

    def extra(args: list[Args]) -> dict[str, Any]:
        return {
            "corr": _ints([a.connection_id for a in args]),
            "level": _texts([a.level for a in args]),
            "mode": _texts([a.mode for a in args]),
        }

    out.host.append(_host_frame(reader, events, "api", "CANN", extra))


def _python(reader: _Reader, idx: np.ndarray, out: Layers, threads: dict, python: bool) -> None:
    events = reader.pick(idx)
    cats = np.array([e.cat for e in events], dtype=object)
    groups = {
        "op": cats == "cpu_op",
        "api": (cats == "enqueue") | (cats == "dequeue"),
        "python": cats == "python_function",
    }
    groups["range"] = ~(groups["op"] | groups["api"] | groups["python"])
    for kind, mask in groups.items():
        if not mask.any() or (kind == "python" and not python):
            continue
        subset = [e for e, m in zip(events, mask) if m]

        def extra(args: list[Args], kind: str = kind) -> dict[str, Any]:
            if kind == "api":
                return {"queue_corr": _ints([a.correlation_id for a in args])}
            return {"seq": _ints([a.seq for a in args])} if kind == "op" else {}

        out.host.append(
            _host_frame(reader, subset, "op" if kind == "python" else kind, "Python", extra)
        )


def _overlap(reader: _Reader, idx: np.ndarray, out: Layers, threads: dict, _: bool) -> None:
    events = reader.pick(idx)
    base = reader.base(events, "Overlap Analysis")
    names = [threads.get((e.pid, e.tid)) or str(e.name) for e in events]
    frame = _frame({"thread": _texts(names), "dur": base["dur"]}, base["keep"])
    totals = frame.group_by("thread").agg(pl.col("dur").sum())
    out.overlap_ns = {k: int(v) for k, v in totals.iter_rows()}


def _steps(reader: _Reader, idx: np.ndarray, out: Layers, threads: dict, _: bool) -> None:
    _step_frame(reader, reader.pick(idx), out)


def _step_frame(reader: _Reader, events: list[Event], out: Layers) -> None:
    base = reader.base(events, "Step Trace")
    args = reader.args(events)
    columns = {
        "ts": base["ts"],
        "dur": base["dur"],
        "name": _texts([e.name for e in events]),
        "cat": _texts([e.cat for e in events]),
        "iteration": _ints([a.iteration_id for a in args]),
    }
    frame = _frame(columns, base["keep"])
    out.steps = frame if out.steps is None else pl.concat([out.steps, frame])


def _flows(reader: _Reader, idx: np.ndarray, out: Layers) -> None:
    events = [e for e in reader.pick(idx) if e.cat == "async_npu"]
    if not events:
        return
    ts, ok = json_us_ns([e.ts for e in events])
    frame = pl.DataFrame(
        {
            "ph": _texts([e.ph for e in events]),
            "id": _texts([e.id for e in events]),
            "pid": _ints([e.pid for e in events]),
            "tid": _ints([e.tid for e in events]),
            "ts": ts,
        }
    )
    out.flows = frame.filter(pl.Series(ok))
