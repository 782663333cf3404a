"""``python -m tracekit.parsers.kineto.worker OPTIONS``: decode one slice of Kineto events.

Reads a JSON array of events on stdin and writes the timeline table (Arrow IPC) on stdout.
"""

from __future__ import annotations

import json
import sys

from tracekit.parsers.kineto.chunks import encode_result
from tracekit.parsers.kineto.events import events_table


def main() -> int:
    """Entry point of a worker process."""
    options = json.loads(sys.argv[1])
    data = sys.stdin.buffer.read()
    table, columns, warnings = events_table(data, **options)
    sys.stdout.buffer.write(encode_result(table, columns.repairs, columns.unknown, warnings))
    sys.stdout.buffer.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
