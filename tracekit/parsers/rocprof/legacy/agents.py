"""HSA agents of a legacy rocprof run, as rocminfo describes them (``results.sysinfo.txt``,
or the JSON's ``otherData``): they map HSA node ids to GPU indices and fill
``meta["devices"]``."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from tracekit.parsers.rocprof.meta import device


@dataclass
class Agent:
    """One HSA agent as rocminfo describes it."""

    number: int
    values: dict[str, str]

    def get(self, *keys: str) -> str | None:
        for key in keys:
            if self.values.get(key):
                return self.values[key]
        return None


def agents_from_rocminfo(text: str) -> list[Agent]:
    """Agents of a ``rocminfo`` text (``results.sysinfo.txt``); keys lose their spaces."""
    agents: list[Agent] = []
    current: dict[str, str] | None = None
    segment = ""
    for line in text.splitlines():
        head = re.match(r"^Agent (\d+)\s*$", line)
        if head:
            current = {}
            agents.append(Agent(int(head.group(1)), current))
            segment = ""
            continue
        if current is None:
            continue
        match = re.match(r"^(\s+)([^:]+):\s*(.*?)\s*$", line)
        if not match:
            continue
        key = match.group(2).replace(" ", "")
        value = match.group(3)
        if key == "Segment":
            segment = value.replace(" ", "")
        elif key == "Size" and "Pool.GlobalSize" not in current and "GLOBAL" in segment:
            if "COARSEGRAINED" in segment and "FINE" not in segment:
                current["Pool.GlobalSize"] = value
        elif len(match.group(1)) == 2:
            current.setdefault(key, value)
    return agents


def agents_from_other_data(other: dict[str, Any]) -> list[Agent]:
    """Agents of the JSON's ``otherData`` (rocminfo flattened, spaces removed)."""
    by_number: dict[int, dict[str, str]] = {}
    pools: dict[tuple[int, str], dict[str, str]] = {}
    for key, value in other.items():
        match = re.match(r"^Agent(\d+)\.(.+)$", str(key))
        if not match:
            continue
        number, rest = int(match.group(1)), match.group(2)
        pool = re.match(r"^PoolInfo\.(Pool\d+)\.(\w+)$", rest)
        if pool:
            pools.setdefault((number, pool.group(1)), {})[pool.group(2)] = str(value)
        elif "." not in rest:
            by_number.setdefault(number, {}).setdefault(rest, str(value))
    for (number, _), info in sorted(pools.items()):
        values = by_number.setdefault(number, {})
        if info.get("Segment") == "GLOBAL" and info.get("FLAGS") == "COARSEGRAINED":
            values.setdefault("Pool.GlobalSize", info.get("Size", ""))
    return [Agent(n, v) for n, v in sorted(by_number.items())]


def devices(agents: list[Agent]) -> tuple[list[dict[str, Any]], dict[int, int]]:
    """GPU agents as timeline devices (index = order among GPUs), and node id -> index."""
    gpus = [a for a in agents if (a.get("DeviceType") or "").upper() == "GPU"]
    gpus.sort(key=lambda a: (_number(a.get("Node")) is None, _number(a.get("Node")) or 0))
    out, node_to_gpu = [], {}
    for index, agent in enumerate(gpus):
        node = _number(agent.get("Node"))
        if node is not None:
            node_to_gpu[node] = index
        name, cores = agent.get("MarketingName", "Name"), _number(agent.get("ComputeUnit"))
        memory = _kib(agent.get("Pool.GlobalSize"))
        out.append(device(index, name, cores, memory, arch=agent.get("Name"), node_id=node))
    return out, node_to_gpu


def _number(text: str | None) -> int | None:
    """The number a rocminfo value starts with (``304``, ``98650232(0x5e14878) KB``)."""
    match = re.match(r"^\s*(\d+)", text or "")
    return int(match.group(1)) if match else None


def _kib(text: str | None) -> int | None:
    """``98650232(0x5e14878) KB`` -> bytes."""
    value = _number(text)
    return None if value is None or "KB" not in (text or "").upper() else value * 1024
