"""rocprofiler agents (CPUs and GPUs) and how rows name them, mapped to the GPU index.

Rows name an agent by a label: ``"Agent N"`` (N is the node id with ``--agent-index
absolute``, the default, or the logical node id with ``relative``), ``"GPU N"`` / ``"CPU N"``
(``type-relative``: N counts agents of that type) or, in older output, a bare ``N``. The JSON
output refers to ``agents[].id.handle`` instead. The timeline's device is the GPU index: GPU
agents ordered by node id, counted from 0 (what rocprofiler-sdk calls ``gpu_index``).
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from tracekit.errors import TraceError
from tracekit.parsers.convert import as_int
from tracekit.parsers.rocprof.meta import device

_LABEL = re.compile(r"^\s*(?:(Agent|GPU|CPU|UNK)\s+)?(-?\d+)\s*$")


@dataclass
class Agent:
    """One rocprofiler agent; ``gpu_index`` is set for GPUs."""

    node_id: int | None
    logical_node_id: int | None
    type: str  # "GPU", "CPU" or "UNK"
    name: str | None = None  # product name ("AMD Instinct MI350X")
    arch: str | None = None  # ISA name ("gfx950")
    cores: int | None = None  # compute units (GPU) or CPU cores
    memory: int | None = None  # bytes, when the output gives it
    handle: int | None = None  # JSON agents[].id.handle
    gpu_index: int | None = None


class AgentTable:
    """The agents of a run (possibly none known) and label -> GPU index mapping."""

    def __init__(self, agents: list[Agent]) -> None:
        self.agents = agents
        gpus = sorted(
            (a for a in agents if a.type == "GPU"),
            key=lambda a: (a.node_id is None, a.node_id or 0),
        )
        taken = {a.gpu_index for a in gpus if a.gpu_index is not None and a.gpu_index >= 0}
        if len(taken) != len(gpus):  # no (or partial) gpu_index: number GPUs by node id
            for index, agent in enumerate(gpus):
                agent.gpu_index = index
        self.gpus = gpus
        self.guessed: set[str] = set()  # labels mapped without agent info
        self.unknown: set[str] = set()  # labels agent info does not list

    @property
    def known(self) -> bool:
        return bool(self.agents)

    def device_of(self, label: Any) -> int | None:
        """GPU index of a row's agent label; None for CPU agents and empty labels."""
        if label is None:
            return None
        match = _LABEL.match(str(label))
        if not match:
            return None
        kind, number = match.group(1) or "Agent", int(match.group(2))
        if kind == "CPU":
            return None
        if kind == "GPU":
            return number
        if not self.agents:
            self.guessed.add(str(label))
            return number
        for key in ("node_id", "logical_node_id"):
            agent = next((a for a in self.agents if getattr(a, key) == number), None)
            if agent is not None:
                return agent.gpu_index if agent.type == "GPU" else None
        self.unknown.add(str(label))
        return None

    def map_labels(self, labels: pl.Series) -> pl.Series:
        """Vectorised :meth:`device_of` over a column of labels (Int32, null for none)."""
        uniques = labels.unique().drop_nulls().to_list()
        mapping = {u: self.device_of(u) for u in uniques}
        return labels.replace_strict(mapping, default=None, return_dtype=pl.Int32)

    def devices(self, used: Iterable[int]) -> list[dict[str, Any]]:
        """Timeline metadata: every known GPU, or the device numbers rows use when none is."""
        if not self.gpus:
            return [device(i) for i in sorted(used)]
        return [
            device(a.gpu_index, a.name or a.arch, a.cores, a.memory, arch=a.arch, node_id=a.node_id)
            for a in sorted(self.gpus, key=lambda a: a.gpu_index or 0)
        ]

    def warnings(self) -> list[str]:
        out = []
        if self.unknown:
            out.append(
                f"agent(s) {', '.join(sorted(self.unknown))} not in the agent info; their rows"
                " have no device"
            )
        if not self.guessed:
            return out
        return [
            *out,
            f"no *_agent_info.csv with this run: device numbers are rocprofiler agent numbers"
            f" ({', '.join(sorted(self.guessed))}; node ids count CPU agents too), not GPU"
            " indices; keep agent_info.csv next to the trace for GPU indices and names",
        ]


def _int(value: Any) -> int | None:
    """An agent-info number (the csv module gives text, quoted by some writers)."""
    return as_int(None if value is None else str(value).strip().strip('"'))


def _text(value: Any) -> str | None:
    text = None if value is None else str(value).strip()
    return text or None


def read_agent_info(path: Path) -> AgentTable:
    """Agents of a ``*_agent_info.csv`` (small: read with the csv module)."""
    try:
        with path.open(newline="", encoding="utf-8", errors="replace") as fh:
            rows = list(csv.DictReader(fh))
    except (OSError, csv.Error) as exc:
        raise TraceError(f"{path}: cannot read agent info ({exc}); copy the file again") from exc
    agents = []
    for row in rows:
        kind = (_text(row.get("Agent_Type")) or "UNK").upper()
        kind = {"1": "CPU", "2": "GPU"}.get(kind, kind)
        memory = _int(row.get("Local_Mem_Size"))
        agents.append(
            Agent(
                node_id=_int(row.get("Node_Id")),
                logical_node_id=_int(row.get("Logical_Node_Id")),
                type=kind,
                name=_text(row.get("Product_Name")),
                arch=_text(row.get("Name")),
                cores=_int(row.get("Cu_Count"))
                if kind == "GPU"
                else _int(row.get("Cpu_Cores_Count")),
                memory=memory or None,
            )
        )
    return AgentTable(agents)
