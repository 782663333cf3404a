"""The software stack a trace shows: serving engine, framework, execution mode and kernel
libraries, each with the evidence that names it.

The components and the names that betray them are data (``tracekit/data/stack.toml``). The
regexes run over the trace's distinct names (host rows and device rows apart), so a 10M-row
trace costs one pass to count its names and a few thousand regex tests. Advice and taxonomy
entries name components by id; a component is in the stack only when the trace shows it.
"""

from __future__ import annotations

import re
import sys
from dataclasses import asdict, dataclass, field
from functools import cache
from importlib import resources
from typing import Any

import polars as pl

from tracekit.taxonomy import function_of
from tracekit.timeline import DEVICE_KINDS

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

LAYERS = ("engine", "framework", "mode", "library")
GRAPH_MODES = ("cuda-graphs", "hip-graphs", "acl-graph")
# An engine whose presence implies another component: vLLM on an Ascend NPU runs through
# the vllm-ascend plugin (vllm-project/vllm-ascend registers the NPU platform).
_IMPLIED = {("vllm", "ascend"): "vllm-ascend"}


@dataclass(frozen=True)
class Spec:
    """One ``[[component]]`` of ``stack.toml``."""

    id: str
    layer: str
    name: str
    host: str | None = None
    device: str | None = None
    weak: str | None = None  # host names that are evidence only beside no stronger engine
    formats: tuple[str, ...] = ()
    producer: str | None = None
    vendors: tuple[str, ...] = ()
    says: str | None = None
    source: str = ""


@dataclass(frozen=True)
class Component:
    """A component found in a trace: its id, layer, display name and one line of evidence."""

    id: str
    layer: str
    name: str
    evidence: str


@dataclass
class Stack:
    """The components a trace shows (engines first, then frameworks, modes, libraries)."""

    components: list[Component] = field(default_factory=list)

    @property
    def ids(self) -> frozenset[str]:
        """The ids of the components found."""
        return frozenset(c.id for c in self.components)

    def has(self, component: str) -> bool:
        """Whether the trace shows component ``component`` (an id of ``stack.toml``)."""
        return component in self.ids

    def names(self, layer: str) -> list[str]:
        """The display names of the components of one layer."""
        return [c.name for c in self.components if c.layer == layer]

    def summary(self) -> str:
        """One line: ``engine vLLM; framework PyTorch; mode CUDA graphs; libraries …``."""
        parts = []
        for layer in LAYERS:
            found = self.names(layer)
            if found:
                label = "libraries" if layer == "library" else layer
                parts.append(f"{label} {', '.join(found)}")
        return "; ".join(parts) if parts else "nothing recognised"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the ids and each component with its evidence."""
        return {"ids": sorted(self.ids), "components": [asdict(c) for c in self.components]}


def combined(stacks: list[Stack]) -> Stack:
    """One stack holding every component of ``stacks`` (the first evidence of each)."""
    seen: dict[str, Component] = {}
    for stack in stacks:
        for component in stack.components:
            seen.setdefault(component.id, component)
    order = {layer: i for i, layer in enumerate(LAYERS)}
    return Stack(sorted(seen.values(), key=lambda c: order[c.layer]))


@cache
def _document() -> dict[str, Any]:
    text = resources.files("tracekit.data").joinpath("stack.toml").read_text("utf-8")
    return tomllib.loads(text)


@cache
def specs() -> tuple[Spec, ...]:
    """The components of ``stack.toml``, in its order."""
    out = []
    for entry in _document()["component"]:
        fields = {**entry}
        fields["formats"] = tuple(fields.get("formats", ()))
        fields["vendors"] = tuple(fields.get("vendors", ()))
        out.append(Spec(**fields))
    return tuple(out)


def platform(vendor: str | None) -> frozenset[str]:
    """The component ids a vendor's advice may always name (``[platform]`` of the table)."""
    return frozenset(_document().get("platform", {}).get(vendor or "", ()))


