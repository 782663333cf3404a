"""Recognise a Perfetto protobuf trace from its first bytes.

A ``Trace`` starts with field 1, wire type 2 (byte 0x0a), a varint length and a
``TracePacket``. The packet must parse against the TracePacket descriptor: known field
numbers with their declared wire types, nested messages checked two levels down, and its
bytes must not all be printable text; the next packet, when the head holds it, starts
with 0x0a too. Other protobuf files (descriptor sets, for example) fail the field check.
"""

from __future__ import annotations

from typing import Any

from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

_FD = type(pb.TracePacket.DESCRIPTOR.fields[0])
_FIXED64 = {_FD.TYPE_FIXED64, _FD.TYPE_SFIXED64, _FD.TYPE_DOUBLE}
_FIXED32 = {_FD.TYPE_FIXED32, _FD.TYPE_SFIXED32, _FD.TYPE_FLOAT}
_LENGTH = {_FD.TYPE_MESSAGE, _FD.TYPE_STRING, _FD.TYPE_BYTES}
_TEXT = frozenset(range(0x20, 0x7F)) | {0x09, 0x0A, 0x0D}
DEPTH = 2


def _varint(buf: bytes, pos: int) -> tuple[int, int] | None:
    value = shift = 0
    while pos < len(buf) and shift < 64:
        byte = buf[pos]
        value |= (byte & 0x7F) << shift
        pos += 1
        if not byte & 0x80:
            return value, pos
        shift += 7
    return None


def _expected_wire(field: Any) -> int:
    kind = field.type
    return 2 if kind in _LENGTH else 1 if kind in _FIXED64 else 5 if kind in _FIXED32 else 0


def _valid(buf: bytes, pos: int, end: int, message: Any, depth: int) -> bool:
    """Whether ``buf[pos:end]`` parses as ``message`` (a cut at the end of ``buf`` is fine)."""
    fields = message.fields_by_number
    while pos < end:
        key = _varint(buf, pos)
        if key is None:
            return pos >= len(buf)
        field, wire, pos = fields.get(key[0] >> 3), key[0] & 7, key[1]
        if field is None:
            return False
        expected = _expected_wire(field)
        packed = wire == 2 and field.is_repeated and expected != 2
        if wire != expected and not packed:
            return False
        if wire in (0, 2):
            value = _varint(buf, pos)
            if value is None:
                return pos >= len(buf)
            pos = value[1]
            if wire == 2:
                stop = pos + value[0]
                if stop > end and end < len(buf):
                    return False
                nested = field.type == _FD.TYPE_MESSAGE and not packed
                if (
                    nested
                    and depth
                    and not _valid(buf, pos, min(stop, len(buf)), field.message_type, depth - 1)
                ):
                    return False
                pos = stop
        elif wire in (1, 5):
            pos += 8 if wire == 1 else 4
        else:
            return False
    return pos == end or end >= len(buf)


def looks_like_trace(head: bytes, size: int) -> bool:
    """Whether ``head`` (the first bytes of a ``size``-byte file) starts a Perfetto trace."""
    if not head.startswith(b"\x0a"):
        return False
    got = _varint(head, 1)
    if got is None or got[0] == 0 or got[1] + got[0] > size:
        return False
    length, pos = got
    end = pos + length
    if set(head[pos : min(end, len(head))]) <= _TEXT:
        return False
    if not _valid(head, pos, end, pb.TracePacket.DESCRIPTOR, DEPTH):
        return False
    return end >= len(head) or head[end] == 0x0A
