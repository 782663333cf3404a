"""Perfetto protobuf traces (``.pftrace``, ``.perfetto-trace``, also gzip-compressed).

Reads the TrackEvent part of a ``Trace``: track/process/thread descriptors, slice begin/end
(paired per track as a stack), instants and legacy complete events, interned names,
categories and annotation names with per-sequence incremental state, clock snapshots and
packet clocks (incremental ones too), and zlib-compressed packets; counters, ftrace and the
other data sources are skipped and counted in the warnings. No trace_processor is needed:
the state-carrying packets are parsed with the protobuf classes of the ``perfetto``
package, the track events (millions) column-wise with numpy (:mod:`.wire`), field numbers
taken from the same classes' descriptors.

A file written by :func:`tracekit.export.pftrace.write_pftrace` (``tracekit convert TRACE
-o out.pftrace``) reads back to the same rows and metadata; other files (rocprofv3
``--output-format pftrace``, Perfetto SDK apps) load best-effort as described in
:mod:`.foreign`.
"""

from __future__ import annotations

from tracekit.parsers.base import Parser
from tracekit.parsers.perfetto.parse import parse, sniff
from tracekit.parsers.perfetto.sniff import looks_like_trace

PERFETTO = Parser(
    "perfetto",
    "Perfetto protobuf trace (.pftrace, .perfetto-trace; rocprofv3, Perfetto SDK, tracekit)",
    sniff,
    parse,
)

__all__ = ["PERFETTO", "looks_like_trace", "parse", "sniff"]
