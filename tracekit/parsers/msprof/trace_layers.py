"""The layers of a timeline file's complete events, as polars frames (one :class:`SliceLayers`
per slice of the file: the whole file, or one slice per process when it is read in parallel).

Every layer reads its fields one list at a time from the events of its processes; thread names
and HCCL group owners are looked up once per distinct (pid, tid).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from tracekit.engine_frames import STEP_FUNCTIONS
from tracekit.parsers.convert import as_int, field_values, floats, ints, take, texts
from tracekit.parsers.msprof.times import json_us_ns
from tracekit.parsers.msprof.trace_decode import Args, Reader, frame, mask, where

HARDWARE, HCCL, CANN, PYTHON, OVERLAP, STEP = "hw", "hccl", "cann", "python", "overlap", "step"
COMM_THREAD = re.compile(r"Communication|Aicpu", re.IGNORECASE)
PLANE_THREAD = re.compile(r"^Plane (\d+)$")
# where rows without a usable ts are counted, in the order their warnings are written
SITES = ("Step Trace#hw", "Ascend Hardware", "HCCL", "HCCL task", "CANN", "Python#op", "Python#api",
         "Python#python", "Python#range", "Overlap Analysis", "Step Trace")  # fmt: skip
HOST_KEYS = ("cann", "op", "api", "python", "range")


@dataclass
class SliceLayers:
    """The layer frames of one slice of the events (put together by :func:`.trace_json.finish`)."""

    hardware: pl.DataFrame | None = None
    hccl_ops: pl.DataFrame | None = None
    hccl_tasks: pl.DataFrame | None = None
    host: dict[str, pl.DataFrame] = field(default_factory=dict)
    hw_steps: pl.DataFrame | None = None
    steps: pl.DataFrame | None = None
    flows: pl.DataFrame | None = None
    overlap_ns: dict[str, int] | None = None
    stream_keys: list[str] = field(default_factory=list)
    bad_ts: dict[str, int] = field(default_factory=dict)


def build(reader: Reader, role: np.ndarray, include_python: bool) -> SliceLayers:
    """The layers of the reader's events (``role``: the layer number of each, -1 for none)."""
    out = SliceLayers()
    for number, fn in enumerate(LAYERS):
        idx = np.nonzero(role == number)[0]
        if len(idx):
            fn(reader, idx, out, include_python)
    _flows(reader, out)
    out.bad_ts = reader.bad_ts
    return out


def _field(items: list[Any], name: str) -> list[Any]:
    """The attribute ``name`` of every item."""
    return field_values(name)(items)


def _hardware(reader: Reader, idx: np.ndarray, out: SliceLayers, _: bool) -> None:
    step_rows = reader.per_thread(idx, lambda p, t, n: (n or "").startswith("Step Trace"))
    step_rows = step_rows.astype(bool)
    if step_rows.any():
        out.hw_steps = _step_frame(reader, idx[step_rows], "Step Trace#hw")
        idx = idx[~step_rows]
    if not len(idx):
        return
    events = reader.pick(idx)
    base = reader.base(events, "Ascend Hardware")
    args = reader.args(events)
    get = lambda key: _field(args, key)  # noqa: E731
    physic, stream_id = get("physic_stream"), get("stream_id")
    stream = pc.coalesce(ints(physic), ints(stream_id), reader.ids("tid", idx))
    columns = {
        "ts": base["ts"],
        "dur": base["dur"],
        "name": texts(_field(events, "name")),
        "task_type": texts(get("task_type")),
        "stream": stream,
        "task_id": ints(get("task_id")),
        "subtask_id": ints(get("subtask_id")),
        "model_id": ints(get("model_id")),
        "corr": ints(get("connection_id")),
        "pid": reader.ids("pid", idx),
    }
    if physic.count(None) < len(physic):
        out.stream_keys.append("Physic Stream Id")
    if stream_id.count(None) < len(stream_id):
        out.stream_keys.append("Stream Id")
    out.hardware = frame(columns, base["keep"])


