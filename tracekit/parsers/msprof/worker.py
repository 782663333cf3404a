"""``python -m tracekit.parsers.msprof.worker``: read one slice of an msprof timeline.

Reads a line of JSON (``path``, ``start`` and ``size`` of the slice in a plain file, or only
``size`` with the slice following on stdin), answers the slice's summary, reads the roles and
thread names of the whole file, and answers the slice's layers (see :mod:`.parallel`).
"""

from __future__ import annotations

import gc
import json
import sys
from pathlib import Path

from tracekit.parsers.kineto.chunks import read_slice
from tracekit.parsers.msprof.parallel import receive, send
from tracekit.parsers.msprof.trace_decode import decode_bytes
from tracekit.parsers.msprof.trace_json import layers_of, scan


def main() -> int:
    """Entry point of a worker process."""
    gc.disable()  # a short-lived process building many objects: reference counting suffices
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    header = json.loads(stdin.readline())
    if "path" in header:
        with open(header["path"], "rb") as fh:
            fh.seek(header["start"])
            text = read_slice(fh, header["size"])
    else:
        text = read_slice(stdin, header["size"])
    part = scan(decode_bytes(Path("<slice>"), text))
    del text
    send(stdout, part.summary)
    roles, threads, include_python = receive(stdin)
    send(stdout, layers_of(part, roles, threads, include_python))
    return 0


if __name__ == "__main__":
    sys.exit(main())
