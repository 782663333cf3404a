"""Write a timeline as a Perfetto protobuf trace (``.pftrace``) for ui.perfetto.dev.

Rows become begin/end slices (instant events for zero-length markers) on the tracks of
:mod:`.tracks`; kinds are event categories, names are interned, and the row fields a
track does not imply (corr, engine, args) are debug annotations. Host launches and the
device work with the same (rank, corr) are joined by flow arrows. Timestamps are absolute
ns (``ts + origin_ns``) when the origin is known, else relative. The track descriptors,
interned strings and the metadata packet are built with the generated protobuf classes;
the event packets, millions of them, are encoded column-wise by :mod:`.protoenc`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

from tracekit.export.tracks import layout
from tracekit.pftrace import protoenc as pe
from tracekit.pftrace.lanes import assign_lanes, event_order, slice_ranks
from tracekit.pftrace.schema import (
    ANN_ARGS,
    ANN_CORR,
    ANN_ENGINE,
    ANNOTATIONS,
    CLOCK_BOOTTIME,
    CLOCK_REALTIME,
    INSTANT,
    META_ANNOTATION,
    META_EVENT,
    META_TRACK,
    SEQ_CLEARED,
    SEQ_NEEDS,
    SEQUENCE,
    SLICE_BEGIN,
    SLICE_END,
    TRACK_FIELDS,
    VERSION,
)
from tracekit.timeline import Timeline

BATCH = 1 << 17  # events encoded per numpy pass
INTERN_CHUNK = 20_000  # event names per interned-data packet
_JSON_ARGS, _STRING_ARGS = 9, 6  # DebugAnnotation.legacy_json_value / .string_value
_ANN_IID = {name: i + 1 for i, name in enumerate((*ANNOTATIONS, META_ANNOTATION))}


def _ints(table: pa.Table, name: str) -> tuple[np.ndarray, np.ndarray]:
    """Values (0 where null) and validity of an integer column."""
    col = table.column(name)
    valid = col.is_valid().to_numpy(zero_copy_only=False)
    return col.fill_null(0).to_numpy().astype(np.int64, copy=False), valid


def _interned(table: pa.Table, name: str) -> tuple[np.ndarray, list[str]]:
    """Per-row iid (1 = most frequent, 0 = null) and the strings in iid order."""
    col = table.column(name).cast(pa.string()).combine_chunks()
    enc = pc.dictionary_encode(col)
    idx = enc.indices.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
    valid = idx >= 0
    counts = np.bincount(idx[valid], minlength=len(enc.dictionary))
    order = np.argsort(-counts, kind="stable")
    iid_of = np.empty(len(order), dtype=np.int64)
    iid_of[order] = np.arange(1, len(order) + 1)
    iids = np.where(valid, iid_of[np.where(valid, idx, 0)] if len(order) else 0, 0)
    return iids, enc.dictionary.take(pa.array(order)).to_pylist()


def _strings(table: pa.Table, name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """UTF-8 bytes, start offsets and sizes of a string column (size -1 where null)."""
    col = table.column(name).cast(pa.large_string()).combine_chunks()
    _validity, offsets, data = col.buffers()
    off = np.frombuffer(offsets, dtype=np.int64)[col.offset : col.offset + len(col) + 1]
    raw = np.frombuffer(data, dtype=np.uint8) if data is not None else np.empty(0, np.uint8)
    sizes = np.diff(off)
    sizes[~col.is_valid().to_numpy(zero_copy_only=False)] = -1
    return raw, off[:-1].copy(), sizes


def _track_index(table: pa.Table) -> tuple[np.ndarray, list[tuple[Any, ...]]]:
    """Dense track number per row from (rank, device, stream, pid, tid), and each key."""
    df = pl.from_arrow(table.select(list(TRACK_FIELDS)))
    assert isinstance(df, pl.DataFrame)
    track = df.select(pl.struct(TRACK_FIELDS).rank("dense")).to_series().to_numpy() - 1
    keys = (
        df.with_columns(track=pl.Series(track))
        .unique("track", keep="first")
        .sort("track")
        .select(TRACK_FIELDS)
        .rows()
    )
    return track.astype(np.int64), keys


def _flows(table: pa.Table, corr: np.ndarray, has_corr: np.ndarray, host: np.ndarray) -> np.ndarray:
    """Flow id per row (0 = none): rows sharing (rank, corr) with both host and device rows."""
    rank, _ = _ints(table, "rank")
    flow = np.zeros(len(corr), dtype=np.uint64)
    rows = np.flatnonzero(has_corr)
    if not len(rows):
        return flow
    rows = rows[np.lexsort((corr[rows], rank[rows]))]
    r, c = rank[rows], corr[rows]
    start = np.ones(len(rows), dtype=bool)
    start[1:] = (r[1:] != r[:-1]) | (c[1:] != c[:-1])
    group = np.cumsum(start) - 1
    hosts = np.bincount(group, weights=host[rows])
    sizes = np.bincount(group)
    linked = ((hosts > 0) & (hosts < sizes))[group]
    fid = (
        (c.astype(np.uint64) << np.uint64(12))
        + (r.astype(np.uint64) & np.uint64(0xFFF))
        + np.uint64(1)
    )
    flow[rows[linked]] = fid[linked]
    return flow


def write_pftrace(timeline: Timeline, path: Path) -> int:
    """Write ``timeline`` to ``path`` as a Perfetto trace; return the number of bytes."""
    table = timeline.events
    n = table.num_rows
    ts, _ = _ints(table, "ts")
    dur, _ = _ints(table, "dur")
    device, dev_ok = _ints(table, "device")
    corr, has_corr = _ints(table, "corr")
    kind_iid, kinds = _interned(table, "kind")
    name_iid, names = _interned(table, "name")
    engine_iid, engines = _interned(table, "engine")
    track, keys = _track_index(table)
    marker = kinds.index("marker") + 1 if "marker" in kinds else -1
    instant = (kind_iid == marker) & (dur == 0)
    end = ts + dur
    lane = assign_lanes(track, ts, end, ~instant)
    lanes = np.ones(len(keys), dtype=np.int64)
    if n:
        np.maximum.at(lanes, track, lane + 1)
    tracks = layout(keys, lanes.tolist(), timeline.meta)
    span = int(lanes.max(initial=1))
    combo = track * span + lane
    combo_uuid = np.zeros(len(keys) * span + 1, dtype=np.int64)
    for (t, ln), u in tracks.uuids.items():
        combo_uuid[t * span + ln] = u
    row_uuid = combo_uuid[combo]
    first = int(ts.min()) if n else 0
    origin = timeline.meta.get("origin_ns")
    base = int(origin) if isinstance(origin, int) else max(0, -first)
    flow = _flows(table, corr, has_corr, ~(dev_ok & (device >= 0)))

    # events: one per instant, a begin and an end per slice, in stack replay order
    rank = slice_ranks(combo, ts, end)
    slices = np.flatnonzero(~instant)
    rows = np.concatenate([np.arange(n), slices])
    is_end = np.repeat([False, True], [n, len(slices)])
    order = event_order(
        np.concatenate([ts, end[slices]]),
        is_end,
        np.concatenate([dur == 0, dur[slices] == 0]),
        rank[rows],
    )
    rows, is_end = rows[order], is_end[order]
    meta = {"version": VERSION, "ts_base": base, "meta": timeline.meta}
    args = _strings(table, ANN_ARGS)
    ev = {
        "time": np.where(is_end, end[rows], ts[rows]) + base,
        "type": np.where(is_end, SLICE_END, np.where(instant[rows], INSTANT, SLICE_BEGIN)),
        "uuid": row_uuid[rows],
        "kind": kind_iid[rows] * ~is_end,
        "name": name_iid[rows] * ~is_end,
        "corr": corr[rows],
        "has_corr": has_corr[rows] & ~is_end,
        "engine": engine_iid[rows] * ~is_end,
        "flow": flow[rows] * ~is_end,
        "args_start": args[1][rows],
        "args_size": np.where(is_end, -1, args[2][rows]),
    }
    strings = (args[0], _dictionary_bytes(engines))
    with Path(path).open("wb") as fh:
        _prefix(fh, tracks.descriptors, kinds, names, origin, first + base, meta)
        for lo in range(0, len(rows), BATCH):
            batch = {k: v[lo : lo + BATCH] for k, v in ev.items()}
            fh.write(_encode_events(batch, *strings).tobytes())
        return fh.tell()


def _dictionary_bytes(values: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Concatenated UTF-8 of ``values`` with starts/sizes indexed by iid (0 = none)."""
    encoded = [b""] + [v.encode() for v in values]
    sizes = np.array([len(e) for e in encoded], dtype=np.int64)
    data = pe.padded(np.frombuffer(b"".join(encoded), dtype=np.uint8), int(sizes.max()))
    return data, np.cumsum(sizes) - sizes, sizes


