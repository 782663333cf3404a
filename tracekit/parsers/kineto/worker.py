"""``python -m tracekit.parsers.kineto.worker PATH``: decode one slice of a Kineto trace.

Receives the byte range of its slice in the file's text and the row options (see
:mod:`.read`), reads PATH itself (:func:`~tracekit.parsers.slices.file_slice`: mapped when it is
plain JSON, inflated up to the slice's end when it is gzip, keeping only the text from the
slice's start) and answers the slice's table (:mod:`tracekit.parsers.workers`).
"""

from __future__ import annotations

import sys
from pathlib import Path

from tracekit.parsers.kineto.events import piece_table
from tracekit.parsers.slices import Slice, file_slice
from tracekit.parsers.workers import Parent, serve

CHUNK = 8 << 20  # inflated at a time; text before the slice is dropped chunk by chunk


def main(parent: Parent) -> None:
    """Decode the slice the parent names and answer its table."""
    request, folder = parent.receive()
    path = Path(sys.argv[1])
    text, piece = file_slice(path, Slice(request["start"], request["stop"]), CHUNK)
    parent.answer(folder, piece_table(text, piece, **request["options"]))


if __name__ == "__main__":
    serve(main)
