"""Slices of the events array of a Chrome-trace JSON text, for reading it in several processes
(Kineto and msprof timelines alike): where the events can be cut (:func:`plan`, cut evenly, at
given fractions, or where the work evens out by :func:`work_cuts`; :func:`subdivide` for pieces
of a few MB), the ends of the events array, and a slice as a JSON array of its own: copied
(:func:`slice_text`), read from a stream (:func:`read_slice`), mapped in place
(:func:`mapped_slice`) or the part of a file that holds it (:func:`file_slice`).

A cut is placed at a ``}, {`` between two events; one that turns out to be inside a string
makes the slice fail to decode, and the caller falls back to reading the text in one go.
"""

from __future__ import annotations

import contextlib
import itertools
import mmap
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import msgspec
import numpy as np

from tracekit.parsers.io import GZIP_MAGIC, gzip_chunks, map_file

MAX_TRAILER = 1 << 20  # keys after the events array: a few short values in practice
BETWEEN_EVENTS = re.compile(rb"\}\s*,\s*\{")
_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')


@dataclass
class Slice:
    """Bytes ``[start, stop)`` of the trace text: whole events, maybe after a comma."""

    start: int
    stop: int


def plan(
    data: bytes, parts: int, bare: bool = False, at: Sequence[float] | None = None
) -> tuple[list[Slice], bytes] | None:
    """Split the events array into ``parts`` slices of whole events: even ones, or cut at the
    fractions ``at`` of the array (one per cut, increasing).

    Returns the slices and the document with an empty events array (for its metadata), or
    None when the layout is not the expected ``{..."traceEvents": [ {...}, ... ] ...}`` (with
    ``bare``: ``[ {...}, ... ]``).
    """
    if bare:
        tail = data[-4096:]
        first, last = data.find(b"[", 0, 4096) + 1, len(data) - len(tail) + len(tail.rstrip()) - 1
        if first <= 0 or last < first or data[last : last + 1] != b"]":
            return None
    else:
        key = _EVENTS_KEY.search(data, 0, 1 << 20)
        if key is None:
            return None
        first = key.end()
        found = array_end(data, first)
        if found is None:
            return None
        last = found
    bounds = [first]
    size = last - first
    for k in range(1, parts):
        cut = size * k // parts if at is None else int(size * at[k - 1])
        match = BETWEEN_EVENTS.search(data, first + cut, last)
        if match is None or match.start() + 1 <= bounds[-1]:
            return None
        bounds.append(match.start() + 1)
    bounds.append(last)
    slices = [Slice(a, b) for a, b in itertools.pairwise(bounds)]
    return slices, data[:first] + data[last:]


def events_start(data: bytes | bytearray) -> int | None:
    """Index just after the ``[`` that opens the events: of ``"traceEvents": [`` within the
    first MB, or of the document itself when it is a bare list."""
    head = data[:4096]
    if head.lstrip()[:1] == b"[":
        return head.index(b"[") + 1
    key = _EVENTS_KEY.search(data, 0, 1 << 20)
    return None if key is None else key.end()


def array_end(data: bytes | bytearray, first: int) -> int | None:
    """Index of the ``]`` closing the events array that starts at ``first``: the last ``]``
    that the rest of the trace object follows and that closes a list of events (keys after
    the events may hold arrays of their own, such as ``deviceProperties`` or log lines)."""
    pos = len(data)
    for _ in range(64):
        pos = data.rfind(b"]", first, pos)
        if pos < 0 or len(data) - pos > MAX_TRAILER:
            return None
        if _object_rest(data[pos + 1 :]) and _closes_events(data, first, pos):
            return pos
    return None


def text_end(data: bytes | bytearray, lower: int, upper: int) -> int:
    """``upper`` moved back over whitespace, not below ``lower`` (no copy of the text)."""
    while upper > lower and data[upper - 1] in b" \t\r\n":
        upper -= 1
    return upper


def last_between(data: bytes | bytearray, lower: int, upper: int) -> re.Match[bytes] | None:
    """The last ``}, {`` between two events in ``data[lower:upper]``, looked for in the last
    16 KB first, then in four times as much, and so on."""
    window = 1 << 14
    while True:
        start = max(lower, upper - window)
        found = None
        for found in BETWEEN_EVENTS.finditer(data, start, upper):  # noqa: B007
            pass
        if found is not None or start == lower:
            return found
        window *= 4


