"""Format sniffing and dispatch: ``load(path)`` returns a :class:`Timeline`."""

from __future__ import annotations

import ctypes
import gc
import sqlite3
import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import pyarrow as pa

from tracekit.errors import TraceError
from tracekit.parsers import registry
from tracekit.parsers.demangle import demangle_events, demangler_missing, mangled_left
from tracekit.parsers.probe import Probe
from tracekit.parsers.processes import scope_ranks
from tracekit.taxonomy import vendor_of_calls
from tracekit.timeline import Timeline

SAVED = ("tracekit-parquet", "tracekit-arrow")  # timelines tracekit wrote itself


def supported_formats() -> list[str]:
    """Names of every format ``load`` understands."""
    return [p.name for p in registry()]


@contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic garbage collector off while a parser builds millions of short-lived objects
    (reference counting still frees them; its passes over a growing heap cost 10-20 % of a
    JSON load); back on afterwards if it was on."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def load(path: str | Path, format: str | None = None, progress=None) -> Timeline:
    """Read a trace file into a :class:`Timeline`, sniffing its format from content.

    ``format`` forces a parser by name (see :func:`supported_formats`); ``progress`` is an
    optional callable receiving short phase descriptions while a large trace is read.
    """
    path = Path(path)
    if not path.exists():
        raise TraceError(f"{path}: no such file")
    if path.is_file() and path.stat().st_size == 0:
        raise TraceError(f"{path}: empty file; pass a profiler trace")
    parsers = registry()
    if format is not None:
        chosen = [p for p in parsers if p.name == format]
        if not chosen:
            raise TraceError(f"unknown format '{format}'; known: {', '.join(supported_formats())}")
        parser = chosen[0]
    else:
        probe = Probe(path)
        found = next((p for p in parsers if p.sniff(probe)), None)
        if found is None:
            raise TraceError(_unrecognised(probe))
        parser = found
    try:
        with collector_paused():
            timeline = parser.parse(path, progress=progress)
    except TraceError:
        raise
    except (sqlite3.DatabaseError, OSError, ValueError, KeyError, RuntimeError) as exc:
        raise TraceError(
            f"{path}: cannot read as {parser.name} ({type(exc).__name__}: {exc}); "
            "the file may be truncated or corrupt"
        ) from exc
    if timeline.meta.get("source") is None:  # the key is always there (empty_meta)
        timeline.meta["source"] = path.name
    if parser.name not in SAVED:  # a saved timeline keeps its ranks and metadata as saved
        timeline = scope_ranks(timeline)  # correlation ids are per process: one rank each
        named = any((d or {}).get("vendor") for d in timeline.meta.get("devices") or [])
        api_vendor = None if named else vendor_of_calls(timeline.df)
        if api_vendor:  # no device names its vendor: the runtime API the calls use does
            timeline.meta["api_vendor"] = api_vendor
    events = timeline.stored
    demangled = demangle_events(events)
    if demangled is not events:
        timeline = Timeline(demangled, timeline.meta)
    elif demangler_missing() and (left := mangled_left(events)):
        timeline.warn(
            f"{left} kernel name(s) are mangled (_Z…) and no demangler is installed (pycxxfilt"
            " needs Python >= 3.11): names, categories and communication may be missed"
        )
    del events, demangled  # the timeline holds the only reference: its chunks can be freed
    timeline.combine_chunks()
    # The readers' scratch buffers stay in Arrow's memory pool until released: 0.4 GiB of a
    # 10M-row Nsight Systems export, kept for the whole analysis otherwise.
    pa.default_memory_pool().release_unused()
    _trim_heap()
    return timeline


def _trim_heap() -> None:
    """Hand the C heap's free pages back to the system (glibc keeps what SQLite and Python
    freed while reading: 0.4 GiB of a 10M-row export, held for the whole analysis else)."""
    if not sys.platform.startswith("linux"):
        return
    with suppress(OSError, AttributeError):  # not glibc (musl): its allocator returns memory
        ctypes.CDLL(None).malloc_trim(0)


def _unrecognised(probe: Probe) -> str:
    """One line saying why no parser took ``probe``'s file and how to force one (the CLI's
    ``--parser NAME``, with the names it accepts)."""
    path = probe.path
    known = ", ".join(supported_formats())
    if probe.is_sqlite:
        if probe.sqlite_error:
            return (
                f"{path}: SQLite file is corrupt or truncated ({probe.sqlite_error});"
                " copy or export it again"
            )
        if not probe.tables:
            return f"{path}: SQLite file has no tables; pass a profiler export (known: {known})"
        return (
            f"{path}: SQLite database of an unknown kind (tables: "
            f"{', '.join(sorted(probe.tables)[:5])}…); known formats: {known}"
        )
    if path.is_dir():
        return f"{path}: folder holds no trace tracekit reads (tried {known}); pass a trace file"
    return f"{path}: not a recognised trace; if it is one, pass --parser NAME (one of {known})"
