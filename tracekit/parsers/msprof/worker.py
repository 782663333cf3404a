"""``python -m tracekit.parsers.msprof.worker``: read one slice of an msprof timeline.

Reads a line of JSON (``path``, ``start`` and ``size`` of the slice in a plain file, or only
``size`` with the slice following on stdin), answers the slice's summary, reads the roles and
thread names of the whole file and the folder to write the slice's layers to, writes them
(:mod:`.part_io`) and says so (see :mod:`.parallel`).
"""

from __future__ import annotations

import gc
import json
import os
import sys
from pathlib import Path

from tracekit.parsers.kineto.chunks import Slice, map_slice, read_slice
from tracekit.parsers.msprof.parallel import receive, send
from tracekit.parsers.msprof.part_io import save_part
from tracekit.parsers.msprof.trace_decode import decode_bytes
from tracekit.parsers.msprof.trace_json import layers_of, scan


def main() -> None:
    """Entry point of a worker process."""
    gc.disable()  # a short-lived process building many objects: reference counting suffices
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    header = json.loads(stdin.readline())
    if "path" in header:
        piece = Slice(header["start"], header["start"] + header["size"])
        mapped, view = map_slice(header["path"], piece, first=False)
        part = scan(decode_bytes(Path("<slice>"), view))
        view.release()
        mapped.close()
    else:
        part = scan(decode_bytes(Path("<slice>"), read_slice(stdin, header["size"])))
    send(stdout, part.summary)
    roles, threads, include_python, target = receive(stdin)
    save_part(layers_of(part, roles, threads, include_python), Path(target))
    send(stdout, True)
    os._exit(0)  # the answer is written: skip freeing millions of event objects one by one


if __name__ == "__main__":
    main()
