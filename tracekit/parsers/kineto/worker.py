"""``python -m tracekit.parsers.kineto.worker``: decode one slice of Kineto events.

Reads a line of JSON options, then a slice of whole events (``{...}, {...}``, maybe after a
comma) on stdin, and writes the timeline table (Arrow IPC) on stdout.
"""

from __future__ import annotations

import gc
import json
import sys

from tracekit.parsers.kineto.chunks import read_slice, write_result
from tracekit.parsers.kineto.events import events_table


def main() -> int:
    """Entry point of a worker process."""
    gc.disable()  # a short-lived process building many objects: reference counting suffices
    stdin = sys.stdin.buffer
    options = json.loads(stdin.readline())
    size = options.pop("size")
    result = events_table(read_slice(stdin, size), **options)
    write_result(sys.stdout.buffer, result.table, result.repairs, result.unknown, result.warnings)
    sys.stdout.buffer.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