def _group_of(threads: dict, pid: Any) -> list[tuple[int, str]]:
    groups = []
    for (p, tid), name in threads.items():
        if p == pid and COMM_THREAD.search(name) and not PLANE_THREAD.match(name):
            tid_int = as_int(tid)
            if tid_int is not None:
                groups.append((tid_int, name.strip()))
    return sorted(groups)


def _hccl(reader: Reader, idx: np.ndarray, out: SliceLayers, _: bool) -> None:
    groups: dict[Any, list[tuple[int, str]]] = {}

    def owner(pid: Any, tid: Any, name: str) -> str | None:
        if name and not PLANE_THREAD.match(name):
            return name
        if pid not in groups:
            groups[pid] = _group_of(reader.threads, pid)
        tid_int = as_int(tid)
        known = groups[pid]
        found = [n for t, n in known if tid_int is not None and t < tid_int]
        if not found and len(known) == 1:  # older msprof: one group thread, after the planes
            return known[0][1]
        return found[-1] if found else None

    def describe(pid: Any, tid: Any, name: str | None) -> tuple[int, str | None]:
        name = (name or "").strip()
        plane = PLANE_THREAD.match(name)
        return (int(plane.group(1)) if plane else -1), owner(pid, tid, name)

    described = reader.per_thread(idx, describe)
    events = reader.pick(idx)
    plane_no = np.array([d[0] for d in described], dtype=np.int64)
    group = np.array([d[1] for d in described], dtype=object)
    plane = plane_no >= 0
    ops_at, tasks_at = np.nonzero(~plane)[0], np.nonzero(plane)[0]
    if len(ops_at):
        columns, get, keep = _hccl_columns(reader, events, ops_at, group, "HCCL")
        columns |= {
            "pid": reader.ids("pid", idx[ops_at]),
            "corr": ints(get("connection_id")),
            "model_id": ints(get("hccl_model_id")),
            "data_type": texts(get("data_type")),
            "alg_type": texts(get("alg_type")),
            "count": ints(get("count")),
            "relay": ints(get("relay")),
            "retry": ints(get("retry")),
        }
        out.hccl_ops = frame(columns, keep)
    if len(tasks_at):
        columns, get, keep = _hccl_columns(reader, events, tasks_at, group, "HCCL task")
        columns |= {
            "pid": reader.ids("pid", idx[tasks_at]),
            "plane": pa.array(plane_no[tasks_at]),
            "stream": ints(get("plane_stream")),
            "task_id": ints(get("plane_task")),
            "context_id": ints(get("context_id")),
            "task_type": texts(get("hccl_task_type")),
            "notify_id": texts(get("notify_id")),
            "src_rank": ints(get("src_rank")),
            "dst_rank": ints(get("dst_rank")),
            "transport": texts(get("transport")),
            "size": ints(get("size")),
            "data_type": texts(get("plane_data_type")),
            "link_type": texts(get("link_type")),
            "bandwidth": floats(get("bandwidth")),
            "model_id": ints(get("hccl_model_id")),
        }
        out.hccl_tasks = frame(columns, keep)


def _hccl_columns(
    reader: Reader, events: list[Any], at: np.ndarray, group: np.ndarray, what: str
) -> tuple[dict[str, Any], Callable[[str], list[Any]], Any]:
    """The columns every HCCL row has (ts, dur, name, thread) for the events at ``at``, a
    getter of their args fields, and the mask of rows with a usable ts."""
    picked = take(events, at)
    base = reader.base(picked, what)
    args = reader.args(picked)
    columns = {
        "ts": base["ts"],
        "dur": base["dur"],
        "name": texts(_field(picked, "name")),
        "thread": texts(group[at]),
    }
    return columns, (lambda key: _field(args, key)), base["keep"]


def _host_frame(
    reader: Reader,
    idx: np.ndarray,
    kind: str,
    site: str,
    extra: Callable[[list[Args]], dict[str, Any]],
) -> pl.DataFrame:
    events = reader.pick(idx)
    base = reader.base(events, site)
    columns = {
        "ts": base["ts"],
        "dur": base["dur"],
        "kind": pa.repeat(kind, len(events)),
        "name": texts(_field(events, "name")),
        "pid": reader.ids("pid", idx),
        "tid": reader.ids("tid", idx),
        **extra(reader.args(events)),
    }
    return frame(columns, base["keep"])


