"""The types every formula shares: :class:`Shapes` (what the trace says about one operator's
inputs) and :class:`Work` (what a formula makes of them), plus small helpers on shapes."""

from __future__ import annotations

import math
from dataclasses import dataclass

from tracekit.metrics.roofline.dtypes import FLOATS, itemsize

Shape = tuple[int, ...]


@dataclass(frozen=True)
class Shapes:
    """What the trace says about one operator's inputs (and, Ascend, outputs)."""

    op: str  # torch: "aten::mm", "_C::silu_and_mul"; ascend: the op type ("MatMulV2")
    source: str  # "torch" | "ascend"
    inputs: tuple[Shape | None, ...]  # () = 0-d tensor; None = no tensor
    dtypes: tuple[str | None, ...]  # canonical dtype per input, None unknown
    outputs: tuple[Shape | None, ...] = ()  # Ascend "Output Shapes" (torch: none)
    out_dtypes: tuple[str | None, ...] = ()
    scalars: tuple[str, ...] = ()  # Kineto "Concrete Inputs" per input ("" where none)
    lists: tuple[tuple[Shape, ...] | None, ...] = ()  # TensorList inputs' shapes per input
    name: str = ""  # device row / kernel name


@dataclass(frozen=True)
class Work:
    """FLOPs and minimum HBM bytes of one operator, its family and math dtype."""

    family: str  # one of FAMILIES
    flops: float  # floating-point (or integer MAC*2) operations
    bytes: float  # minimum HBM traffic: every input read once, every output written once
    dtype: str  # math dtype used to pick the device's peak ("bf16", "fp8", "fp32", ...)
    matrix: bool  # True: matrix units (tensor cores / MFMA / AI Cube); False: vector units
    exact: bool = True  # False where the shapes give only an upper bound
    note: str = ""  # one short clause saying how it was computed when not obvious


FAMILIES = (
    "gemm", "grouped_gemm", "attention", "norm", "activation", "elementwise",
    "embedding", "sampling", "memory",
)  # fmt: skip


def numel(shape: Shape) -> int:
    """Elements of a shape (() -> 1)."""
    return math.prod(shape)


def shape(s: Shapes, i: int) -> Shape | None:
    """Input ``i``'s shape; None when absent or not a tensor."""
    return s.inputs[i] if i < len(s.inputs) else None


def dtype(s: Shapes, i: int) -> str | None:
    """Input ``i``'s canonical dtype; None when absent or unknown."""
    return s.dtypes[i] if i < len(s.dtypes) else None


def scalar(s: Shapes, i: int) -> str:
    """Input ``i``'s concrete value text ("" when none)."""
    return s.scalars[i].strip() if i < len(s.scalars) else ""


def scalar_int(s: Shapes, i: int) -> int | None:
    """Input ``i``'s concrete value as an int; None when there is none."""
    try:
        return int(scalar(s, i))
    except ValueError:
        return None


def scalar_bool(s: Shapes, i: int) -> bool | None:
    """Input ``i``'s concrete value as a bool ("True"/"False"/"1"/"0"); None otherwise."""
    text = scalar(s, i).lower()
    return {"true": True, "false": False, "1": True, "0": False}.get(text)


def nbytes(shp: Shape | None, dt: str | None) -> float | None:
    """Bytes of a tensor; None when its shape or dtype is unknown."""
    if shp is None or dt is None:
        return None
    try:
        return numel(shp) * itemsize(dt)
    except KeyError:
        return None


def input_bytes(s: Shapes, i: int) -> float:
    """Bytes of input ``i``; 0 when absent. ValueError when it is a tensor of unknown dtype."""
    shp = shape(s, i)
    if shp is None:
        return 0.0
    got = nbytes(shp, dtype(s, i))
    if got is None:
        raise ValueError(f"input {i} of {s.op} has no known dtype")
    return got


def all_bytes(s: Shapes, skip_0d: bool | None = None) -> float:
    """Bytes of every input and output tensor, each once. Ascend texts write an absent optional
    input as "" (a 0-d shape): there 0-d tensors count 0 bytes (a real one is at most 8)."""
    skip = s.source == "ascend" if skip_0d is None else skip_0d
    total = 0.0
    for shapes, dts in ((s.inputs, s.dtypes), (s.outputs, s.out_dtypes)):
        for i, shp in enumerate(shapes):
            if shp is None or (skip and shp == ()):
                continue
            got = nbytes(shp, dts[i] if i < len(dts) else None)
            if got is None:
                raise ValueError(f"a tensor of {s.op} has no known dtype")
            total += got
    return total


def tensors(s: Shapes) -> list[int]:
    """Indices of the inputs that are tensors (a shape, 0-d included)."""
    return [i for i, shp in enumerate(s.inputs) if shp is not None]


def math_dtype(*dts: str | None) -> str | None:
    """The dtype the math runs in: the widest of the operands' dtypes (a bf16 activation times
    an int4 weight runs in bf16; fp8 x fp8 in fp8); None when any is unknown."""
    if not dts or any(d is None for d in dts):
        return None
    return max(dts, key=lambda d: itemsize(d))  # type: ignore[arg-type,return-value]


def promote(dts: list[str]) -> str | None:
    """PyTorch-like result dtype of tensors: the widest float if any, else the widest int."""
    floats = [d for d in dts if d in FLOATS]
    pool = floats or dts
    return max(pool, key=itemsize) if pool else None


def broadcast(*shapes: Shape) -> Shape | None:
    """The broadcast shape of ``shapes`` (NumPy rules); None when they do not broadcast."""
    rank = max((len(x) for x in shapes), default=0)
    out: list[int] = []
    for pos in range(rank):
        dims = {x[len(x) - rank + pos] for x in shapes if len(x) - rank + pos >= 0}
        dims.discard(1)
        if len(dims) > 1:
            return None
        out.append(dims.pop() if dims else 1)
    return tuple(out)
