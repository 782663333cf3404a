"""Decode a Perfetto trace into columns: track events, their debug annotations, and the
per-sequence state they refer to.

The packets that carry state (interned strings, packet defaults, track and thread
descriptors, clock snapshots, compressed packets) are few: they are parsed one by one
with the ``perfetto`` package's protobuf classes. Track events, the bulk of a trace, are
read column-wise by :mod:`.wire`. :mod:`.resolve` applies the state to the events.
"""

from __future__ import annotations

import json
import zlib
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

from tracekit.parsers.perfetto import wire
from tracekit.parsers.perfetto.fields import (
    A_KIND_OBJECT,
    A_KIND_STR_IID,
    A_NAME,
    A_NAME_IID,
    A_STR_IID,
    A_VALUES,
    E_CAT,
    E_CAT_IID,
    E_CORR,
    E_LEGACY,
    E_NAME,
    E_NAME_IID,
    E_NOTE,
    E_TRACK,
    E_TYPE,
    E_US,
    P_CLEARED,
    P_CLOCK,
    P_COMPRESSED,
    P_DROPPED,
    P_EVENT,
    P_FLAGS,
    P_SEQ,
    P_TS,
    PACKET_NAMES,
    QUIET,
    STATE,
)
from tracekit.parsers.perfetto.values import annotation_value
from tracekit.pftrace.schema import CLOCK_BOOTTIME

COMPLETE = 100  # event type of a legacy complete ('X') event, which carries its duration
MAX_NESTING = 8  # compressed packets inside compressed packets
MAX_FIELDS = 100_000  # fields of one message read in lock step before giving up
_LEGACY_PHASES = {ord("B"): 1, ord("E"): 2, ord("I"): 3, ord("i"): 3, ord("n"): 3, ord("R"): 3}


@dataclass
class TrackInfo:
    """What a track descriptor says."""

    name: str | None = None
    parent: int | None = None
    pid: int | None = None
    tid: int | None = None
    description: str | None = None


Cols = dict[str, Any]  # column name -> numpy array (or Arrow string array)


@dataclass
class Raw:
    """Columns of a decoded trace before the sequence state is applied.

    ``packets``: seq, flags, cleared, dropped (one entry per packet, indexed by packet);
    ``events``: pkt, ts, clock, type, track, name_iid, name, cat_iid, cat, corr, dur (one
    per track event); ``notes``: ev, name_iid, name, kind, value, text (one per debug
    annotation; ``value`` holds the bits of numbers, ``text`` strings and JSON);
    ``interned``: pkt, table, iid, value.
    """

    packets: Cols
    events: Cols
    notes: Cols
    interned: Cols
    defaults: pl.DataFrame  # pkt, clock, track
    threads: pl.DataFrame  # pkt, pid, tid
    snapshots: list[tuple[int, dict[int, tuple[int, int, bool]]]]  # pkt, clock -> (ts, mult, incr)
    tracks: dict[int, TrackInfo] = field(default_factory=dict)
    primary_clock: int = CLOCK_BOOTTIME
    skipped: Counter[str] = field(default_factory=Counter)


def _scalar(fields: wire.Fields, number: int, n: int) -> np.ndarray:
    """Value of a varint field per message (0 when absent, the last one when repeated)."""
    out = np.zeros(n, dtype=np.uint64)
    sel = fields.where(number, 0)
    out[fields.msg[sel]] = fields.value[sel]
    return out


def _first(fields: wire.Fields, number: int, wire_type: int) -> np.ndarray:
    """Positions in ``fields`` of the first field ``number`` of each message having one."""
    sel = fields.where(number, wire_type)
    _, first = np.unique(fields.msg[sel], return_index=True)
    return sel[first]


def _expand(buf: np.ndarray, starts: np.ndarray, sizes: np.ndarray) -> tuple[Any, ...]:
    """Replace packets holding compressed packets by the packets they hold."""
    for _ in range(MAX_NESTING + 1):
        fields, _left = wire.decode(buf, starts, sizes, MAX_FIELDS)
        sel = _first(fields, P_COMPRESSED, 2)
        if not len(sel):
            return buf, starts, sizes, fields
        buf, starts, sizes = _splice(buf, starts, sizes, fields, sel)
    raise wire.WireError("compressed packets nested too deep")


