"""A Kineto trace decoded while it is read (and inflated, when it is gzip).

A thread reads the file and inflates it (file reads and ISA-L release the GIL, so this takes
the other core) and hands over 1 MB of JSON first, then twice as much each time up to
:data:`.events.PIECE_BYTES`; the calling thread cuts the text after the last whole event,
decodes that piece in place and collects its values. The whole text is never held at once.
Anything unexpected (no ``traceEvents`` key near the start, a cut inside a string, metadata
after the events that changes how rows are read) returns None, and the caller reads the
file the ordinary way, which also reports bad input.

Given a :class:`Cut` (for a trace that the ordinary way found cut short: a profiler killed
while writing, a copy cut off), the events before the cut are kept: every complete event, and
none of the one the cut went through; the gzip stream is inflated as far as it goes; the
``Cut`` then says how much was dropped.
"""

from __future__ import annotations

import itertools
import queue
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from tracekit.errors import TraceError
from tracekit.parsers import slices
from tracekit.parsers.io import GZIP_MAGIC, InflateError, gzip_chunks
from tracekit.parsers.kineto import events
from tracekit.parsers.kineto.decode import decode
from tracekit.parsers.kineto.events import SliceResult, TableBuilder

_HEAD_LIMIT = 1 << 20  # the events array starts within this many bytes, or we decline
# The first chunk is this small and chunks double from there, so that the first piece (cut
# once it is followed by MAX_TRAILER of text) is decoded after 1 + 2 MB are inflated, not
# after a whole piece.
_FIRST_CHUNK = 1 << 20
_END = object()


@dataclass
class Cut:
    """Where a trace read with ``recover=True`` was cut: the ``text_bytes`` of JSON read,
    the ``dropped_bytes`` of the incomplete event after the last complete one, and the
    inflating error when the gzip stream itself was cut (else None)."""

    text_bytes: int = 0
    dropped_bytes: int = 0
    gzip_error: str | None = None
    recovered: bool = False


class _Reader(threading.Thread):
    """Reads a file, inflating every gzip member, into a bounded queue of text chunks."""

    def __init__(self, path: Path, chunk: int) -> None:
        super().__init__(daemon=True)
        self.path, self.chunk = path, chunk
        self.chunks: queue.Queue[Any] = queue.Queue(maxsize=3)
        self.stopped = threading.Event()

    def run(self) -> None:
        try:
            with self.path.open("rb") as fh:
                gzipped = fh.read(2) == GZIP_MAGIC
                fh.seek(0)
                done = self._inflate(fh.read()) if gzipped else self._copy(fh)
            if done:
                self._put(_END)
        except Exception as exc:  # handed over; the caller then reads the ordinary way
            self._put(exc)

    def _copy(self, fh: BinaryIO) -> bool:
        size = min(self.chunk, _FIRST_CHUNK)
        while text := fh.read(size):
            if not self._put(text):
                return False
            size = min(self.chunk, 2 * size)
        return True

    def _inflate(self, data: bytes) -> bool:
        return all(self._put(text) for text in gzip_chunks(data, self.chunk, _FIRST_CHUNK))

    def _put(self, item: Any) -> bool:
        while not self.stopped.is_set():
            try:
                self.chunks.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def texts(self, cut: Cut | None = None) -> Iterator[bytes]:
        """The inflated text, chunk by chunk; raises what the thread raised, except an
        inflating error when ``cut`` is given: it is recorded there and the text ends."""
        while True:
            try:
                item = self.chunks.get(timeout=0.5)
            except queue.Empty:
                if self.is_alive():
                    continue
                raise OSError("the reading thread ended without a word") from None
            if item is _END:
                return
            if cut is not None and isinstance(item, InflateError):
                cut.gzip_error = str(item)
                return
            if isinstance(item, Exception):
                raise item
            if cut is not None:
                cut.text_bytes += len(item)
            yield item


def read(
    path: Path, options_of: Any, cut: Cut | None = None
) -> tuple[Any, SliceResult, list[str]] | None:
    """Decode the trace at ``path`` as it is read: its metadata (a decoded trace with no
    events), its events' table and the warnings of the metadata; or None (see the module
    docstring). Given a ``cut``, a trace cut short gives its complete events and ``cut``
    says where it was cut (``cut.recovered``).

    ``options_of(trace)`` gives the row options for the trace's metadata; they must come out
    the same from the metadata before the events as from all of it.
    """
    reader = _Reader(path, events.PIECE_BYTES)
    reader.start()
    try:
        return _read(path, reader.texts(cut), options_of, cut)
    except (TraceError, InflateError, OSError, ValueError, BufferError):
        return None
    finally:
        reader.stopped.set()
        reader.join()