def _annotation(iid: int, value: list[pe.Encoded], n: int, mask: np.ndarray) -> list[pe.Encoded]:
    name = [pe.const(pe.tag(1, pe.WIRE_VARINT) + pe.varint_bytes(iid), n, mask)]
    return pe.field_message(4, [*name, *value], n, mask)


def _encode_events(
    c: dict[str, np.ndarray],
    args_data: np.ndarray,
    engine: tuple[np.ndarray, np.ndarray, np.ndarray],
) -> np.ndarray:
    """TracePacket{timestamp, sequence id, flags, track_event{...}} per event, framed.

    The track event comes last in its packet and the args annotation last in the event,
    so that the longest, most variable bytes close each row.
    """
    n = len(c["time"])
    has_args = c["args_size"] >= 0
    nonempty = c["args_size"] > 0
    first = args_data[np.where(nonempty, c["args_start"], 0)] if len(args_data) else 0
    json_like = nonempty & ((first == ord("{")) | (first == ord("[")))
    has_engine = c["engine"] > 0
    corr = pe.field_varint(4, c["corr"], c["has_corr"])
    engine_value = pe.field_blob(
        6, engine[0], engine[1][c["engine"]], engine[2][c["engine"]], has_engine
    )
    args_value = pe.field_blob(
        0,
        args_data,
        c["args_start"],
        np.maximum(c["args_size"], 0),
        has_args,
        tags=np.where(json_like, _JSON_ARGS, _STRING_ARGS),
        last=True,
    )
    event = [
        *pe.field_varint(9, c["type"]),
        *pe.field_varint(11, c["uuid"]),
        *pe.field_varint(3, c["kind"], c["kind"] > 0),
        *pe.field_varint(10, c["name"], c["name"] > 0),
        *pe.field_fixed64(47, c["flow"], c["flow"] > 0),
        *_annotation(_ANN_IID[ANN_CORR], corr, n, c["has_corr"]),
        *_annotation(_ANN_IID[ANN_ENGINE], engine_value, n, has_engine),
        *_annotation(_ANN_IID[ANN_ARGS], args_value, n, has_args),
    ]
    packet = [
        *pe.field_varint(8, c["time"]),
        pe.const(pe.tag(10, pe.WIRE_VARINT) + pe.varint_bytes(SEQUENCE), n),
        pe.const(pe.tag(13, pe.WIRE_VARINT) + pe.varint_bytes(SEQ_NEEDS), n),
        *pe.field_message(11, event, n),
    ]
    return pe.encode(pe.field_message(1, packet, n), n)


