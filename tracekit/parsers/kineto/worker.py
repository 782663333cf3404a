"""``python -m tracekit.parsers.kineto.worker``: decode one slice of Kineto events.

Reads a line of JSON options, then a slice of whole events (``{...}, {...}``, maybe after a
comma) on stdin, and writes the timeline table (Arrow IPC) on stdout.
"""

from __future__ import annotations

import json
import sys

from tracekit.parsers.kineto.chunks import encode_result
from tracekit.parsers.kineto.events import events_table


def main() -> int:
    """Entry point of a worker process."""
    stdin = sys.stdin.buffer
    options = json.loads(stdin.readline())
    text = stdin.read().lstrip().removeprefix(b",")
    table, columns, warnings = events_table(b"[" + text + b"]", **options)
    sys.stdout.buffer.write(encode_result(table, columns.repairs, columns.unknown, warnings))
    sys.stdout.buffer.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
