"""The device's limits: peak throughput per math dtype, HBM and scale-up link bandwidth
(``tracekit/data/devices.toml``), and which entry each device of a trace is.

A device of ``meta["devices"]`` is matched by its name (each entry's ``match`` regex); where the
name is blank or generic ("AMD Radeon Graphics") by its arch and core count; entries that agree
on the name are told apart by core count, then memory size. A name that names only a family
("Ascend910B") takes the family's default entry, with a warning. ``--device`` overrides the
match with a table entry (id or name) or a user TOML file of entries of the same form.
"""

from __future__ import annotations

import math
import re
import sys
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from tracekit.errors import TraceError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

ANY = -1  # devices_for's key for "every device" when the trace lists none but --device is given
# a dtype the part lacks: the next wider ones it may have, in order; after these the vector
# FP32 peak stands in for the floating-point ones (FP64 has no stand-in)
FALLBACK: dict[str, tuple[str, ...]] = {
    "fp4": ("fp6", "fp8", "bf16", "fp16"),
    "fp6": ("fp8", "bf16", "fp16"),
    "fp8": ("bf16", "fp16"),
    "int4": ("int8",),
    "int8": ("fp16", "bf16"),
    "bf16": ("fp32",),
    "fp16": ("bf16", "fp32"),
    "tf32": ("fp32",),
    "fp32": (),
    "fp64": (),
}
_NO_VECTOR = ("fp64",)
_REQUIRED = ("id", "name", "vendor", "hbm_gbps", "tflops", "vector_tflops")


@dataclass(frozen=True)
class Device:
    """One part's limits, as ``devices.toml`` gives them."""

    id: str
    name: str
    vendor: str
    hbm_gbps: float
    tflops: dict[str, float]
    sparse_tflops: dict[str, float]
    vector_tflops: float
    link_gbps: float | None
    source: str
    note: str = ""
    match: str = ""
    arch: str = ""
    cores: int | None = None
    memory_gb: float | None = None
    link: str | None = None
    link_count: int | None = None
    _pattern: re.Pattern[str] | None = field(default=None, repr=False, compare=False)

    def peak_tflops(self, dtype: str, matrix: bool) -> float | None:
        """Dense peak TFLOP/s for ``dtype``: on the matrix units its own figure, else the next
        wider dtype the part has (fp4 -> fp6 -> fp8 -> bf16/fp16; int8 -> fp16; tf32 -> fp32
        matrix -> FP32 vector; an A100 runs fp8 at its bf16/fp16 rate); off them, the vector
        FP32 peak. None for fp64 on a part without an FP64 matrix figure, fp32 matmuls on an
        Ascend Cube (no public figure), or an unknown dtype."""
        if not matrix:
            return self.vector_tflops
        if dtype in self.tflops:
            return self.tflops[dtype]
        if dtype not in FALLBACK:
            return None
        if dtype == "fp32" and self.vendor == "ascend":
            return None  # fp32 matmuls run on the Cube at a rate Huawei does not publish
        for wider in FALLBACK[dtype]:
            if wider in self.tflops:
                return self.tflops[wider]
        return None if dtype in _NO_VECTOR else self.vector_tflops

    def matches(self, name: str) -> bool:
        """Whether the entry's ``match`` regex is found in a device name."""
        return self._pattern is not None and self._pattern.search(name) is not None


def listed(index: int | None, devices: dict[int, Device]) -> int | None:
    """The index of ``devices`` (from :func:`devices_for`) whose figures a row on device
    ``index`` is held to: its own, else ``ANY`` (``--device`` for a trace naming none), else
    the first index of the one model a trace names for all its devices (Kineto's
    deviceProperties may list device 0 while the kernels run on device 2); None otherwise."""
    if index is not None and index in devices:
        return index
    if ANY in devices:
        return ANY
    models = {d.id for d in devices.values()}
    return min(devices) if len(models) == 1 else None


def _number(entry: dict[str, Any], key: str, where: str) -> float:
    value = entry.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise TraceError(f"{where}: '{key}' must be a positive number, got {value!r}")
    return float(value)


def _table(entry: dict[str, Any], key: str, where: str) -> dict[str, float]:
    value = entry.get(key, {})
    if not isinstance(value, dict):
        raise TraceError(f"{where}: '{key}' must be a table of dtype = TFLOP/s")
    return {str(k): _number(value, k, f"{where} {key}") for k in value}