def _distinct_names(df: pl.DataFrame) -> pl.DataFrame:
    """``name`` (string), ``device`` (a device row or not), ``rows`` and ``stem`` (the
    function, no template arguments or parameters: a kernel's namespace is its library's,
    a type in its arguments is not) of each distinct (name, side) of the timeline rows."""
    side = pl.col("kind").cast(pl.String).is_in(DEVICE_KINDS).fill_null(False)
    return (
        df.lazy()
        .select("name", device=side)
        .group_by("name", "device")
        .agg(rows=pl.len())
        .with_columns(pl.col("name").cast(pl.String))
        .filter(pl.col("name").is_not_null())
        .with_columns(stem=function_of(pl.col("name")))
        .collect()
    )


def _matches(names: pl.DataFrame, spec: Spec) -> tuple[int, str | None, bool]:
    """Rows and the most frequent name of ``names`` that ``spec``'s regexes match, and
    whether any of them is strong evidence: a host name of ``host`` (an engine's own step
    ranges, Python frames, operators), not a kernel's namespace or a ``weak`` host name,
    which other software may share (SGLang on ROCm calls vLLM's ``_C`` ops and kernels)."""
    strong = []
    if spec.host:
        strong.append(~pl.col("device") & pl.col("name").str.contains(spec.host))
    weak = []
    if spec.device:
        weak.append(pl.col("device") & pl.col("stem").str.contains(spec.device))
    if spec.weak:
        weak.append(~pl.col("device") & pl.col("name").str.contains(spec.weak))
    if not strong and not weak:
        return 0, None, False
    found = names.with_columns(
        _strong=pl.any_horizontal(strong) if strong else pl.lit(False),
        _weak=pl.any_horizontal(weak) if weak else pl.lit(False),
    )
    hits = found.filter(pl.col("_strong") | pl.col("_weak"))
    if hits.height == 0:
        return 0, None, False
    top = hits.sort("_strong", "rows", "name", descending=[True, True, False]).row(0, named=True)
    return int(hits["rows"].sum()), top["name"], bool(hits["_strong"].any())


def _from_meta(spec: Spec, meta: dict[str, Any]) -> str | None:
    """Evidence from the timeline's metadata: its format or its producer."""
    if meta.get("format") in spec.formats:
        return f"{meta['format']} trace format"
    if spec.producer:
        producer = " ".join(str(v) for v in (meta.get("producer") or {}).values())
        if producer and re.search(spec.producer, producer):
            return f"producer {producer[:80]!r}"
    return None


def _short(name: str, width: int = 90) -> str:
    return name if len(name) <= width else name[: width - 1] + "…"


def detect(df: pl.DataFrame, meta: dict[str, Any], vendor: str | None) -> Stack:
    """The components the rows ``df`` and the metadata ``meta`` of a trace of ``vendor``
    show, each with its evidence (how many rows, an example name).

    An engine seen only by weak evidence (kernels, shared custom ops) is dropped when another
    engine has strong evidence (its own step ranges, Python frames or operators): engines
    borrow each other's kernels. The eager mode needs PyTorch on the host (operators, the
    Kineto format), not only ATen kernels a C++ program links."""
    names = _distinct_names(df)
    found: list[Component] = []
    strong: set[str] = set()
    for spec in specs():
        if spec.vendors and vendor not in spec.vendors:
            continue
        rows, example, sure = _matches(names, spec)
        from_meta = _from_meta(spec, meta)
        evidence = f"{rows:,} row(s) such as {_short(example)!r}" if example else from_meta
        if evidence:
            found.append(Component(spec.id, spec.layer, spec.name, evidence))
            if sure or from_meta:
                strong.add(spec.id)
    engines = {c.id for c in found if c.layer == "engine"}
    if engines & strong:
        found = [c for c in found if c.layer != "engine" or c.id in strong]
    ids = {c.id for c in found}
    by_id = {s.id: s for s in specs()}
    for (engine, on), implied in _IMPLIED.items():
        if engine in ids and vendor == on and implied not in ids:
            spec = by_id[implied]
            found.append(Component(implied, spec.layer, spec.name, f"{engine} on an {on} trace"))
    if "pytorch" in strong and not ids & {"inductor", *GRAPH_MODES}:
        spec = by_id["eager"]
        evidence = "PyTorch with no torch.compile kernels and no device-graph launches"
        found.append(Component("eager", spec.layer, spec.name, evidence))
    order = {layer: i for i, layer in enumerate(LAYERS)}
    return Stack(sorted(found, key=lambda c: order[c.layer]))
