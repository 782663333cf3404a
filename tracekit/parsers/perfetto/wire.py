"""Vectorised protobuf wire decoding: the fields of many small messages at once.

:func:`frames` splits a ``Trace`` into its packets (upb does the walk, through a message
type that declares ``packet`` as plain bytes). :func:`decode` then reads the fields of all
packets, or of all nested messages of one kind, in lock step: each round reads one field
of every message that still has bytes left, so the Python cost is per round, not per
message. Messages with more fields than ``max_rounds`` are reported back for the slow
path instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np
import pyarrow as pa
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from numpy.lib.stride_tricks import as_strided

from tracekit.pftrace.protoenc import gather_slices

_U64 = np.uint64


class WireError(ValueError):
    """The bytes are not well-formed protobuf (truncated or corrupt)."""


@cache
def _frames_class() -> Any:
    """``message Frames { repeated bytes packet = 1; }``, built at run time."""
    proto = descriptor_pb2.FileDescriptorProto(
        name="tracekit_frames.proto", package="tracekit_frames", syntax="proto2"
    )
    message = proto.message_type.add(name="Frames")
    field = descriptor_pb2.FieldDescriptorProto
    message.field.add(name="packet", number=1, type=field.TYPE_BYTES, label=field.LABEL_REPEATED)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("tracekit_frames.Frames"))


def frames(data: bytes) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The packets of a serialized ``Trace``: one buffer, start offsets and sizes.

    Raises ``google.protobuf.message.DecodeError`` for a truncated or corrupt trace.
    """
    packets = list(_frames_class().FromString(data).packet)
    sizes = np.fromiter(map(len, packets), dtype=np.int64, count=len(packets))
    return padded(b"".join(packets)), np.cumsum(sizes) - sizes, sizes


PAD = 16  # zero bytes after every buffer, so that 8-byte loads never run off its end
_HIGH = _U64(0x8080808080808080)
_LOW7 = _U64(0x7F7F7F7F7F7F7F7F)


def padded(data: bytes | np.ndarray) -> np.ndarray:
    """A byte buffer as uint8 followed by :data:`PAD` zero bytes."""
    raw = np.frombuffer(data, dtype=np.uint8) if isinstance(data, bytes) else data
    return np.concatenate([raw, np.zeros(PAD, dtype=np.uint8)])


