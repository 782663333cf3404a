"""rocmProfileData (``rpd_tracer``): the ``.rpd`` SQLite file, plain or gzipped
(:mod:`.database`, tables read by :mod:`.tables`, rows by :mod:`.rows`), and the Chrome-trace
JSON its ``rpd2tracing.py`` writes (:mod:`.json_trace`, rows by :mod:`.json_rows`). Both
reach the events table through :func:`tracekit.parsers.rocprof.table.events_table` (``assemble``,
then ts 0 at the first event of the tracer's CLOCK_MONOTONIC).
"""

from __future__ import annotations

from tracekit.parsers.base import Parser
from tracekit.parsers.rocprof.rpd import database, json_trace

RPD = Parser(
    "rpd",
    "rocmProfileData .rpd SQLite (rpd_tracer; schema v1-v3, .rpd.gz too)",
    database.sniff,
    database.parse,
)
RPD_JSON = Parser(
    "rpd-json",
    "rocmProfileData rpd2tracing.py Chrome-trace JSON (.json, .gz)",
    json_trace.sniff,
    json_trace.parse,
)
