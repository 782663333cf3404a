"""One timeline JSON file -> :class:`~.trace_json.Layers`: by several processes when it is
large (:mod:`.trace_parallel`), else (or when that fails) decoded in this process, in place
from a mapping of a plain file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tracekit.parsers.io import file_text
from tracekit.parsers.msprof import trace_parallel
from tracekit.parsers.msprof.trace_decode import decode_bytes
from tracekit.parsers.msprof.trace_json import Layers, finish, layers_of, resolve, scan
from tracekit.parsers.workers import Worker


def read_layers(path: Path, include_python: bool = False) -> Layers:
    """Decode one timeline file into :class:`Layers` (times as written: epoch or monotonic)."""
    helpers = trace_parallel.start(path)  # before the file is read: their imports overlap it
    try:
        found = _read(path, include_python, helpers)
    finally:
        for worker in helpers:
            worker.stop()
    if isinstance(found, Layers):
        return found
    events = found
    if not events:
        return Layers()
    whole = scan(events)
    out, roles, threads = resolve([whole.summary])
    return finish(out, [layers_of(whole, roles, threads, include_python)])


def _read(path: Path, include_python: bool, helpers: list[Worker]) -> Layers | list[Any]:
    """The file's layers read by several processes, or else its events decoded here; the
    text is let go on return."""
    with file_text(path) as text:
        found = trace_parallel.read_layers(path, text, include_python, helpers)
        return found if found is not None else decode_bytes(path, text)
