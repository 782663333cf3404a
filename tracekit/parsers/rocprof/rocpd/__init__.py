"""rocprofiler-sdk rocpd SQLite databases (``rocprofv3 --output-format rocpd``, schema 3).

:mod:`.database` finds the uuid sets of tables and reads them, :mod:`.tables` reads one set
in bulk, :mod:`.info` turns its info tables into devices and categories, :mod:`.rows` makes
the timeline rows. The events table comes from
:func:`tracekit.parsers.rocprof.table.events_table` (``assemble``, then ts 0 at the first event).
"""

from __future__ import annotations

from tracekit.parsers.base import Parser
from tracekit.parsers.rocprof.rocpd import database

ROCPD = Parser(
    "rocpd", "rocprofv3 rocpd SQLite database (schema 3)", database.sniff, database.parse
)
