"""C++ kernel names as a person reads them: Itanium-mangled names (``_ZN4vllm18act_and_mul_
kernel…``, what HIP kernels show in PyTorch-profiler and some rocprof traces) are demangled by
``pycxxfilt`` (LLVM's demangler; the same output on every machine). The raw name is kept in
the row's ``args`` as ``mangled_name``.

Only the distinct names (the dictionary of the ``name`` column) are demangled, so a trace of
millions of rows with a few thousand kernel names costs milliseconds.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tracekit.timeline import spelled_out

_UNREAD = object()
# The demangler module: imported on the first mangled name (most traces have none); None
# where it cannot be (abi3 wheels for CPython >= 3.11; on 3.10 names stay as recorded).
pycxxfilt: Any = _UNREAD


def demangler() -> Any:
    """The ``pycxxfilt`` module, imported on first use; None where it is not installed."""
    global pycxxfilt
    if pycxxfilt is _UNREAD:
        try:
            import pycxxfilt as module
        except ImportError:  # pragma: no cover - Python 3.10
            module = None
        pycxxfilt = module
    return pycxxfilt


def demangler_missing() -> bool:
    """Whether a mangled name met no demangler (False while none was needed)."""
    return pycxxfilt is None


ARG_KEY = "mangled_name"
# The AMD kernel-descriptor suffix and GCC/LLVM clone suffixes are not part of the C++ name.
_SUFFIX = re.compile(
    r"(?:\.kd|(?:\.(?:cold|isra|constprop|part|lto_priv|localalias|llvm|specialized|clone)"
    r"(?:\.\d+)?)+)$"
)


@lru_cache(maxsize=65_536)
def demangle(name: str) -> str | None:
    """The demangled form of an Itanium-mangled symbol (``.kd`` and clone suffixes dropped),
    or None when ``name`` is not one (or no demangler is installed)."""
    if not name.startswith(("_Z", "__Z")) or (module := demangler()) is None:
        return None
    core = _SUFFIX.sub("", name)
    core = core[1:] if core.startswith("__Z") else core  # Mach-O's extra underscore
    try:
        out = module.itanium_demangle(core)
    except ValueError:  # looks mangled but is not ("_Z", "_Zfoo")
        return None
    return out or None


def _with_raw_names(args: pa.Array, raw: pa.Array) -> pa.Array:
    """``args`` (JSON object text or null) with ``"mangled_name": raw`` added where raw is
    not null."""
    item = pc.binary_join_element_wise(f'"{ARG_KEY}": ', raw, "")
    empty = pc.or_(pc.is_null(args), pc.equal(pc.utf8_trim_whitespace(args), "{}"))
    rest = pc.utf8_slice_codeunits(pc.utf8_ltrim_whitespace(args), 1)  # after the "{"
    alone = pc.binary_join_element_wise("{", item, "}", "")
    joined = pc.binary_join_element_wise("{", item, ", ", rest, "")
    added = pc.if_else(pc.fill_null(empty, True), alone, joined)
    return pc.if_else(pc.is_null(raw), args, added)


def _mangled(names: pa.DictionaryArray) -> bool:
    return bool(pc.any(pc.match_substring_regex(names.dictionary, "^__?Z")).as_py())


def _chunk(names: pa.DictionaryArray, args: pa.Array) -> tuple[pa.DictionaryArray, pa.Array] | None:
    """The chunk's names and args with mangled names demangled; None when none is mangled."""
    if not _mangled(names):
        return None  # the usual case: no mangled name, nothing to read into Python
    values = names.dictionary.to_pylist()
    demangled = [demangle(v) if v else None for v in values]
    if not any(demangled):
        return None
    texts = [d or v for v, d in zip(values, demangled)]
    unique = list(dict.fromkeys(texts))  # two raw names may demangle to one text
    where = {text: i for i, text in enumerate(unique)}
    remap = pa.array(np.array([where[t] for t in texts], dtype=np.int32))
    indices = pc.take(remap, names.indices)
    new_names = pa.DictionaryArray.from_arrays(indices, pa.array(unique, pa.string()))
    raw_json = pa.array([json.dumps(v) if d else None for v, d in zip(values, demangled)])
    return new_names, _with_raw_names(args, pc.take(raw_json, names.indices))


def mangled_left(events: pa.Table) -> int:
    """How many distinct names still look mangled (``_Z…``): non-zero only where no
    demangler could be imported (Python 3.10)."""
    dictionary = pc.unique(events.column("name").combine_chunks().dictionary)
    return int(pc.sum(pc.match_substring_regex(dictionary, "^__?Z[A-Za-z0-9_]")).as_py() or 0)


def demangle_events(events: pa.Table) -> pa.Table:
    """``events`` (timeline schema) with mangled names demangled and the raw name in args."""
    names, args = events.column("name"), events.column("args")
    if args.type == pa.string_view():  # spelled out only where a name changes (rare)
        if not any(_mangled(chunk) for chunk in names.chunks):
            return events
        args = spelled_out(args)
    if names.num_chunks != args.num_chunks:
        args = args.combine_chunks()
        names = names.combine_chunks()
        names, args = pa.chunked_array([names]), pa.chunked_array([args])
    changed = [_chunk(n, a) for n, a in zip(names.chunks, args.chunks)]
    if not any(changed):
        return events
    out = [c or (n, a) for c, n, a in zip(changed, names.chunks, args.chunks)]
    schema = events.schema
    events = events.set_column(
        schema.get_field_index("name"),
        schema.field("name"),
        pa.chunked_array([n for n, _ in out], schema.field("name").type),
    )
    return events.set_column(  # args as plain strings (views were spelled out above)
        schema.get_field_index("args"),
        pa.field("args", pa.string()),
        pa.chunked_array([a for _, a in out], pa.string()),
    )
