"""Text -> :class:`Shapes`: the PyTorch profiler's ``Input Dims`` / ``Input type`` /
``Concrete Inputs`` (JSON lists, one entry per operator argument) and torch_npu / msprof's
``Input Shapes`` / ``Input Data Types`` / ``Output Shapes`` / ``Output Data Types``
(``"32,9216;4096,9216;4096"``: dims by ",", tensors by ";", "" a 0-d or absent tensor, "N/A"
none)."""

from __future__ import annotations

import json
from typing import Any

from tracekit.metrics.roofline.dtypes import canonical
from tracekit.metrics.roofline.formulas.base import Shape, Shapes

_NOT_TENSOR = {"Scalar", "ScalarList", "TensorList", "GenericList", "", "None"}
# C++ types Kineto writes for plain number arguments (``mul(x, 0.5)``: "double", dims [])
_NUMBER = {"double", "long int", "int", "bool"}


def _json_list(text: str | list[Any] | None) -> list[Any] | None:
    """A JSON list from its text (or the list itself); None when absent or not a list."""
    if text is None:
        return None
    if isinstance(text, list):
        return text
    try:
        got = json.loads(text)
    except (ValueError, TypeError):
        return None
    return got if isinstance(got, list) else None


def _dims(entry: Any) -> Shape | None:
    """A shape from one ``Input Dims`` entry of ints; None when it is anything else."""
    if isinstance(entry, list) and all(isinstance(d, int) for d in entry):
        return tuple(entry)
    return None


def torch_shapes(
    op: str,
    input_dims: str | None,
    input_types: str | None,
    concrete: str | None,
    name: str = "",
) -> Shapes | None:
    """The :class:`Shapes` of a Kineto CPU operator from its ``Input Dims``, ``Input type`` and
    ``Concrete Inputs`` texts; None when ``Input Dims`` is null or unparsable. An input is a
    tensor when its type names a dtype (``[]`` then is 0-d, except for the C++ number types
    "double", "long int", "int", "bool" that Kineto writes for plain number arguments: those
    are scalars); ``TensorList`` inputs go to
    ``lists``. ``c10::Float4_e2m1fn_x2`` packs two fp4 per element: its last dim is doubled so
    that shapes count fp4 values (itemsize 0.5)."""
    dims = _json_list(input_dims)
    if dims is None:
        return None
    types = _json_list(input_types) or []
    values = _json_list(concrete) or []
    inputs: list[Shape | None] = []
    dtypes: list[str | None] = []
    lists: list[tuple[Shape, ...] | None] = []
    for i, entry in enumerate(dims):
        kind = types[i] if i < len(types) and isinstance(types[i], str) else None
        dt = canonical(kind)
        nested = isinstance(entry, list) and any(isinstance(x, list) for x in entry)
        if nested or kind == "TensorList":
            got = [_dims(x) for x in entry] if isinstance(entry, list) else []
            lists.append(tuple(x for x in got if x is not None))
            inputs.append(None)
            dtypes.append(None)
            continue
        lists.append(None)
        shp = _dims(entry)
        if kind is not None and (kind in _NOT_TENSOR or kind in _NUMBER or dt is None) and not shp:
            shp = None  # a scalar, an absent optional, or a type we do not know
        elif kind is None and shp == ():
            shp = None  # no type to tell a 0-d tensor from a scalar
        if shp is not None and kind is not None and kind.lower().endswith("_x2") and shp:
            shp = (*shp[:-1], shp[-1] * 2)
        inputs.append(shp)
        dtypes.append(dt if shp is not None else None)
    scalars = tuple(str(v) if v is not None else "" for v in values[: len(inputs)])
    scalars += ("",) * (len(inputs) - len(scalars))
    return Shapes(
        op=op,
        source="torch",
        inputs=tuple(inputs),
        dtypes=tuple(dtypes),
        scalars=scalars,
        lists=tuple(lists) if any(x is not None for x in lists) else (),
        name=name,
    )


def _unquote(text: str | None) -> str | None:
    """The text without surrounding quotes and blanks; None for absent or "N/A"."""
    if text is None:
        return None
    got = text.strip().strip('"').strip()
    return None if got.upper() == "N/A" else got


def _ascend_list(text: str | None) -> tuple[Shape | None, ...] | None:
    """Shapes from an Ascend shapes text; None when absent or unparsable."""
    got = _unquote(text)
    if got is None:
        return None
    out: list[Shape | None] = []
    for part in got.split(";"):
        part = part.strip()
        if part.upper() == "N/A":
            out.append(None)
        elif part == "":
            out.append(())
        else:
            try:
                out.append(tuple(int(d) for d in part.split(",")))
            except ValueError:
                return None
    return tuple(out)


def _ascend_dtypes(text: str | None, count: int) -> tuple[str | None, ...]:
    """Canonical dtypes from an Ascend dtypes text, padded to ``count``."""
    got = _unquote(text)
    names = [canonical(p) for p in got.split(";")] if got else []
    names += [None] * (count - len(names))
    return tuple(names[:count])


def ascend_shapes(
    op_type: str,
    input_shapes: str | None,
    input_dtypes: str | None,
    output_shapes: str | None,
    output_dtypes: str | None,
    name: str = "",
) -> Shapes | None:
    """The :class:`Shapes` of a torch_npu ``kernel_details`` / msprof ``op_summary`` row; None
    when its input shapes are absent ("N/A") or unparsable. A trailing empty entry that has no
    dtype (``"1000;"`` with one dtype) is dropped."""
    inputs = _ascend_list(input_shapes)
    if inputs is None or not op_type:
        return None
    dts = _ascend_dtypes(input_dtypes, len(inputs))
    while inputs and inputs[-1] == () and dts[-1] is None and len(inputs) > 1:
        inputs, dts = inputs[:-1], dts[:-1]
    outputs = _ascend_list(output_shapes) or ()
    return Shapes(
        op=op_type.strip(),
        source="ascend",
        inputs=inputs,
        dtypes=dts,
        outputs=outputs,
        out_dtypes=_ascend_dtypes(output_dtypes, len(outputs)),
        name=name,
    )
