"""``python -m tracekit.parsers.msprof.worker``: read one slice of an msprof timeline.

Receives the slice (``path``, ``start`` and ``size`` of it in a plain file, which it maps, or
only ``size`` with the slice's bytes following), answers the slice's summary, receives the
roles and thread names of the whole file and answers the slice's layers (see
:mod:`.trace_parallel`, :mod:`tracekit.parsers.workers`).
"""

from __future__ import annotations

from pathlib import Path

from tracekit.parsers.msprof.trace_decode import decode_bytes
from tracekit.parsers.msprof.trace_json import layers_of, scan
from tracekit.parsers.slices import Slice, mapped_slice, read_slice
from tracekit.parsers.workers import Parent, serve

SLICE = Path("<slice>")


def main(parent: Parent) -> None:
    """Read the slice the parent names and answer in two steps."""
    header = parent.receive()
    if "path" in header:
        piece = Slice(header["start"], header["start"] + header["size"])
        with mapped_slice(Path(header["path"]), piece, first=False) as view:
            events = decode_bytes(SLICE, view)
    else:
        events = decode_bytes(SLICE, read_slice(parent.input, header["size"]))
    part = scan(events)
    parent.send(part.summary)
    (roles, threads, include_python), folder = parent.receive()
    parent.answer(folder, layers_of(part, roles, threads, include_python))


if __name__ == "__main__":
    serve(main)