def _cann(reader: Reader, idx: np.ndarray, out: SliceLayers, _: bool) -> None:
    def extra(args: list[Args]) -> dict[str, Any]:
        return {
            "corr": ints(_field(args, "connection_id")),
            "level": texts(_field(args, "level")),
            "mode": texts(_field(args, "mode")),
        }

    out.host["cann"] = _host_frame(reader, idx, "api", "CANN", extra)


def _step_functions(reader: Reader, idx: np.ndarray) -> np.ndarray:
    """Which Python frames at ``idx`` are a serving engine's step function."""
    names = pa.array(field_values("name")(reader.pick(idx)), pa.string())
    keep = pc.match_substring_regex(names, STEP_FUNCTIONS).fill_null(False)
    return keep.to_numpy(zero_copy_only=False)


def _python(reader: Reader, idx: np.ndarray, out: SliceLayers, python: bool) -> None:
    cats = reader.cat.take(idx)
    groups = {
        "op": mask(pc.equal(cats, "cpu_op")),
        "api": mask(pc.is_in(cats, pa.array(["enqueue", "dequeue"]))),
        "python": mask(pc.equal(cats, "python_function")),
    }
    groups["range"] = ~(groups["op"] | groups["api"] | groups["python"])
    for kind, found in groups.items():
        if not found.any():
            continue
        subset = idx[found]
        if kind == "python" and not python:  # only the engine's step function (a marker)
            subset = subset[_step_functions(reader, subset)]
            if not subset.size:
                continue

        def extra(args: list[Args], kind: str = kind) -> dict[str, Any]:
            if kind == "api":
                return {"queue_corr": ints(_field(args, "correlation_id"))}
            return {"seq": ints(_field(args, "seq"))} if kind == "op" else {}

        site = f"Python#{kind}"
        out.host[kind] = _host_frame(
            reader, subset, "op" if kind == "python" else kind, site, extra
        )


def _overlap(reader: Reader, idx: np.ndarray, out: SliceLayers, _: bool) -> None:
    base = reader.base(reader.pick(idx), "Overlap Analysis")
    names = reader.per_thread(idx, lambda p, t, n: n or None)
    unnamed = np.nonzero(names == None)[0]  # noqa: E711 - elementwise on an object array
    if len(unnamed):
        names[unnamed] = [str(e.name) for e in reader.pick(idx[unnamed])]
    durations = frame({"thread": texts(names), "dur": base["dur"]}, base["keep"])
    totals = durations.group_by("thread").agg(pl.col("dur").sum())
    out.overlap_ns = {k: int(v) for k, v in totals.iter_rows()}


def _steps(reader: Reader, idx: np.ndarray, out: SliceLayers, _: bool) -> None:
    out.steps = _step_frame(reader, idx, "Step Trace")


def _step_frame(reader: Reader, idx: np.ndarray, site: str) -> pl.DataFrame:
    events = reader.pick(idx)
    base = reader.base(events, site)
    args = reader.args(events)
    columns = {
        "ts": base["ts"],
        "dur": base["dur"],
        "name": texts(_field(events, "name")),
        "cat": reader.cat.take(idx),
        "iteration": ints(_field(args, "iteration_id")),
    }
    return frame(columns, base["keep"])


def _flows(reader: Reader, out: SliceLayers) -> None:
    flow = pc.is_in(reader.ph, pa.array(["s", "f"]))
    idx = where(pc.and_(flow, pc.equal(reader.cat, "async_npu")))
    if not len(idx):
        return
    events = reader.pick(idx)
    ts, ok = json_us_ns(_field(events, "ts"))
    frame = pl.DataFrame(
        {
            "ph": reader.ph.take(idx),
            "id": texts(_field(events, "id")),
            "pid": reader.ids("pid", idx),
            "tid": reader.ids("tid", idx),
            "ts": ts,
        }
    )
    out.flows = frame.filter(pl.Series(ok))


LAYERS = (_hardware, _hccl, _cann, _python, _overlap, _steps)
LAYER_ROLES = (HARDWARE, HCCL, CANN, PYTHON, OVERLAP, STEP)
