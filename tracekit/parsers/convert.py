"""Python values decoded from JSON -> Arrow columns, shared by the JSON parsers (Kineto,
msprof timeline JSON): typed conversion in C, with a per-value path only for odd values."""

from __future__ import annotations

import keyword
from collections.abc import Callable
from operator import itemgetter
from typing import Any

import numpy as np
import pyarrow as pa


def take(items: list[Any], idx: np.ndarray) -> list[Any]:
    """``items`` at positions ``idx``, gathered in C."""
    if len(idx) == 1:
        return [items[int(idx[0])]]
    return list(itemgetter(*idx.tolist())(items)) if len(idx) else []


_READERS: dict[str, Callable[[list[Any]], list[Any]]] = {}


def field_values(name: str) -> Callable[[list[Any]], list[Any]]:
    """A function returning ``[item.<name> for item in items]``.

    The list comprehension is compiled once per field name, so that CPython 3.11+ specialises
    its attribute load for the items' type: on msgspec structs about twice as fast as
    ``list(map(operator.attrgetter(name), items))``, whose generic lookup it cannot specialise.
    """
    reader = _READERS.get(name)
    if reader is None:
        if not name.isidentifier() or keyword.iskeyword(name):
            raise ValueError(f"not a field name: {name!r}")
        reader = eval(f"lambda items: [item.{name} for item in items]")
        _READERS[name] = reader
    return reader


def _as_float(value: Any) -> float | None:
    try:
        return None if value is None else float(value)
    except (TypeError, ValueError):
        return None


def floats(values: list[Any]) -> pa.Array:
    """Floats where the values are numbers (or numeric text); null elsewhere."""
    try:
        return pa.array(values, pa.float64())
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return pa.array([_as_float(v) for v in values], pa.float64())


def texts(values: Any) -> pa.Array:
    """Strings; values of other types as their ``str``; null stays null."""
    try:
        return pa.array(values, pa.string())
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return pa.array([None if v is None else str(v) for v in values], pa.string())