def _device(entry: dict[str, Any], where: str) -> Device:
    """A Device from one ``[[devices]]`` table; TraceError naming ``where`` when malformed."""
    if not isinstance(entry, dict):
        raise TraceError(f"{where}: each [[devices]] entry must be a table")
    missing = [k for k in _REQUIRED if k not in entry]
    if missing:
        raise TraceError(f"{where}: entry {entry.get('id', '?')!r} lacks {', '.join(missing)}")
    where = f"{where} entry {entry['id']!r}"
    source = entry.get("source", "")
    source = " ".join(source) if isinstance(source, list) else str(source)
    text = str(entry.get("match", ""))
    try:
        pattern = re.compile(text, re.IGNORECASE) if text else None
    except re.error as exc:
        raise TraceError(f"{where}: 'match' is not a regular expression ({exc})") from None
    link_gbps = entry.get("link_gbps")
    cores = entry.get("cores")
    memory = entry.get("memory_gb")
    return Device(
        id=str(entry["id"]),
        name=str(entry["name"]),
        vendor=str(entry["vendor"]),
        hbm_gbps=_number(entry, "hbm_gbps", where),
        tflops=_table(entry, "tflops", where),
        sparse_tflops=_table(entry, "sparse_tflops", where),
        vector_tflops=_number(entry, "vector_tflops", where),
        link_gbps=None if link_gbps is None else _number(entry, "link_gbps", where),
        source=source,
        note=str(entry.get("note", "")),
        match=text,
        arch=str(entry.get("arch", "")),
        cores=None if cores is None else int(_number(entry, "cores", where)),
        memory_gb=None if memory is None else _number(entry, "memory_gb", where),
        link=entry.get("link"),
        link_count=entry.get("link_count"),
        _pattern=pattern,
    )


def _parse(text: str, where: str) -> tuple[list[Device], list[dict[str, Any]]]:
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise TraceError(f"{where} is not valid TOML: {exc}") from None
    devices = [_device(e, where) for e in doc.get("devices", [])]
    if not devices:
        raise TraceError(f"{where} has no [[devices]] entry")
    return devices, list(doc.get("generic", []))


@cache
def _builtin() -> tuple[tuple[Device, ...], tuple[dict[str, Any], ...]]:
    text = resources.files("tracekit.data").joinpath("devices.toml").read_text("utf-8")
    devices, generic = _parse(text, "tracekit/data/devices.toml")
    return tuple(devices), tuple(generic)


def known_devices() -> list[Device]:
    """Every entry of ``tracekit/data/devices.toml``, in table order."""
    return list(_builtin()[0])


def _arch_keys(dev: dict[str, Any]) -> tuple[str, ...]:
    """The arch a device states ("gfx942", "sm_90"), or the prefix its compute capability
    implies (ROCm reports gfx942 as 9.4, gfx90a as 9.0: "gfx94", "gfx90")."""
    keys = [str(dev[k]).lower() for k in ("arch", "gfx") if dev.get(k)]
    cc = str(dev.get("compute_capability") or "")
    if re.fullmatch(r"\d+\.\d+", cc):
        major, minor = cc.split(".")
        amd = str(dev.get("vendor") or "").upper().startswith("AMD")
        keys.append(f"gfx{major}{minor}" if amd else f"sm_{major}{minor}")
    return tuple(keys)


def _arch_ok(entry: Device, keys: tuple[str, ...]) -> bool:
    arch = entry.arch.lower()
    return bool(arch) and any(
        arch == k or (k.startswith("gfx") and arch.startswith(k)) for k in keys
    )


def _narrow(cands: list[Device], dev: dict[str, Any]) -> list[Device]:
    """Keep the candidates whose core count agrees, then those nearest in memory size."""
    cores = dev.get("cores")
    if cores and any(c.cores == cores for c in cands):
        cands = [c for c in cands if c.cores in (cores, None)]
    memory = dev.get("memory")
    sized = [c for c in cands if c.memory_gb]
    if memory and len(sized) > 1:
        gib = float(memory) / 2**30
        best = min(abs(math.log(gib / c.memory_gb)) for c in sized)  # type: ignore[operator]
        cands = [
            c for c in cands if not c.memory_gb or abs(math.log(gib / c.memory_gb)) <= best + 1e-9
        ]
    return cands


def _same_figures(a: Device, b: Device) -> bool:
    keys = set(a.tflops) | set(b.tflops)
    pairs = [(a.tflops.get(k, 0.0), b.tflops.get(k, 0.0)) for k in keys]
    pairs.append((a.hbm_gbps, b.hbm_gbps))
    return all(abs(x - y) <= 0.01 * max(x, y) for x, y in pairs)


