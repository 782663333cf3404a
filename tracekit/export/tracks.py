"""Track layout of a written trace: which Perfetto track each timeline row goes to.

Device rows get one track per (rank, device, stream) under a "rank R · GPU D" group;
host rows get the process/thread tracks of their pid/tid (Perfetto groups threads under
their process), or named tracks when the pid is unknown or shared by several ranks.
Lanes of rows that do not nest become child tracks "… · overlap N".
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

from tracekit.pftrace.schema import track_description

Key = tuple[Any, ...]  # (rank, device, stream, pid, tid)


@dataclass
class Layout:
    """Track descriptors in parent-first order and the uuid of every (track, lane)."""

    descriptors: list[pb.TrackDescriptor] = field(default_factory=list)
    uuids: dict[tuple[int, int], int] = field(default_factory=dict)
    _groups: dict[tuple[Any, ...], int] = field(default_factory=dict)
    _natural: set[tuple[Any, ...]] = field(default_factory=set)
    _names: Counter[tuple[Any, ...]] = field(default_factory=Counter)

    def add(self, name: str | None = None, parent: int | None = None, **fields: Any) -> int:
        uuid = len(self.descriptors) + 1
        desc = pb.TrackDescriptor(uuid=uuid, **fields)
        if name is not None:
            desc.name = name
        if parent is not None:
            desc.parent_uuid = parent
        self.descriptors.append(desc)
        return uuid

    def group(self, key: tuple[Any, ...], make: Any) -> int:
        if key not in self._groups:
            self._groups[key] = make()
        return self._groups[key]


def device_label(meta: dict[str, Any]) -> str:
    """NPU for Ascend (Huawei) traces, GPU otherwise."""
    vendors = " ".join(
        str(d.get("vendor", "")) for d in meta.get("devices") or [] if isinstance(d, dict)
    )
    return "NPU" if any(v in vendors.lower() for v in ("huawei", "ascend")) else "GPU"


def _device_names(meta: dict[str, Any]) -> dict[Any, str]:
    return {
        d.get("index"): str(d["name"])
        for d in meta.get("devices") or []
        if isinstance(d, dict) and d.get("name")
    }


def layout(keys: list[Key], lanes: list[int], meta: dict[str, Any]) -> Layout:
    """Descriptors for tracks ``keys`` (row fields) with ``lanes[i]`` lanes each."""
    out = Layout()
    label = device_label(meta)
    names = _device_names(meta)
    pid_ranks: dict[Any, set[Any]] = {}
    for rank, device, _stream, pid, _tid in keys:
        if not _is_device(device) and pid is not None:
            pid_ranks.setdefault(pid, set()).add(rank)
    device_bases = Counter(_device_base(k, label) for k in keys if _is_device(k[1]))
    for index, key in enumerate(keys):
        if _is_device(key[1]):
            uuid, name = _device_track(out, key, label, names, device_bases)
        else:
            uuid, name = _host_track(out, key, len(pid_ranks.get(key[3], ())) > 1)
        description = track_description(key)
        out.descriptors[uuid - 1].description = description
        out.uuids[(index, 0)] = uuid
        for lane in range(1, lanes[index]):
            lane_name = f"{name} · overlap {lane}"
            out.uuids[(index, lane)] = out.add(lane_name, uuid, description=description)
    return out


def _is_device(device: Any) -> bool:
    return device is not None and device >= 0


def _device_base(key: Key, label: str) -> str:
    rank, device, stream, _pid, _tid = key
    base = f"rank {rank} · {label} {device}"
    return base if stream is None else f"{base} · stream {stream}"


def _device_track(
    out: Layout, key: Key, label: str, names: dict[Any, str], bases: Counter[str]
) -> tuple[int, str]:
    rank, device, _stream, pid, _tid = key
    group_name = f"rank {rank} · {label} {device}"
    if device in names:
        group_name += f" ({names[device]})"
    parent = out.group(("device", rank, device), lambda: out.add(group_name))
    name = _device_base(key, label)
    if bases[name] > 1 and pid is not None:
        name += f" · pid {pid}"
    return _unique(out, ("device", name), name, parent)


def _host_track(out: Layout, key: Key, shared_pid: bool) -> tuple[int, str]:
    rank, _device, stream, pid, tid = key
    suffix = "" if stream is None else f" · stream {stream}"
    if pid is None:
        name = f"rank {rank} · " + ("host" if tid is None else f"tid {tid}") + suffix
        return _unique(out, ("host", name), name, None)
    if shared_pid:  # the same pid in several ranks: Perfetto would merge their processes
        proc_name = f"rank {rank} · pid {pid}"
        proc = out.group(("process", rank, pid), lambda: out.add(proc_name))
    else:
        proc_name = f"rank {rank} · process {pid}"
        desc = pb.ProcessDescriptor(pid=pid, process_name=f"rank {rank} · process")
        proc = out.group(("process", rank, pid), lambda: out.add(process=desc))
    if tid is None:
        if not suffix and ("process", rank, pid) not in out._natural:
            out._natural.add(("process", rank, pid))
            return proc, proc_name
        return _unique(out, ("host", proc_name + suffix), proc_name + suffix, proc)
    name = f"rank {rank} · pid {pid} · tid {tid}{suffix}"
    natural = ("thread", rank, pid, tid)
    if shared_pid or suffix or natural in out._natural:
        return _unique(out, ("host", name), name, proc)
    out._natural.add(natural)
    thread = pb.ThreadDescriptor(pid=pid, tid=tid, thread_name=f"rank {rank} · thread")
    return out.add(parent=proc, thread=thread), name


def _unique(out: Layout, key: tuple[Any, ...], name: str, parent: int | None) -> tuple[int, str]:
    """A named track; a second track of the same name gets a number."""
    count = out._names[key]
    out._names[key] += 1
    if count:
        name = f"{name} ({count + 1})"
    return out.add(name, parent), name
