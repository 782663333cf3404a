"""Where the events of a Chrome-trace JSON text can be cut: slices of whole events for
several processes (:func:`plan`), pieces of a few MB for one (:func:`subdivide`), the ends of
the events array; and the worker-process base class (used by Kineto's :mod:`.procs` and by
msprof's parallel reader).

Decoding JSON and reading fields per event hold the GIL, so threads cannot share that work:
each extra worker is a fresh ``python -m ...`` process (no fork: nothing of the caller's
threads or ``__main__`` is inherited). A cut that is not between two events, or any worker
failure, makes the caller fall back to reading in one process.
"""

from __future__ import annotations

import contextlib
import itertools
import mmap
import os
import re
import subprocess
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import msgspec
import pyarrow as pa

MIN_BYTES = 96 << 20  # below this, starting workers costs more than it saves
# Events are decoded and their values collected this many bytes of JSON at a time: the
# decoded objects are still in cache when read, and the memory they free is reused by the
# next piece. The values become Arrow columns once per batch, each call's cost paid once.
PIECE_BYTES = 2 << 20
BATCH_BYTES = 8 << 20
MAX_TRAILER = 1 << 20  # keys after the events array: a few short values in practice
BETWEEN_EVENTS = re.compile(rb"\}\s*,\s*\{")
_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')


@dataclass
class Slice:
    """Bytes ``[start, stop)`` of the trace text: whole events, maybe after a comma."""

    start: int
    stop: int


@dataclass
class SliceResult:
    table: pa.Table
    repairs: Counter[tuple[str, str]]
    unknown: Counter[str]
    warnings: list[str]


def plan(
    data: bytes, workers: int, bare: bool = False, at: Sequence[float] | None = None
) -> tuple[list[Slice], bytes] | None:
    """Split the events array into ``workers`` slices of whole events: even ones, or cut at the
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
    for k in range(1, workers):
        cut = size * k // workers if at is None else int(size * at[k - 1])
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


def workers_for(size: int, min_bytes: int | None = None) -> int:
    """How many processes to use for ``size`` bytes of JSON (1 means: do not split), one per
    ``min_bytes`` (default :data:`MIN_BYTES`).

    Called with the file size before decompressing (to start workers early) and with the
    JSON size after.
    """
    affinity = getattr(os, "sched_getaffinity", None)
    cpus = len(affinity(0)) if affinity else (os.cpu_count() or 1)
    min_bytes = MIN_BYTES if min_bytes is None else min_bytes
    if size < min_bytes or cpus < 2 or os.environ.get("TRACEKIT_PROCESSES") == "1":
        return 1
    return min(cpus, 8, max(2, size // min_bytes))


def slice_text(data: bytes | bytearray | mmap.mmap, piece: Slice) -> bytearray:
    """One slice as a JSON array of events (one copy of its bytes)."""
    view = memoryview(data)[piece.start : piece.stop]
    head = bytes(view[:256])
    skip = len(head) - len(head.lstrip().removeprefix(b",").lstrip())
    text = bytearray(b"[")
    text += view[skip:]
    text += b"]"
    return text


class Worker:
    """A worker process, started early (its imports overlap our reading) and given work later."""

    def __init__(self, module: str, *args: str, answers: bool = True) -> None:
        """Start ``python -m module args...``; ``answers``: whether it answers on stdout."""
        self.process = subprocess.Popen(
            [sys.executable, "-m", module, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE if answers else subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def stop(self) -> None:
        """End the process (it may never have been given work)."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None and not stream.closed:
                with contextlib.suppress(OSError):
                    stream.close()


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
        raise SystemExit("slice does not start at a comma between events")
    text[first] = ord("[")
    return text


def map_slice(path: str | Path, piece: Slice, first: bool) -> tuple[mmap.mmap, memoryview]:
    """One slice of a plain file as a JSON array of events, without reading it into memory: a
    private (copy-on-write) mapping in which the comma before the slice's first event (or,
    for the ``first`` slice, the array's own bracket) opens the array and the byte after its
    last event closes it. Release the view before closing the mapping."""
    with open(path, "rb") as fh:
        mapped = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_COPY)
    begin = piece.start - 1
    if not first:
        head = mapped[piece.start : piece.start + 256]
        begin = piece.start + len(head) - len(head.lstrip())
    if mapped[begin : begin + 1] != (b"[" if first else b","):
        mapped.close()
        raise ValueError("slice does not start at a comma between events")
    mapped[begin] = ord("[")
    mapped[piece.stop] = ord("]")
    return mapped, memoryview(mapped)[begin : piece.stop + 1]
