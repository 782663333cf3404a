"""Field numbers of the Perfetto protobuf messages tracekit reads column-wise, taken from the
``perfetto`` package's own descriptors (never typed in by hand)."""

from __future__ import annotations

from typing import Any

from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb


def _numbers(message: Any, *names: str) -> list[int]:
    fields = message.DESCRIPTOR.fields_by_name
    return [fields[n].number for n in names]


P_TS, P_CLOCK, P_SEQ, P_FLAGS, P_CLEARED, P_DROPPED, P_EVENT, P_COMPRESSED = _numbers(
    pb.TracePacket,
    "timestamp",
    "timestamp_clock_id",
    "trusted_packet_sequence_id",
    "sequence_flags",
    "incremental_state_cleared",
    "previous_packet_dropped",
    "track_event",
    "compressed_packets",
)
STATE = set(
    _numbers(
        pb.TracePacket,
        "interned_data",
        "trace_packet_defaults",
        "track_descriptor",
        "clock_snapshot",
        "thread_descriptor",
        "process_descriptor",
    )
)
QUIET = {
    P_TS,
    P_CLOCK,
    P_SEQ,
    P_FLAGS,
    P_CLEARED,
    P_DROPPED,
    P_EVENT,
    *_numbers(
        pb.TracePacket,
        "trusted_uid",
        "trusted_pid",
        "first_packet_on_sequence",
        "machine_id",
        "synchronization_marker",
        "trace_uuid",
    ),
}
E_TYPE, E_TRACK, E_NAME_IID, E_NAME, E_CAT_IID, E_CAT, E_NOTE, E_CORR, E_LEGACY = _numbers(
    pb.TrackEvent,
    "type",
    "track_uuid",
    "name_iid",
    "name",
    "category_iids",
    "categories",
    "debug_annotations",
    "correlation_id",
    "legacy_event",
)
E_US = set(_numbers(pb.TrackEvent, "timestamp_delta_us", "timestamp_absolute_us"))
A_NAME_IID, A_NAME, A_STR_IID = _numbers(pb.DebugAnnotation, "name_iid", "name", "string_value_iid")
# value fields read column-wise -> kind code: bool, uint, int, double, pointer, string, json
A_VALUES = dict(
    zip(
        _numbers(
            pb.DebugAnnotation,
            "bool_value",
            "uint_value",
            "int_value",
            "double_value",
            "pointer_value",
            "string_value",
            "legacy_json_value",
        ),
        range(1, 8),
    )
)
A_KIND_STR_IID, A_KIND_OBJECT = 8, 9
PACKET_NAMES = {f.number: f.name for f in pb.TracePacket.DESCRIPTOR.fields}