def _object_rest(tail: bytes | bytearray) -> bool:
    """Whether ``tail`` is the end of a JSON object: ``}`` or ``, "key": value ... }``."""
    tail = tail.strip()
    if tail != b"}" and not tail.startswith(b","):
        return False
    try:
        msgspec.json.decode(b"{" + tail.lstrip(b",") if tail != b"}" else b"{}")
    except msgspec.DecodeError:
        return False
    return True


class _Phase(msgspec.Struct):
    ph: str


def _closes_events(data: bytes | bytearray, first: int, pos: int) -> bool:
    """Whether ``data[first:pos]`` ends with an event (an object with ``ph``), or is empty."""
    body_end = text_end(data, first, pos)
    if body_end == first:
        return True
    if data[body_end - 1 : body_end] != b"}":
        return False
    # The last element starts after one of the last few "}, {" (later ones may lie inside it,
    # between objects of its args), or at the start of the array.
    upper = body_end
    for _ in range(8):
        between = last_between(data, first, upper)
        start = first if between is None else between.end() - 1
        try:
            msgspec.json.decode(data[start:body_end], type=_Phase)
            return True
        except (msgspec.DecodeError, msgspec.ValidationError):
            if between is None:
                return False
            upper = between.start()
    return False


def subdivide(data: bytes | bytearray, piece: Slice, size: int) -> list[Slice]:
    """``piece`` cut into slices of whole events of about ``size`` bytes each."""
    bounds = [piece.start]
    while piece.stop - bounds[-1] > size + size // 2:
        match = BETWEEN_EVENTS.search(data, bounds[-1] + size, piece.stop)
        if match is None:
            break
        bounds.append(match.start() + 1)
    bounds.append(piece.stop)
    return [Slice(a, b) for a, b in itertools.pairwise(bounds)]


# Where the work evens out: bytes are a poor measure of it. A complete (``X``) event is decoded
# *and* read field by field into its rows, while other events (flows, a third of a torch_npu
# timeline, written in one run) are only decoded and grouped. The events array is sampled in
# WINDOWS windows; each window's work is estimated from its bytes, its events and the share of
# them that are complete, in units of one byte of JSON decoded (costs measured on the 1M-task
# torch_npu bench).
WINDOWS = 256
SAMPLE = 1 << 15  # bytes read from the middle of each window
EVENT_COST = 80  # per event: grouped
COMPLETE_BYTE_COST = 1.4  # per byte of a complete event: read into its rows
_EVENT = re.compile(rb'"ph"\s*:')
_COMPLETE = re.compile(rb'"ph"\s*:\s*"X"')


