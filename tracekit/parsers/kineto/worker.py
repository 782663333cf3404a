"""``python -m tracekit.parsers.kineto.worker``: decode one slice of Kineto events.

Reads a line of JSON options, then a slice of whole events (``{...}, {...}``, maybe after a
comma) on stdin, and writes the timeline table (Arrow IPC) on stdout.
"""

from __future__ import annotations

import gc
import json
import sys
from typing import BinaryIO

from tracekit.parsers.kineto.chunks import write_result
from tracekit.parsers.kineto.events import events_table


def _read_array(stream: BinaryIO, size: int) -> bytearray:
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


def main() -> int:
    """Entry point of a worker process."""
    gc.disable()  # a short-lived process building many objects: reference counting suffices
    stdin = sys.stdin.buffer
    options = json.loads(stdin.readline())
    size = options.pop("size")
    table, columns, warnings = events_table(_read_array(stdin, size), **options)
    write_result(sys.stdout.buffer, table, columns.repairs, columns.unknown, warnings)
    sys.stdout.buffer.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