def load8(buf: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """The 8 bytes at each of ``pos`` as little-endian uint64 (``buf`` must be padded)."""
    rows = as_strided(buf, shape=(len(buf) - 7, 8), strides=(1, 1), writeable=False)
    return rows[pos].view("<u8").ravel().astype(_U64, copy=False)


def varints(buf: np.ndarray, pos: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Values (uint64) of the varints at ``pos`` and the position after each."""
    if not len(pos):
        return np.zeros(0, dtype=_U64), pos + 1
    if (pos >= end).any():
        raise WireError("field runs past the end of its message")
    byte = buf[pos]
    value = byte.astype(_U64)
    nxt = pos + 1
    more = np.flatnonzero(byte >= 0x80)
    if not len(more):
        return value, nxt
    at = pos[more]
    got, size = _decode8(load8(buf, at))
    long = np.flatnonzero(size == 0)
    if len(long):  # 9 or 10 bytes
        b8 = buf[at[long] + 8].astype(_U64)
        b9 = buf[at[long] + 9].astype(_U64)
        if ((b8 >= 0x80) & (b9 > 1)).any():
            raise WireError("malformed varint")
        got[long] |= (b8 & _U64(0x7F)) << _U64(56) | (b9 << _U64(63)) * (b8 >> _U64(7))
        size[long] = 9 + (b8 >= 0x80)
    if (at + size > end[more]).any():
        raise WireError("varint runs past the end of its message")
    value[more] = got
    nxt[more] = at + size
    return value, nxt


_PAIRS = (
    (_U64(0x007F007F007F007F), _U64(0x7F007F007F007F00), _U64(1)),
    (_U64(0x00003FFF00003FFF), _U64(0x3FFF00003FFF0000), _U64(2)),
    (_U64(0x000000000FFFFFFF), _U64(0x0FFFFFFF00000000), _U64(4)),
)


def _decode8(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Varints within the 8 bytes of each ``x``: value and size (size 0: longer than 8)."""
    stops = np.bitwise_and(np.invert(x), _HIGH)
    low = np.negative(stops)  # two's complement: isolates the lowest set bit with ``& stops``
    low &= stops
    mask = low - _U64(1)
    size = np.bitwise_count(x & _HIGH & mask).astype(np.int64) + 1
    size[low == 0] = 0
    mask |= low
    mask &= _LOW7
    mask &= x
    for keep, move, shift in _PAIRS:  # squeeze out the continuation bits, 3 steps
        high = mask & move
        high >>= shift
        mask &= keep
        mask |= high
    return mask, size


def fixed(buf: np.ndarray, pos: np.ndarray, width: int) -> np.ndarray:
    """Little-endian fixed64/fixed32 values at ``pos`` as uint64."""
    value = load8(buf, pos)
    return value if width == 8 else value & _U64(0xFFFFFFFF)


@dataclass
class Fields:
    """Fields of many messages: message index, field number, wire type, value, size.

    ``value`` is the number for varint/fixed fields and the payload offset in the buffer
    for length-delimited ones, whose payload length is ``size``.
    """

    msg: np.ndarray
    number: np.ndarray
    wire: np.ndarray
    value: np.ndarray
    size: np.ndarray

    def where(self, number: int, wire: int | None = None) -> np.ndarray:
        """Positions of the fields with this number (and wire type)."""
        hit = self.number == number
        if wire is not None:
            hit &= self.wire == wire
        return np.flatnonzero(hit)

    def having(self, numbers: set[int]) -> np.ndarray:
        """Mask of the fields whose number is in ``numbers``."""
        cap = max(numbers, default=0) + 1
        table = np.zeros(cap + 1, dtype=bool)
        table[list(numbers)] = True
        return table[np.minimum(self.number, cap)]


def decode(
    buf: np.ndarray, starts: np.ndarray, sizes: np.ndarray, max_rounds: int = 64
) -> tuple[Fields, np.ndarray]:
    """All fields of the messages ``buf[starts[i]:starts[i]+sizes[i]]`` (grouped by round, so
    each message's fields stay in order); and the messages unfinished after ``max_rounds``."""
    cur = starts.astype(np.int64)
    end = cur + sizes
    active = np.flatnonzero(sizes > 0)
    cur, end = cur[active], end[active]
    parts: list[tuple[np.ndarray, ...]] = []
    for _ in range(max_rounds):
        if not len(active):
            break
        key, pos = varints(buf, cur, end)
        wire = (key & _U64(7)).astype(np.int8)
        number = key >> _U64(3)
        if ((wire == 3) | (wire == 4) | (wire > 5) | (number == 0) | (number >= 1 << 29)).any():
            raise WireError("corrupt field key (or unsupported group wire type)")
        value = np.zeros(len(active), dtype=_U64)
        size = np.zeros(len(active), dtype=np.int64)
        nxt = pos.copy()
        sel = np.flatnonzero((wire == 0) | (wire == 2))  # a varint (value or length) follows
        got, after = varints(buf, pos[sel], end[sel])
        value[sel] = got
        nxt[sel] = after
        blobs = np.flatnonzero(wire == 2)
        if len(blobs):
            size[blobs] = value[blobs].view(np.int64)
            value[blobs] = nxt[blobs].view(_U64)
            nxt[blobs] += size[blobs]
        for code, width in ((1, 8), (5, 4)):
            fixed_at = np.flatnonzero(wire == code)
            if len(fixed_at):
                if (pos[fixed_at] + width > end[fixed_at]).any():
                    raise WireError("fixed-width field runs past the end of its message")
                value[fixed_at] = fixed(buf, pos[fixed_at], width)
                nxt[fixed_at] = pos[fixed_at] + width
        more = nxt < end
        if (nxt > end).any():
            raise WireError("field runs past the end of its message")
        parts.append((active, number.astype(np.int32), wire, value, size))
        active, cur, end = active[more], nxt[more], end[more]
    if parts:  # in round order: a message's fields keep their order
        fields = Fields(*(np.concatenate(c) for c in zip(*parts)))
    else:
        empty = np.empty(0, dtype=np.int64)
        fields = Fields(empty, empty, empty.astype(np.int8), np.empty(0, _U64), empty)
    return fields, active


def strings(buf: np.ndarray, off: np.ndarray, size: np.ndarray) -> pa.Array:
    """The byte slices ``buf[off:off+size]`` as an Arrow string array (invalid UTF-8 replaced)."""
    data = gather_slices(buf, off, size)
    offsets = np.concatenate([[0], np.cumsum(size.astype(np.int64))])
    arr = pa.LargeStringArray.from_buffers(len(size), pa.py_buffer(offsets), pa.py_buffer(data))
    try:
        arr.validate(full=True)
    except pa.ArrowInvalid:
        buffers = [None, pa.py_buffer(offsets), pa.py_buffer(data)]
        raw = pa.Array.from_buffers(pa.large_binary(), len(size), buffers)
        arr = pa.array([b.decode("utf-8", "replace") for b in raw.to_pylist()], pa.large_string())
    return arr.cast(pa.string())