def _label(dev: dict[str, Any]) -> str:
    name = str(dev.get("name") or "").strip()
    if name:
        return f"'{name}'"
    parts = ["unnamed", str(dev.get("vendor") or "").strip()]
    parts += [f"arch {k}" for k in _arch_keys(dev)[:1]]
    parts += [f"{dev['cores']} cores"] if dev.get("cores") else []
    return "(" + " ".join(p for p in parts[:2] if p) + "".join(f", {p}" for p in parts[2:]) + ")"


def _resolve(
    dev: dict[str, Any], entries: list[Device], generic: list[dict[str, Any]]
) -> tuple[Device | None, str | None]:
    """The entry for one device and, where the choice is not certain, why."""
    name = str(dev.get("name") or "").strip()
    by_id = {e.id: e for e in entries}
    for rule in generic:
        if name and re.search(str(rule.get("match", "")), name, re.IGNORECASE):
            cands = _narrow([by_id[i] for i in rule.get("candidates", []) if i in by_id], dev)
            if len(cands) == 1:
                return cands[0], None
            chosen = by_id.get(str(rule.get("default")))
            if chosen not in cands:
                chosen = max(cands, key=lambda c: c.peak_tflops("bf16", True) or 0.0, default=None)
            if chosen is None:
                return None, None
            known = ", ".join(c.id for c in cands)
            return chosen, f"names no variant ({known}): using {chosen.id}'s figures"
    cands = [e for e in entries if name and e.matches(name)]
    if not cands:
        keys = _arch_keys(dev)
        cores = dev.get("cores")
        cands = [e for e in entries if cores and e.cores == cores and _arch_ok(e, keys)]
    cands = _narrow(cands, dev)
    if not cands:
        return None, None
    first = cands[0]
    if all(_same_figures(first, c) for c in cands[1:]):
        return first, None
    best = max(cands, key=lambda c: c.peak_tflops("bf16", True) or 0.0)
    known = ", ".join(c.id for c in cands)
    return best, f"could be any of {known}: using {best.id}'s figures (the highest)"


def _override(override: str) -> list[Device]:
    """The entries an override stands for: one table entry, or a user file's entries."""
    path = Path(override).expanduser()
    if override.lower().endswith(".toml") or path.is_file():
        if not path.is_file():
            raise TraceError(f"--device {override}: no such file")
        try:
            text = path.read_text("utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise TraceError(f"--device {override}: cannot read it ({exc})") from None
        return _parse(text, str(path))[0]
    wanted = override.strip().lower()
    for entry in known_devices():
        if wanted in (entry.id.lower(), entry.name.lower()):
            return [entry]
    ids = ", ".join(e.id for e in known_devices())
    raise TraceError(
        f"--device {override!r} is no entry of devices.toml: known ids are {ids}; "
        "or pass the path of a TOML file of [[devices]] entries"
    )


def _indexed(meta: dict[str, Any]) -> list[tuple[int, dict[str, Any]]]:
    out = []
    for pos, dev in enumerate(meta.get("devices") or []):
        if isinstance(dev, dict):
            index = dev.get("index")
            out.append((index if isinstance(index, int) else pos, dev))
    return out


def _grouped(found: dict[str, list[int]]) -> list[str]:
    """One warning per distinct text, naming every device index it applies to."""
    out = []
    for text, indices in found.items():
        label = "device" if len(indices) == 1 else "devices"
        out.append(f"{label} {', '.join(map(str, indices))} {text}")
    return out


def devices_for(
    meta: dict[str, Any], override: str | None = None
) -> tuple[dict[int, Device], list[str]]:
    """Per device index of ``meta["devices"]`` the matched Device, and warnings for the
    devices matched with doubt or not at all. ``override``: a table entry's id or name, or the
    path of a user TOML of ``[[devices]]`` entries (one entry: every device; several: matched
    by name); an unknown one raises TraceError listing the known ids. With an override and no
    device list, the result's key ``ANY`` (-1) stands for every device."""
    devices = _indexed(meta)
    warned: dict[str, list[int]] = {}
    out: dict[int, Device] = {}
    if override:
        entries = _override(override)
        if len(entries) == 1:
            if not devices:
                return {ANY: entries[0]}, []
            return {index: entries[0] for index, _ in devices}, []
        table, generic = entries, []
        where = f"of {override}"
    else:
        table, generic = list(_builtin()[0]), list(_builtin()[1])
        where = "of devices.toml"
    for index, dev in devices:
        chosen, doubt = _resolve(dev, table, generic)
        if chosen is not None:
            out[index] = chosen
        if chosen is None:
            text = f"{_label(dev)} matches no entry {where}: no roofline; pass --device NAME"
            warned.setdefault(text, []).append(index)
        elif doubt:
            text = f"{_label(dev)} {doubt}; pass --device NAME to choose"
            warned.setdefault(text, []).append(index)
    return out, _grouped(warned)