def _packet(fh: BinaryIO, packet: pb.TracePacket) -> None:
    body = packet.SerializeToString()
    fh.write(b"\x0a" + pe.varint_bytes(len(body)) + body)


def _prefix(
    fh: BinaryIO,
    descriptors: list[pb.TrackDescriptor],
    kinds: list[str],
    names: list[str],
    origin: Any,
    first_ts: int,
    meta: dict[str, Any],
) -> None:
    """Clock snapshot, interned strings, track descriptors and the metadata instant."""
    if isinstance(origin, int):
        clocks = [
            pb.ClockSnapshot.Clock(clock_id=c, timestamp=origin)
            for c in (CLOCK_BOOTTIME, CLOCK_REALTIME)
        ]
        snap = pb.ClockSnapshot(clocks=clocks, primary_trace_clock=CLOCK_BOOTTIME)
        _packet(
            fh,
            pb.TracePacket(
                timestamp=origin, clock_snapshot=snap, trusted_packet_sequence_id=SEQUENCE
            ),
        )
    interned = pb.InternedData(
        event_categories=[pb.EventCategory(iid=i + 1, name=k) for i, k in enumerate(kinds)],
        debug_annotation_names=[pb.DebugAnnotationName(iid=i, name=k) for k, i in _ANN_IID.items()],
    )
    flags = SEQ_CLEARED
    for lo in range(0, max(len(names), 1), INTERN_CHUNK):
        chunk = names[lo : lo + INTERN_CHUNK]
        interned.event_names.extend(
            pb.EventName(iid=lo + i + 1, name=s) for i, s in enumerate(chunk)
        )
        _packet(
            fh,
            pb.TracePacket(
                trusted_packet_sequence_id=SEQUENCE, sequence_flags=flags, interned_data=interned
            ),
        )
        interned, flags = pb.InternedData(), SEQ_NEEDS
    meta_uuid = len(descriptors) + 1
    for desc in [*descriptors, pb.TrackDescriptor(uuid=meta_uuid, name=META_TRACK)]:
        _packet(fh, pb.TracePacket(trusted_packet_sequence_id=SEQUENCE, track_descriptor=desc))
    note = pb.DebugAnnotation(name=META_ANNOTATION, legacy_json_value=json.dumps(meta))
    event = pb.TrackEvent(
        type=INSTANT, track_uuid=meta_uuid, name=META_EVENT, debug_annotations=[note]
    )
    _packet(
        fh,
        pb.TracePacket(
            timestamp=first_ts,
            trusted_packet_sequence_id=SEQUENCE,
            sequence_flags=SEQ_NEEDS,
            track_event=event,
        ),
    )
