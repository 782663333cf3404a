"""Vectorised protobuf encoding: one message shape, many rows at once, as numpy bytes.

A message is a list of *parts* (tag bytes, varints, fixed64 values, byte strings); each
part is an ``(n, width)`` byte matrix plus the number of bytes each row really uses (0
where the field is absent). :func:`encode` lays the parts side by side and keeps the used
bytes of every row, in order: one boolean compaction yields all rows back to back. Nested
messages are a tag, a varint holding the summed length of their children, and the
children. A batch of a million trace packets thus costs a few numpy passes per field.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import as_strided

WIRE_VARINT, WIRE_FIXED64, WIRE_BYTES = 0, 1, 2
_U64 = np.uint64


def varint_bytes(value: int) -> bytes:
    """The varint encoding of one non-negative integer."""
    out = bytearray()
    while True:
        low = value & 0x7F
        value >>= 7
        if value:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def tag(field: int, wire: int) -> bytes:
    """Encoded key of a field."""
    return varint_bytes(field << 3 | wire)


def as_u64(values: np.ndarray) -> np.ndarray:
    """int64 (two's complement, as protobuf int64 does) or uint64 values as uint64."""
    values = np.asarray(values)
    return values.view(_U64) if values.dtype == np.int64 else values.astype(_U64, copy=False)


@dataclass
class Encoded:
    """Bytes of one field part for every row: ``length[i]`` of row ``i``'s ``data`` are used."""

    data: np.ndarray  # (n, width) uint8, possibly a broadcast view
    length: np.ndarray  # (n,) int64
    tail: tuple[np.ndarray, np.ndarray] | None = None  # (buffer, starts): bytes kept outside


def _masked(length: np.ndarray, mask: np.ndarray | None) -> np.ndarray:
    return length * mask if mask is not None else length


def const(data: bytes, n: int, mask: np.ndarray | None = None) -> Encoded:
    """The same bytes in every (masked) row."""
    row = np.frombuffer(data, dtype=np.uint8)
    length = np.full(n, len(data), dtype=np.int64)
    return Encoded(np.broadcast_to(row, (n, len(data))), _masked(length, mask))


def varint(values: np.ndarray, mask: np.ndarray | None = None) -> Encoded:
    """One varint per (masked) row."""
    v = as_u64(values)
    n = len(v)
    top = int(v[mask].max(initial=0) if mask is not None else v.max(initial=0))
    width = len(varint_bytes(top))
    size = np.ones(n, dtype=np.int64)
    for k in range(1, width):
        size += v >= _U64(1 << (7 * k))
    data = np.empty((n, width), dtype=np.uint8)
    for k in range(width):
        low = ((v >> _U64(7 * k)) & _U64(0x7F)).astype(np.uint8)
        data[:, k] = low | ((size > k + 1).astype(np.uint8) << 7)
    return Encoded(data, _masked(size, mask))


def fixed64(values: np.ndarray, mask: np.ndarray | None = None) -> Encoded:
    """One little-endian 8-byte value per (masked) row."""
    raw = np.ascontiguousarray(as_u64(values).astype("<u8")).view(np.uint8).reshape(-1, 8)
    return Encoded(raw, _masked(np.full(len(raw), 8, dtype=np.int64), mask))


def blob(
    data: np.ndarray, starts: np.ndarray, sizes: np.ndarray, mask: np.ndarray | None = None
) -> Encoded:
    """Row ``i`` is ``data[starts[i]:starts[i] + sizes[i]]``; ``data`` must be followed by at
    least ``max(sizes)`` padding bytes (see :func:`padded`)."""
    sizes = _masked(np.asarray(sizes, dtype=np.int64), mask)
    width = int(sizes.max(initial=0))
    if not width:
        return Encoded(np.zeros((len(sizes), 0), dtype=np.uint8), sizes)
    rows = as_strided(data, shape=(len(data) - width + 1, width), strides=(1, 1), writeable=False)
    return Encoded(rows[np.where(sizes > 0, starts, 0)], sizes)


def tail_blob(
    data: np.ndarray, starts: np.ndarray, sizes: np.ndarray, mask: np.ndarray | None = None
) -> Encoded:
    """Like :func:`blob`, for the last bytes of every row: they are copied straight from
    ``data`` when the rows are laid out, never widened into a matrix."""
    sizes = _masked(np.asarray(sizes, dtype=np.int64), mask)
    tail = (data, np.asarray(starts, dtype=np.int64))
    return Encoded(np.zeros((len(sizes), 0), dtype=np.uint8), sizes, tail)


def padded(data: np.ndarray, pad: int) -> np.ndarray:
    """``data`` followed by ``pad`` zero bytes, as :func:`blob` needs."""
    return np.concatenate([data, np.zeros(pad + 1, dtype=np.uint8)])


def field_varint(field: int, values: np.ndarray, mask: np.ndarray | None = None) -> list[Encoded]:
    """A varint field (int64, uint64, enum, bool)."""
    return [const(tag(field, WIRE_VARINT), len(values), mask), varint(values, mask)]


def field_fixed64(field: int, values: np.ndarray, mask: np.ndarray | None = None) -> list[Encoded]:
    """A fixed64 field."""
    return [const(tag(field, WIRE_FIXED64), len(values), mask), fixed64(values, mask)]


def field_blob(
    field: int,
    data: np.ndarray,
    starts: np.ndarray,
    sizes: np.ndarray,
    mask: np.ndarray | None = None,
    tags: np.ndarray | None = None,
    last: bool = False,
) -> list[Encoded]:
    """A bytes/string field; ``tags`` (a field number per row) lets rows pick their field;
    ``last``: the field closes every row (see :func:`tail_blob`)."""
    n = len(starts)
    body = (tail_blob if last else blob)(data, starts, sizes, mask)
    if tags is None:
        head = const(tag(field, WIRE_BYTES), n, mask)
    else:
        head = varint(np.asarray(tags, dtype=np.int64) << 3 | WIRE_BYTES, mask)
    return [head, varint(body.length, mask), body]


def field_message(
    field: int, children: list[Encoded], n: int, mask: np.ndarray | None = None
) -> list[Encoded]:
    """A nested message field made of ``children`` (already masked to a subset of ``mask``)."""
    body = _masked(message_length(children, n), mask)
    return [const(tag(field, WIRE_BYTES), n, mask), varint(body, mask), *children]


def message_length(parts: list[Encoded], n: int) -> np.ndarray:
    """Encoded length per row of a list of parts."""
    total = np.zeros(n, dtype=np.int64)
    for part in parts:
        total += part.length
    return total


def encode(parts: list[Encoded], n: int) -> np.ndarray:
    """Serialize ``n`` rows of ``parts`` back to back into one uint8 array."""
    tail = parts[-1] if parts and parts[-1].tail is not None else None
    parts = _merge_consts(parts[:-1] if tail is not None else parts)
    if any(p.tail is not None for p in parts):
        raise ValueError("only the last part of a row can be a tail")
    width = sum(p.data.shape[1] for p in parts)
    matrix = np.empty((width, n), dtype=np.uint8)  # transposed: each part fills whole rows
    used = np.empty((width, n), dtype=bool)
    col = 0
    for part in parts:
        data, length = part.data, part.length
        for k in range(data.shape[1]):
            column = data[:, k]
            if column.strides == (0,):
                matrix[col] = column[0] if n else 0
            else:
                matrix[col] = column
            np.greater(length, k, out=used[col])
            col += 1
    rows = np.ascontiguousarray(matrix.T).ravel()  # row-major again, then keep the used bytes
    head = rows[np.flatnonzero(np.ascontiguousarray(used.T))]
    if tail is None:
        return head
    buffer, starts = tail.tail  # type: ignore[misc]
    return _append_tails(
        head, message_length(parts, n), gather_slices(buffer, starts, tail.length), tail.length
    )


def _append_tails(
    head: np.ndarray, head_sizes: np.ndarray, tails: np.ndarray, tail_sizes: np.ndarray
) -> np.ndarray:
    """Rows ``head_i + tail_i`` from the heads and the tails, each laid out back to back."""
    before = np.cumsum(tail_sizes) - tail_sizes  # tail bytes of the rows before
    row_end = np.cumsum(head_sizes) + before  # where each row's tail goes
    within = np.arange(len(tails), dtype=np.int64) - np.repeat(before, tail_sizes)
    at = np.repeat(row_end, tail_sizes) + within
    out = np.empty(len(head) + len(tails), dtype=np.uint8)
    keep = np.ones(len(out), dtype=bool)
    keep[at] = False
    out[at] = tails
    out[keep] = head
    return out


def gather_slices(buf: np.ndarray, off: np.ndarray, size: np.ndarray) -> np.ndarray:
    """The slices ``buf[off[i]:off[i]+size[i]]`` concatenated."""
    size = np.asarray(size, dtype=np.int64)
    keep = np.flatnonzero(size > 0)
    off, size = np.asarray(off, dtype=np.int64)[keep], size[keep]
    total = int(size.sum())
    if not total:
        return np.empty(0, dtype=np.uint8)
    step = np.ones(total, dtype=np.int64)  # +1 within a slice, a jump at each slice start
    starts = np.cumsum(size) - size
    step[starts[1:]] = off[1:] - (off[:-1] + size[:-1] - 1)
    step[0] = off[0]
    return buf[np.cumsum(step)]


def _merge_consts(parts: list[Encoded]) -> list[Encoded]:
    """Fuse neighbouring constant parts present in the same rows into one."""
    out: list[Encoded] = []
    for part in parts:
        prev = out[-1] if out else None
        if (
            prev is not None
            and _is_const(prev)
            and _is_const(part)
            and np.array_equal(prev.length > 0, part.length > 0)
        ):
            row = np.concatenate([prev.data[0], part.data[0]]) if len(part.length) else prev.data[0]
            length = (prev.length > 0) * len(row)
            out[-1] = Encoded(np.broadcast_to(row, (len(part.length), len(row))), length)
        else:
            out.append(part)
    return out


def _is_const(part: Encoded) -> bool:
    return (
        part.data.strides[0] == 0
        and len(part.length) > 0
        and bool(np.all((part.length == 0) | (part.length == part.data.shape[1])))
    )
