"""``python -m tracekit.parsers.kineto.worker PATH``: decode one slice of a Kineto trace.

Reads one line of JSON on stdin (the byte range of its slice in the file's text, the row
options and the file to write its table to, see :mod:`.procs`), then reads PATH itself: maps
it when it is plain JSON, inflates it up to the slice's end when it is gzip, keeping only the
text from the slice's start.
"""

from __future__ import annotations

import gc
import json
import mmap
import os
import sys
from pathlib import Path
from typing import Any

from tracekit.parsers.kineto.chunks import Slice
from tracekit.parsers.kineto.decode import GZIP_MAGIC, gzip_chunks
from tracekit.parsers.kineto.events import piece_table
from tracekit.parsers.kineto.procs import write_result

CHUNK = 8 << 20  # inflated at a time; text before the slice is dropped chunk by chunk


def _text(path: Path, piece: Slice) -> tuple[Any, Slice]:
    """The part of the file's JSON text that holds ``piece``, and where ``piece`` lies in it:
    a mapping of a plain file (not read), or the inflated text from the chunk where ``piece``
    starts to the one where it ends."""
    with path.open("rb") as fh:
        if fh.read(2) != GZIP_MAGIC:
            try:
                return mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ), piece
            except (OSError, ValueError):  # a file system that cannot map files
                fh.seek(piece.start)
                return fh.read(piece.stop - piece.start), Slice(0, piece.stop - piece.start)
    kept, base, offset = bytearray(), 0, 0
    for text in gzip_chunks(path.read_bytes(), CHUNK):
        if offset + len(text) > piece.start:
            if not kept:  # the chunk where the slice starts
                base = offset
            kept += text
        offset += len(text)
        if offset >= piece.stop:
            break
    return kept, Slice(piece.start - base, piece.stop - base)


def main() -> int:
    """Entry point of a worker process."""
    gc.disable()  # a short-lived process building many objects: reference counting suffices
    path = Path(sys.argv[1])
    options = json.loads(sys.stdin.buffer.readline())
    text, piece = _text(path, Slice(options.pop("start"), options.pop("stop")))
    out = Path(options.pop("out"))
    write_result(out, piece_table(text, piece, **options))
    os._exit(0)  # the answer is written: skip freeing what is left one object at a time


if __name__ == "__main__":
    sys.exit(main())