def _read(
    path: Path, texts: Iterator[bytes], options_of: Any, cut: Cut | None = None
) -> tuple[Any, SliceResult, list[str]] | None:
    found = _head(texts)
    if found is None:
        return None
    head, pending = found
    bare = not head.strip()
    options = options_of(decode(path, b"[]" if bare else head + b"[]}", []))
    builder = TableBuilder(options)
    for piece in _pieces(texts, pending):
        builder.add(piece)
    end = _array_end(pending, bare)
    if end is None and cut is not None:
        return _recovered(path, head, pending, bare, builder, cut)
    if end is None:
        return None
    tail = bytes(pending[end + 1 :])
    del pending[end + 1 :]
    builder.add(pending)
    warnings: list[str] = []
    trace = decode(path, b"[]" if bare else head + b"[]" + tail, warnings)
    result = builder.result()
    final = options_of(trace)
    if final != options:
        # Only distributedInfo after the events is handled: it gives every row its rank.
        changed = {key for key in final if final[key] != options[key]}
        if changed - {"rank", "rank_in_args"} or final["rank_in_args"]:
            return None
        result.table = events.with_rank(result.table, final["rank"])
    return trace, result, warnings


def _recovered(
    path: Path, head: bytes, pending: bytearray, bare: bool, builder: TableBuilder, cut: Cut
) -> tuple[Any, SliceResult, list[str]]:
    """The complete events of a trace cut short: those of ``pending`` (the text after the
    last piece, starting with ``[``) up to the last one that ends before the cut."""
    keep = slices.complete_end(pending, 1)
    cut.dropped_bytes = len(pending) - keep
    del pending[keep:]
    pending += b"]"
    if len(pending) > 2:
        builder.add(memoryview(pending))
    warnings: list[str] = []
    trace = decode(path, b"[]" if bare else head + b"[]}", warnings)
    cut.recovered = True
    return trace, builder.result(), warnings


def _head(texts: Iterator[bytes]) -> tuple[bytes, bytearray] | None:
    """The text before the ``[`` that opens the events, and the text read after it (starting
    with that ``[``); None when the events do not start within :data:`_HEAD_LIMIT`."""
    pending = bytearray()
    for text in texts:
        pending += text
        if slices.events_start(pending) is not None or len(pending) > _HEAD_LIMIT:
            break
    start = slices.events_start(pending)
    if start is None:
        return None
    head = bytes(pending[: start - 1])
    del pending[: start - 1]
    return head, pending


def _pieces(texts: Iterator[bytes], pending: bytearray) -> Iterator[memoryview]:
    """JSON arrays of whole events, each a view of ``pending`` valid until the next is asked
    for; ``pending`` is left holding the text after the last one.

    A piece is not copied: the byte after its last ``}`` is set to ``]`` for the view. Then
    the comma before the next event becomes its ``[`` and the text before it is dropped (in
    place, or by one copy of the text kept when CPython shrinks the buffer).
    """
    enough = min(_FIRST_CHUNK, events.PIECE_BYTES) // 2  # the first piece: small and early
    for text in itertools.chain([b""], texts):  # the text read with the head comes first
        pending += text
        # Text within MAX_TRAILER of the end read so far may be past the events (keys after
        # them can hold arrays of objects): no cut there until the whole file is read.
        upper = len(pending) - slices.MAX_TRAILER
        found = slices.last_between(pending, 0, upper) if upper >= enough else None
        if found is None:
            continue
        end = found.start() + 1  # just after the "}" of the piece's last event
        comma = found.start() + found.group().index(b",")
        pending[end] = ord("]")  # whitespace or the comma itself
        with memoryview(pending) as view, view[: end + 1] as piece:
            yield piece
        pending[comma] = ord("[")
        del pending[:comma]
        enough = events.PIECE_BYTES // 2


def _array_end(text: bytearray, bare: bool) -> int | None:
    """Index of the ``]`` closing the events: the last byte of a bare list, or the one that
    the rest of the trace object follows."""
    if not bare:
        return slices.array_end(text, 1)  # text[0] is the "[" opening the events
    end = slices.text_end(text, 0, len(text)) - 1
    return end if end >= 0 and text[end] == ord("]") else None
