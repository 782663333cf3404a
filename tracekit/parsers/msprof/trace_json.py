"""msprof / torch_npu Chrome-trace JSON (``msprof_*.json``, ``trace_view.json``,
``device_N/timeline/*.json``): the events of a slice scanned (:func:`scan`), the role of every
process resolved from the metadata of all slices (:func:`resolve`), each slice's layers built
(:func:`layers_of`) and put together (:func:`finish`) into per-layer polars frames. A file is
read by :mod:`.trace_read`.

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
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from tracekit.parsers.convert import field_values, take, texts
from tracekit.parsers.msprof.device_index import process_devices, single, with_devices
from tracekit.parsers.msprof.trace_decode import Codes, Reader, distinct, mask, where
from tracekit.parsers.msprof.trace_layers import (
    CANN,
    HARDWARE,
    HCCL,
    HOST_KEYS,
    LAYER_ROLES,
    OVERLAP,
    PYTHON,
    SITES,
    STEP,
    SliceLayers,
    build,
)

DEVICE_ROLES = (HARDWARE, HCCL, OVERLAP, STEP)
ROLES = {
    "Ascend Hardware": HARDWARE,
    "HCCL": HCCL,
    "Communication": HCCL,
    "CANN": CANN,
    "Python": PYTHON,
    "Overlap Analysis": OVERLAP,
    "Step Trace": STEP,
}
_CANN_THREAD = re.compile(r"^Thread \d+$")


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
    pid_devices: dict[Any, int] = field(default_factory=dict)
    stream_keys: list[str] = field(default_factory=list)
    processes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


@dataclass
class Summary:
    """What the layers of one slice of events need to know of the others: the metadata events
    ``(name, pid, tid, args.name, args.labels, args.sort_index)``, every pid and the pids
    starting flows."""

    meta: list[tuple[Any, Any, Any, Any, Any, Any]]
    pids: list[Any]
    flow_pids: list[Any]


@dataclass
class Scan:
    """One slice of events with the columns every layer reads (see :class:`.Reader`) and its
    summary."""

    events: list[Any]
    summary: Summary
    ph: pa.Array
    cat: pa.Array
    pids: Codes


def scan(events: list[Any]) -> Scan:
    """Read the phase, category and pid of a slice's events; collect its metadata."""
    ph = texts(field_values("ph")(events))
    cat = texts(field_values("cat")(events))
    pids = distinct(field_values("pid")(events))
    meta = [
        (e.name, e.pid, e.tid, *_meta_args(e.args)) for e in take(events, where(pc.equal(ph, "M")))
    ]
    starts = where(pc.and_(pc.equal(ph, "s"), pc.equal(cat, "HostToDevice")))
    flow_pids = [pids.values[k] for k in np.unique(pids.codes[starts]).tolist()]
    return Scan(events, Summary(meta, pids.values, flow_pids), ph, cat, pids)


def _meta_args(args: Any) -> tuple[Any, Any, Any]:
    return (args.name, args.labels, args.sort_index) if args else (None, None, None)


def layers_of(
    part: Scan, roles: dict[Any, str], threads: dict, include_python: bool
) -> SliceLayers:
    """The layer frames of one scanned slice, given the roles of the whole file's processes."""
    order = list(LAYER_ROLES)
    pids = part.summary.pids
    by_pid = np.array([order.index(roles[p]) if p in roles else -1 for p in pids], np.int64)
    role = np.where(mask(pc.equal(part.ph, "X")), by_pid[part.pids.codes], -1)
    reader = Reader(part.events, threads, part.ph, part.cat, part.pids)
    return build(reader, role, include_python)


def resolve(summaries: list[Summary]) -> tuple[Layers, dict[Any, str], dict]:
    """The file's metadata from the summaries of its slices (in file order): a :class:`Layers`
    holding it, the role of each pid and the thread names."""
    out = Layers()
    procs: dict[Any, str] = {}
    labels: dict[Any, str] = {}
    sort_index: dict[Any, Any] = {}
    threads: dict[tuple[Any, Any], str] = {}
    for name, pid, tid, value, label, index in (m for s in summaries for m in s.meta):
        if name == "process_name" and value is not None:
            procs[pid] = str(value)
        elif name == "thread_name" and value is not None:
            threads[(pid, tid)] = str(value)
        elif name == "process_labels" and label is not None:
            labels[pid] = str(label)
        elif name == "process_sort_index" and index is not None:
            sort_index[pid] = index
    pids = {p for s in summaries for p in s.pids}
    flow_pids = {p for s in summaries for p in s.flow_pids}
    roles = _roles(procs, threads, flow_pids, pids, out.warnings)
    out.processes = sorted(set(procs.values()))
    devices = process_devices(labels, sort_index, [p for p in roles if roles[p] in DEVICE_ROLES])
    out.pid_devices = devices
    out.device = single(devices.values())
    return out, roles, threads


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


def _concat(frames: list[pl.DataFrame | None]) -> pl.DataFrame | None:
    present = [f for f in frames if f is not None]
    if len(present) < 2:
        return present[0] if present else None
    return pl.concat(present, how="vertical_relaxed")


def finish(out: Layers, parts: list[SliceLayers]) -> Layers:
    """``out`` with the layer frames of ``parts`` (slices in file order) put together."""
    devices = out.pid_devices
    out.hardware = with_devices(_concat([p.hardware for p in parts]), devices)
    out.hccl_ops = with_devices(_concat([p.hccl_ops for p in parts]), devices)
    out.hccl_tasks = with_devices(_concat([p.hccl_tasks for p in parts]), devices)
    out.host = [_concat([p.host.get(k) for p in parts]) for k in HOST_KEYS]  # type: ignore[misc]
    out.host = [f for f in out.host if f is not None]
    out.steps = _concat([p.hw_steps for p in parts] + [p.steps for p in parts])
    out.flows = _concat([p.flows for p in parts])
    for part in parts:
        for key, value in (part.overlap_ns or {}).items():
            out.overlap_ns[key] = out.overlap_ns.get(key, 0) + value
        out.stream_keys += [k for k in part.stream_keys if k not in out.stream_keys]
    out.stream_keys.sort(key=["Physic Stream Id", "Stream Id"].index)
    for site in SITES:
        bad = sum(p.bad_ts.get(site, 0) for p in parts)
        if bad:
            label = site.split("#")[0]
            out.warnings.append(f"{bad} {label} events without a usable ts; dropped")
    return out
