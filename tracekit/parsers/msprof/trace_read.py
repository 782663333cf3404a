"""One timeline JSON file -> :class:`~.trace_json.Layers`: by several processes when it is
large (:mod:`.trace_parallel`), else (or when that fails) decoded in this process, in place
from a mapping of a plain file. A file cut short (the profiler killed while exporting, a copy
cut off) keeps its complete events, with a warning, unless ``TRACEKIT_STRICT=1``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tracekit.errors import TraceError
from tracekit.parsers.base import cut_short_warning, strict
from tracekit.parsers.io import file_text
from tracekit.parsers.msprof import trace_parallel
from tracekit.parsers.msprof.trace_decode import decode_bytes
from tracekit.parsers.msprof.trace_json import Layers, finish, layers_of, resolve, scan
from tracekit.parsers.slices import complete_end
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
    events, cut = found
    layers = Layers()
    if events:
        whole = scan(events)
        out, roles, threads = resolve([whole.summary])
        layers = finish(out, [layers_of(whole, roles, threads, include_python)])
    if cut:
        layers.warnings.append(cut)
    return layers


def _read(
    path: Path, include_python: bool, helpers: list[Worker]
) -> Layers | tuple[list[Any], str | None]:
    """The file's layers read by several processes, or else its events decoded here (and
    the warning of a file cut short); the text is let go on return."""
    with file_text(path) as text:
        try:
            found = trace_parallel.read_layers(path, text, include_python, helpers)
            return found if found is not None else (decode_bytes(path, text), None)
        except TraceError:
            if strict():
                raise
            recovered = _complete_events(path, text)
            if recovered is None:
                raise
            return recovered


def _complete_events(path: Path, text: Any) -> tuple[list[Any], str] | None:
    """The complete events of a JSON array cut short, and the warning saying so; None when
    the text is not an array of events cut short (then the error stands)."""
    head = bytes(text[:4096])
    first = len(head) - len(head.lstrip(b"\xef\xbb\xbf \t\r\n"))
    if head[first : first + 1] != b"[" or bytes(text[-64:]).rstrip().endswith(b"]"):
        return None
    end = complete_end(text, first + 1)
    events = decode_bytes(path, bytes(text[:end]) + b"]")
    how = f"its JSON after {len(text):,} bytes"
    return events, cut_short_warning(path.name, "trace", how, len(events), "event", len(text) - end)
