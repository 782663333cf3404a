"""Python values of the structured debug annotations (nested, dict, array, proto)."""

from __future__ import annotations

from typing import Any

from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb


def annotation_value(note: pb.DebugAnnotation) -> Any:
    """The value of one annotation as plain JSON-able Python (interned strings stay ids)."""
    if note.dict_entries:
        return {_text(e.name) or f"arg{e.name_iid}": annotation_value(e) for e in note.dict_entries}
    if note.array_values:
        return [annotation_value(e) for e in note.array_values]
    what = note.WhichOneof("value")
    if what is None:
        return None
    if what == "nested_value":
        return _nested(note.nested_value)
    if what == "proto_value":
        return f"<proto {len(note.proto_value)} bytes>"
    return _text(getattr(note, what))


def _nested(value: pb.DebugAnnotation.NestedValue) -> Any:
    kind = value.nested_type
    if kind == value.DICT:
        return {_text(k): _nested(v) for k, v in zip(value.dict_keys, value.dict_values)}
    if kind == value.ARRAY:
        return [_nested(v) for v in value.array_values]
    for name in ("int_value", "double_value", "bool_value", "string_value"):
        if value.HasField(name):
            return _text(getattr(value, name))
    return None


def _text(value: Any) -> Any:
    """Text of a string field (upb hands out bytes when a proto2 string is not UTF-8)."""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value
