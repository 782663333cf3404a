"""Turn per-table pieces of a trace into one events table in the timeline schema."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.ma  # pa.array(ndarray) imports it on first use: keep that out of the first load
import pyarrow as pa

from tracekit.parsers.name_pool import NamePool
from tracekit.timeline import KINDS, SCHEMA, VIEW_SCHEMA

ENGINES = ("sm", "copy", "aic", "aiv", "mix", "ai_cpu", "dsa", "sdma", "comm")
_KIND_DICT = pa.array(KINDS, pa.string())
_ENGINE_DICT = pa.array(ENGINES, pa.string())


@dataclass
class Part:
    """Rows of one kind from one source table; ``name`` holds :class:`NamePool` indices.

    Any column left as None is null; a scalar is repeated for every row.
    """

    kind: str
    ts: Any
    dur: Any
    name: np.ndarray
    engine: str | None = None
    columns: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.name)


def _column(value: Any, n: int, type_: pa.DataType) -> pa.Array | pa.ChunkedArray:
    if value is None:
        return pa.nulls(n, type_)
    if isinstance(value, (int, float, str)):
        return pa.array(np.full(n, value) if not isinstance(value, str) else [value] * n, type_)
    if isinstance(value, (pa.Array, pa.ChunkedArray)):
        return value if value.type == type_ else value.cast(type_)
    return pa.array(value, type_)


def _is_view(value: Any) -> bool:
    return isinstance(value, (pa.Array, pa.ChunkedArray)) and value.type == pa.string_view()


def _constant_dictionary(value: str | None, n: int, dictionary: pa.Array) -> pa.DictionaryArray:
    if value is None:
        indices = pa.nulls(n, pa.int32())
    else:
        code = dictionary.to_pylist().index(value)
        indices = pa.array(np.full(n, code, dtype=np.int32))
    return pa.DictionaryArray.from_arrays(indices, dictionary)


def assemble(parts: list[Part], pool: NamePool) -> pa.Table:
    """Concatenate parts (zero-copy, one chunk each) into a table with :data:`SCHEMA` (with
    ``args`` as a string view when a part gives it so: :data:`VIEW_SCHEMA`)."""
    parts = [p for p in parts if len(p)]
    names = pool.dictionary_arrays([p.name for p in parts])
    # args held as a string view (rows of one text share its bytes) in one part: in all
    viewed = any(_is_view(p.columns.get("args")) for p in parts)
    schema = VIEW_SCHEMA if viewed else SCHEMA
    tables = []
    for part, name in zip(parts, names):
        n = len(part)
        arrays = []
        for fld in schema:
            if fld.name == "kind":
                arrays.append(_constant_dictionary(part.kind, n, _KIND_DICT))
            elif fld.name == "engine":
                arrays.append(_constant_dictionary(part.engine, n, _ENGINE_DICT))
            elif fld.name == "name":
                arrays.append(name)
            elif fld.name in ("ts", "dur"):
                arrays.append(_column(getattr(part, fld.name), n, fld.type))
            else:
                arrays.append(_column(part.columns.get(fld.name), n, fld.type))
        tables.append(pa.Table.from_arrays(arrays, schema=schema))
    if not tables:
        return SCHEMA.empty_table()
    return pa.concat_tables(tables)