def _splice(
    buf: np.ndarray, starts: np.ndarray, sizes: np.ndarray, fields: wire.Fields, sel: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Packets with the compressed ones (fields ``sel``) replaced by their contents."""
    pieces: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # buffer, starts, sizes
    prev = 0
    for pkt, off, size in zip(
        fields.msg[sel].tolist(), fields.value[sel].tolist(), fields.size[sel].tolist()
    ):
        if pkt > prev:  # the packets before it, unchanged
            lo, hi = int(starts[prev]), int(starts[pkt - 1] + sizes[pkt - 1])
            pieces.append((buf[lo:hi], starts[prev:pkt] - lo, sizes[prev:pkt]))
        inner, istarts, isizes = wire.frames(zlib.decompress(buf[off : off + size].tobytes()))
        pieces.append((inner[: len(inner) - wire.PAD], istarts, isizes))
        prev = pkt + 1
    if prev < len(starts):
        lo, hi = int(starts[prev]), int(starts[-1] + sizes[-1])
        pieces.append((buf[lo:hi], starts[prev:] - lo, sizes[prev:]))
    bases = np.cumsum([0] + [len(p[0]) for p in pieces])
    out_starts = np.concatenate([p[1] + base for p, base in zip(pieces, bases)])
    out_sizes = np.concatenate([p[2] for p in pieces])
    return wire.padded(np.concatenate([p[0] for p in pieces])), out_starts, out_sizes


def decode(data: bytes) -> Raw:
    """Decode a serialized ``Trace``."""
    buf, starts, sizes, fields = _expand(*wire.frames(data))
    n = len(starts)
    flags = _scalar(fields, P_FLAGS, n).astype(np.int64)
    packets = {
        "seq": _scalar(fields, P_SEQ, n).astype(np.int64),
        "flags": flags,
        "cleared": (flags & 1).astype(bool) | (_scalar(fields, P_CLEARED, n) > 0),
        "dropped": _scalar(fields, P_DROPPED, n) > 0,
    }
    skipped: Counter[str] = Counter()
    other = ~fields.having(QUIET | STATE)
    pairs = np.unique(fields.msg[other].astype(np.int64) << 29 | fields.number[other])
    for number, count in Counter((pairs & ((1 << 29) - 1)).tolist()).items():
        skipped[f"{PACKET_NAMES.get(number, f'field {number}')} packets"] += count
    ts, clock = _scalar(fields, P_TS, n), _scalar(fields, P_CLOCK, n)
    events, notes = _events(buf, fields, _first(fields, P_EVENT, 2), ts, clock, skipped)
    state = np.unique(fields.msg[fields.having(STATE)])
    raw = Raw(packets, events, notes, *_state(buf, starts, sizes, state, skipped))
    raw.skipped = skipped
    return raw


def _events(
    buf: np.ndarray,
    pf: wire.Fields,
    at: np.ndarray,
    ts: np.ndarray,
    clock: np.ndarray,
    skipped: Counter[str],
) -> tuple[Cols, Cols]:
    """Track events (one per packet with one) and their debug annotations."""
    pkt = pf.msg[at]
    m = len(at)
    f, _ = wire.decode(buf, pf.value[at].astype(np.int64), pf.size[at], MAX_FIELDS)
    typ = _scalar(f, E_TYPE, m).astype(np.int64)
    dur = np.zeros(m, dtype=np.int64)
    legacy = _first(f, E_LEGACY, 2)
    for pos in legacy.tolist():
        ev = int(f.msg[pos])
        start = int(f.value[pos])
        old = pb.TrackEvent.LegacyEvent.FromString(buf[start : start + int(f.size[pos])].tobytes())
        if typ[ev] == 0:
            typ[ev] = COMPLETE if old.phase == ord("X") else _LEGACY_PHASES.get(old.phase, 0)
            dur[ev] = min(old.duration_us, 1 << 52) * 1000
    legacy_us = f.having(E_US)
    if legacy_us.any():
        skipped["events with legacy microsecond timestamps (packet timestamp used)"] += len(
            np.unique(f.msg[legacy_us])
        )
    for code, count in Counter(typ[~np.isin(typ, (1, 2, 3, COMPLETE))].tolist()).items():
        what = "counter" if code == 4 else f"type {code}"
        skipped[f"{what} track events"] += count
    name_at, cat_at = _first(f, E_NAME, 2), _first(f, E_CAT, 2)
    cat_iid = np.zeros(m, dtype=np.uint64)  # the first category of an event
    first_cat = _first(f, E_CAT_IID, 0)
    cat_iid[f.msg[first_cat]] = f.value[first_cat]
    packed = _first(f, E_CAT_IID, 2)
    if len(packed):
        off = f.value[packed].astype(np.int64)
        cat_iid[f.msg[packed]] = wire.varints(buf, off, off + f.size[packed])[0]
    events = {
        "pkt": pkt,
        "ts": ts[pkt].view(np.int64),
        "clock": clock[pkt].astype(np.int64),
        "type": typ,
        "track": _scalar(f, E_TRACK, m).view(np.int64),
        "name_iid": _scalar(f, E_NAME_IID, m).view(np.int64),
        "name": _strings_at(buf, f, name_at, m),
        "cat_iid": cat_iid.view(np.int64),
        "cat": _strings_at(buf, f, cat_at, m),
        "corr": _scalar(f, E_CORR, m).view(np.int64),
        "dur": dur,
    }
    return events, _notes(buf, f)


def _strings_at(buf: np.ndarray, f: wire.Fields, at: np.ndarray, m: int) -> pa.Array:
    """Per message, the string of the field at ``at`` (null for messages without one)."""
    if not len(at):
        return pa.nulls(m, pa.string())
    index = np.full(m, -1, dtype=np.int64)
    index[f.msg[at]] = np.arange(len(at))
    values = wire.strings(buf, f.value[at], f.size[at])
    return values.take(pa.array(index, mask=index < 0))


def _notes(buf: np.ndarray, ef: wire.Fields) -> Cols:
    """Debug annotations: the event, name, value kind, number bits and text of each."""
    at = ef.where(E_NOTE, 2)
    k = len(at)
    f, _ = wire.decode(buf, ef.value[at].astype(np.int64), ef.size[at], MAX_FIELDS)
    kind = np.zeros(k, dtype=np.int64)
    value = np.zeros(k, dtype=np.uint64)
    text_at = []
    for number, code in A_VALUES.items():
        wire_type = 2 if code in (6, 7) else 1 if code == 4 else 0
        sel = f.where(number, wire_type)
        kind[f.msg[sel]] = code
        value[f.msg[sel]] = f.value[sel]
        if wire_type == 2:
            text_at.append(sel)
    sel = f.where(A_STR_IID, 0)
    kind[f.msg[sel]], value[f.msg[sel]] = A_KIND_STR_IID, f.value[sel]
    text = _strings_at(buf, f, np.sort(np.concatenate(text_at)), k)
    complex_ = np.unique(f.msg[~f.having({A_NAME_IID, A_NAME, A_STR_IID, *A_VALUES})])
    if len(complex_):
        text = _complex(buf, ef, at, complex_, text)
        kind[complex_] = A_KIND_OBJECT
    return {
        "ev": ef.msg[at],
        "name_iid": _scalar(f, A_NAME_IID, k).view(np.int64),
        "name": _strings_at(buf, f, _first(f, A_NAME, 2), k),
        "kind": kind,
        "value": value,
        "text": text,
    }


def _complex(
    buf: np.ndarray, ef: wire.Fields, at: np.ndarray, which: np.ndarray, text: pa.Array
) -> pa.Array:
    """Nested, dict, array and proto annotations, as JSON text (parsed one by one)."""
    values = text.to_pylist()
    for i in which.tolist():
        start = int(ef.value[at[i]])
        note = pb.DebugAnnotation.FromString(buf[start : start + int(ef.size[at[i]])].tobytes())
        values[i] = json.dumps(annotation_value(note), separators=(",", ":"), default=str)
    return pa.array(values, pa.string())


def _state(
    buf: np.ndarray, starts: np.ndarray, sizes: np.ndarray, which: np.ndarray, skipped: Counter[str]
) -> tuple[Any, ...]:
    """Interned strings, defaults, thread descriptors, clock snapshots and tracks."""
    interned: list[tuple[int, int, int, str]] = []
    defaults, threads = [], []
    snapshots: list[tuple[int, dict[int, tuple[int, int, bool]]]] = []
    tracks: dict[int, TrackInfo] = {}
    primary = CLOCK_BOOTTIME
    for pkt in which.tolist():
        s, z = int(starts[pkt]), int(sizes[pkt])
        packet = pb.TracePacket.FromString(buf[s : s + z].tobytes())
        if packet.HasField("interned_data"):
            data = packet.interned_data
            for table, items in enumerate(
                (data.event_names, data.event_categories, data.debug_annotation_names)
            ):
                interned.extend((pkt, table, signed(item.iid), text(item.name)) for item in items)
            interned.extend(
                (pkt, 3, signed(item.iid), item.str.decode("utf-8", "replace"))
                for item in data.debug_annotation_string_values
            )
        if packet.HasField("trace_packet_defaults"):
            d = packet.trace_packet_defaults
            defaults.append((pkt, d.timestamp_clock_id, signed(d.track_event_defaults.track_uuid)))
        if packet.HasField("track_descriptor"):
            _describe(tracks, packet.track_descriptor)
        if packet.HasField("clock_snapshot"):
            snap = packet.clock_snapshot
            snapshots.append(
                (
                    pkt,
                    {
                        c.clock_id: (c.timestamp, c.unit_multiplier_ns or 1, c.is_incremental)
                        for c in snap.clocks
                    },
                )
            )
            primary = snap.primary_trace_clock or primary
        if packet.HasField("thread_descriptor"):
            threads.append((pkt, packet.thread_descriptor.pid, packet.thread_descriptor.tid))
        if packet.HasField("process_descriptor"):
            skipped["legacy process descriptor packets"] += 1
    i64 = pl.Int64
    columns = list(zip(*interned)) or [[], [], [], []]
    table = {
        name: np.array(col, dtype=np.int64) for name, col in zip(("pkt", "table", "iid"), columns)
    }
    table["value"] = pa.array(columns[3], pa.string())
    frames = (
        pl.DataFrame(defaults, schema={"pkt": i64, "clock": i64, "track": i64}, orient="row"),
        pl.DataFrame(threads, schema={"pkt": i64, "pid": i64, "tid": i64}, orient="row"),
    )
    return (table, *frames, snapshots, tracks, primary)


def text(value: str | bytes) -> str:
    """A string field as text (upb hands out bytes when a proto2 string is not UTF-8)."""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def signed(value: int) -> int:
    """A uint64 as the int64 with the same bits (how uuids and iids are kept in columns)."""
    return value - (1 << 64) if value >= 1 << 63 else value


def _describe(tracks: dict[int, TrackInfo], desc: pb.TrackDescriptor) -> None:
    info = tracks.setdefault(signed(desc.uuid), TrackInfo())
    info.name = text(desc.name or desc.static_name or desc.atrace_name) or info.name
    if desc.HasField("parent_uuid"):
        info.parent = signed(desc.parent_uuid)
    if desc.HasField("process"):
        info.pid = desc.process.pid
        info.name = info.name or text(desc.process.process_name) or None
    if desc.HasField("thread"):
        info.pid, info.tid = desc.thread.pid, desc.thread.tid
        info.name = info.name or text(desc.thread.thread_name) or None
    if desc.HasField("description"):
        info.description = text(desc.description)
    if desc.HasField("counter"):
        info.name = info.name or "counter"