def work_cuts(data: Any, parts: int, head_extra: float) -> list[float] | None:
    """Fractions of ``data`` at which to cut it into ``parts`` slices of equal work, the first
    one (the caller's own) with ``head_extra`` units less than the others; None when the first
    slice would be empty."""
    size = len(data)
    edges = np.linspace(0, size, WINDOWS + 1).astype(np.int64)
    work = np.zeros(WINDOWS)
    for k in range(WINDOWS):  # a fixed number of windows, not a loop over events
        middle = (edges[k] + edges[k + 1]) // 2
        start = max(0, middle - SAMPLE // 2)
        sample = bytes(data[start : min(size, start + SAMPLE)])
        if not sample:
            continue
        events = len(_EVENT.findall(sample))
        complete = len(_COMPLETE.findall(sample)) / max(events, 1)
        per_byte = 1 + EVENT_COST * events / len(sample) + COMPLETE_BYTE_COST * complete
        work[k] = per_byte * (edges[k + 1] - edges[k])
    total = np.concatenate([[0.0], np.cumsum(work)])
    head = (total[-1] - head_extra * (parts - 1)) / parts
    if head <= 0:
        return None
    targets = head + (total[-1] - head) * np.arange(parts - 1) / max(parts - 1, 1)
    return [float(x) for x in np.interp(targets, total, edges) / size]


def slice_text(data: bytes | bytearray | mmap.mmap, piece: Slice) -> bytearray:
    """One slice as a JSON array of events (one copy of its bytes)."""
    view = memoryview(data)[piece.start : piece.stop]
    head = bytes(view[:256])
    skip = len(head) - len(head.lstrip().removeprefix(b",").lstrip())
    text = bytearray(b"[")
    text += view[skip:]
    text += b"]"
    return text


def read_slice(stream: BinaryIO, size: int) -> bytearray:
    """Read ``, {...}, ... {...}`` into one buffer and make it ``[{...}, ... {...}]`` in place."""
    text = bytearray(size + 1)
    view = memoryview(text)
    done = 0
    while done < size and (got := stream.readinto(view[done:size])):
        done += got
    del view
    text[done:] = b"]"
    head = bytes(text[:256])
    first = len(head) - len(head.lstrip())
    if text[first : first + 1] != b",":
        raise ValueError("slice does not start at a comma between events")
    text[first] = ord("[")
    return text


@contextlib.contextmanager
def mapped_slice(path: Path, piece: Slice, first: bool) -> Iterator[memoryview]:
    """One slice of a plain file as a JSON array of events, without reading it into memory: a
    private (copy-on-write) mapping in which the comma before the slice's first event (or,
    for the ``first`` slice, the array's own bracket) opens the array and the byte after its
    last event closes it; where the file cannot be mapped, a copy of those bytes."""
    offset = 0
    mapped = map_file(path, mmap.ACCESS_COPY)
    text: Any = mapped
    if mapped is None:
        offset = piece.start - 1
        with path.open("rb") as fh:
            fh.seek(offset)
            text = bytearray(fh.read(piece.stop + 1 - offset))
    try:
        begin = piece.start - 1
        if not first:
            head = text[piece.start - offset : piece.start - offset + 256]
            begin = piece.start + len(head) - len(head.lstrip())
        begin -= offset
        if text[begin : begin + 1] != (b"[" if first else b","):
            raise ValueError("slice does not start at a comma between events")
        text[begin] = ord("[")
        text[piece.stop - offset] = ord("]")
        with memoryview(text)[begin : piece.stop - offset + 1] as view:
            yield view
    finally:
        if mapped is not None:
            with contextlib.suppress(BufferError):  # a view still held by a failed decode
                mapped.close()


def file_slice(path: Path, piece: Slice, chunk: int) -> tuple[Any, Slice]:
    """The part of a file's JSON text that holds ``piece``, and where ``piece`` lies in it: a
    mapping of a plain file (not read; where it cannot be mapped, the slice's bytes read), or
    the text inflated ``chunk`` bytes at a time from the chunk where ``piece`` starts to the
    one where it ends (the text before is dropped chunk by chunk)."""
    with path.open("rb") as fh:
        plain = fh.read(2) != GZIP_MAGIC
    if plain:
        mapped = map_file(path)
        if mapped is not None:
            return mapped, piece
        with path.open("rb") as fh:
            fh.seek(piece.start)
            return fh.read(piece.stop - piece.start), Slice(0, piece.stop - piece.start)
    kept, base, offset = bytearray(), 0, 0
    for text in gzip_chunks(path.read_bytes(), chunk):
        if offset + len(text) > piece.start:
            if not kept:  # the chunk where the slice starts
                base = offset
            kept += text
        offset += len(text)
        if offset >= piece.stop:
            break
    return kept, Slice(piece.start - base, piece.stop - base)


def complete_end(text: bytes | bytearray | memoryview, first: int) -> int:
    """For a JSON array of events cut anywhere (``text[first:]`` its elements, after the
    ``[``): the index after the last complete event (after its ``}``), or ``first`` when
    there is none. The events before the last ``}, {`` are complete; the last one is when
    its text decodes as an object (the cut fell right after it)."""
    found = last_between(text, first, len(text))
    start = first if found is None else found.end() - 1  # the "{" of the last event
    last = bytes(text[start:]).rstrip().rstrip(b",").rstrip()
    if last.startswith(b"{") and _is_object(last):
        return start + len(last)
    return first if found is None else found.start() + 1


def _is_object(text: bytes) -> bool:
    try:
        return isinstance(msgspec.json.decode(text), dict)
    except msgspec.DecodeError:
        return False
