"""How tracekit lays a timeline out in a Perfetto trace; shared by the writer and reader."""

from __future__ import annotations

import json
from typing import Any

from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

from tracekit.pftrace import SUFFIXES

GZIP_SUFFIXES = tuple(s + ".gz" for s in SUFFIXES)
VERSION = 1
SEQUENCE = 1  # trusted_packet_sequence_id of everything tracekit writes

CLOCK_REALTIME = 1
CLOCK_BOOTTIME = 6
CLOCK_NAMES = {
    1: "REALTIME",
    2: "REALTIME_COARSE",
    3: "MONOTONIC",
    4: "MONOTONIC_COARSE",
    5: "MONOTONIC_RAW",
    6: "BOOTTIME",
}

SEQ_CLEARED = pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
SEQ_NEEDS = pb.TracePacket.SEQ_NEEDS_INCREMENTAL_STATE
SLICE_BEGIN = pb.TrackEvent.TYPE_SLICE_BEGIN
SLICE_END = pb.TrackEvent.TYPE_SLICE_END
INSTANT = pb.TrackEvent.TYPE_INSTANT
COUNTER = pb.TrackEvent.TYPE_COUNTER

# Debug annotations that carry timeline fields on every slice tracekit writes.
ANN_CORR, ANN_ENGINE, ANN_ARGS = "corr", "engine", "args"
ANNOTATIONS = (ANN_CORR, ANN_ENGINE, ANN_ARGS)

# The metadata packet: one instant on a track of its own, its JSON in one annotation.
META_TRACK = "tracekit"
META_EVENT = "tracekit metadata"
META_ANNOTATION = "tracekit"

# Row tracks carry their timeline fields in the track description: "tracekit {json}".
TRACK_PREFIX = "tracekit "
TRACK_FIELDS = ("rank", "device", "stream", "pid", "tid")


def track_description(key: tuple[Any, ...]) -> str:
    """Description of a row track: the timeline fields shared by all of its rows."""
    return TRACK_PREFIX + json.dumps(dict(zip(TRACK_FIELDS, key)), separators=(",", ":"))


def parse_track_description(text: str) -> tuple[Any, ...] | None:
    """The timeline fields of a track tracekit wrote, or None for any other track."""
    if not text.startswith(TRACK_PREFIX):
        return None
    try:
        fields = json.loads(text[len(TRACK_PREFIX) :])
    except ValueError:
        return None
    if not isinstance(fields, dict) or not all(f in fields for f in TRACK_FIELDS):
        return None
    values = tuple(fields[f] for f in TRACK_FIELDS)
    if not all(v is None or (isinstance(v, int) and not isinstance(v, bool)) for v in values):
        return None
    return values
