"""Perfetto protobuf: write a timeline as .pftrace, read it back, read foreign traces.

Round trips compare every column and the metadata. The independent check decodes a
written file with the ``perfetto`` package's protobuf classes only. Foreign traces (shaped
like rocprofv3 ``--output-format pftrace`` and like Perfetto SDK apps) are built here with
the same classes, so the expected rows are known exactly.
"""

from __future__ import annotations

import gzip
import json
import shutil
import zlib
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pytest
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

import tracekit
from fixtures.kineto_writer import write_kineto_json
from fixtures.nsys_writer import write_nsys_sqlite
from fixtures.scenario import build_scenario
from tests.conftest import real_files, real_root, run_cli, sha256
from tracekit.errors import TraceError
from tracekit.export import check_output, save
from tracekit.export.pftrace import write_pftrace
from tracekit.load import supported_formats
from tracekit.parsers.perfetto import PERFETTO
from tracekit.parsers.probe import Probe
from tracekit.timeline import COLUMNS, Timeline, build_table, empty_meta

DEMO = Path(__file__).resolve().parents[1] / "tracekit" / "data" / "demo.sqlite"
TE, TP = pb.TrackEvent, pb.TracePacket
REAL = real_files("nvidia", "*/*.sqlite", "*/*.json.gz") + [
    p for p in real_files("amd", "*/*") if p.values[0] is None or not p.id.startswith("_")
]
AMD_DIRS = [
    pytest.param(p, id=p.name)
    for p in sorted((real_root() / "amd").glob("*/") if real_root() else [])
    if p.is_dir() and not p.name.startswith("_")
]


def _canonical(df: pl.DataFrame) -> pl.DataFrame:
    cats = [c for c, t in df.schema.items() if t == pl.Categorical]
    return df.with_columns(pl.col(cats).cast(pl.String)).select(COLUMNS).sort(list(COLUMNS))


def _round_trip(timeline: Timeline, path: Path) -> Timeline:
    write_pftrace(timeline, path)
    assert PERFETTO.sniff(Probe(path))
    back = PERFETTO.parse(path)
    assert back.validate() == []
    assert _canonical(back.df).equals(_canonical(timeline.df))
    assert back.meta == timeline.meta
    return back


def test_demo_round_trip(tmp_path: Path) -> None:
    timeline = tracekit.load(DEMO)
    back = _round_trip(timeline, tmp_path / "demo.pftrace")
    assert len(back) == len(timeline) == 2328


@pytest.mark.parametrize("path", REAL + AMD_DIRS)
def test_real_round_trip(tmp_path: Path, path: Path) -> None:
    try:
        timeline = tracekit.load(path)
    except TraceError as exc:
        pytest.skip(f"tracekit.load does not read it: {exc}")
    digest = sha256(path) if path.is_file() else None
    _round_trip(timeline, tmp_path / "real.pftrace")
    if digest is not None:
        assert sha256(path) == digest


@pytest.mark.parametrize("writer", ["nsys", "kineto"])
@pytest.mark.parametrize(
    "knobs",
    [
        {},
        {"steps": 2, "layers": 3, "fallback_kernel": True, "exposed_all_to_all": True},
        {"steps": 1, "layers": 2, "idle_bubble_ns": 75_000, "seed": 9},
    ],
    ids=["default", "faults", "bubble"],
)
def test_fixture_round_trip(tmp_path: Path, writer: str, knobs: dict[str, Any]) -> None:
    events = build_scenario(**knobs).events
    if writer == "nsys":
        source = write_nsys_sqlite(events, tmp_path / "s.sqlite")
    else:
        source = tmp_path / "s.json"
        write_kineto_json(events, source)
    _round_trip(tracekit.load(source), tmp_path / "s.pftrace")


# -- the written file, decoded with the protobuf classes only ------------------------------


def _replay(trace: pb.Trace) -> tuple[dict[int, pb.TrackDescriptor], dict[int, list[tuple]]]:
    """Track descriptors and, per track uuid, (name, kind, start, end) of every slice."""
    names: dict[int, str] = {}
    kinds: dict[int, str] = {}
    tracks: dict[int, pb.TrackDescriptor] = {}
    open_: dict[int, list[tuple]] = defaultdict(list)
    slices: dict[int, list[tuple]] = defaultdict(list)
    for packet in trace.packet:
        if packet.HasField("interned_data"):
            names.update((e.iid, e.name) for e in packet.interned_data.event_names)
            kinds.update((e.iid, e.name) for e in packet.interned_data.event_categories)
        if packet.HasField("track_descriptor"):
            tracks[packet.track_descriptor.uuid] = packet.track_descriptor
        if not packet.HasField("track_event"):
            continue
        event, ts = packet.track_event, packet.timestamp
        head = (
            names.get(event.name_iid, event.name),
            kinds.get(event.category_iids[0], "") if event.category_iids else "",
        )
        if event.type == TE.TYPE_SLICE_BEGIN:
            open_[event.track_uuid].append((*head, ts))
        elif event.type == TE.TYPE_SLICE_END:
            name, kind, start = open_[event.track_uuid].pop()
            slices[event.track_uuid].append((name, kind, start, ts))
        elif event.type == TE.TYPE_INSTANT:
            slices[event.track_uuid].append((*head, ts, ts))
    assert not any(open_.values())
    return tracks, slices


def test_written_file_decodes_with_protobuf_classes(tmp_path: Path) -> None:
    timeline = tracekit.load(DEMO)
    origin = timeline.meta["origin_ns"]
    path = tmp_path / "demo.pftrace"
    write_pftrace(timeline, path)
    tracks, slices = _replay(pb.Trace.FromString(path.read_bytes()))

    names = {t.name for t in tracks.values()}
    df = timeline.df.with_columns(pl.col("kind", "name").cast(pl.String))
    device = df.filter(pl.col("device") >= 0)
    for dev, stream in device.select("device", "stream").unique().rows():
        assert f"rank 0 · GPU {dev} · stream {stream}" in names
    assert "rank 0 · GPU 0 (NVIDIA H200)" in names  # the device group, named after meta
    threads = {(t.thread.pid, t.thread.tid) for t in tracks.values() if t.HasField("thread")}
    host = df.filter(pl.col("device") < 0)
    assert threads == set(host.select("pid", "tid").unique().rows())

    # rows per track, through the fields each track describes
    got: dict[tuple, list[tuple]] = defaultdict(list)
    for uuid, items in slices.items():
        desc = tracks[uuid].description
        if not desc.startswith("tracekit "):
            assert tracks[uuid].name == "tracekit" and len(items) == 1  # the metadata instant
            continue
        key = json.loads(desc[len("tracekit ") :])
        group = (key["device"], key["stream"], key["pid"], key["tid"])
        got[group] += [(n, k, s - origin, e - s) for n, k, s, e in items]
    want: dict[tuple, list[tuple]] = defaultdict(list)
    for row in df.iter_rows(named=True):
        group = (row["device"], row["stream"], row["pid"], row["tid"])
        want[group].append((row["name"], row["kind"], row["ts"], row["dur"]))
    assert {k: sorted(v) for k, v in got.items()} == {k: sorted(v) for k, v in want.items()}
    assert sum(len(v) for v in got.values()) == len(timeline) == 2328
    first = min(s for items in slices.values() for _, _, s, _ in items)
    assert first == origin + df["ts"].min()


# -- bad input -------------------------------------------------------------------------------


@pytest.mark.parametrize("fraction", [0.5, 0.25, 0.9])
def test_truncated_protobuf_is_one_line_error(tmp_path: Path, fraction: float) -> None:
    whole = tmp_path / "whole.pftrace"
    write_pftrace(tracekit.load(DEMO), whole)
    data = whole.read_bytes()
    cut = tmp_path / "cut.pftrace"
    cut.write_bytes(data[: int(len(data) * fraction)])
    assert PERFETTO.sniff(Probe(cut))
    with pytest.raises(TraceError) as info:
        PERFETTO.parse(cut)
    message = str(info.value)
    assert "\n" not in message and "truncated or corrupt" in message and str(cut) in message
    if "perfetto" in supported_formats():  # wired into the loader: the CLI says it too
        result = run_cli("info", str(cut))
        assert result.returncode == 2
        assert "truncated or corrupt" in result.stderr and "Traceback" not in result.stderr


def test_garbage_after_magic_is_one_line_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.pftrace"
    path.write_bytes(b"\x0a\x05\xff\xff\xff\xff\xff" + bytes(range(256)) * 4)
    with pytest.raises(TraceError, match="truncated or corrupt"):
        PERFETTO.parse(path)


def test_damaged_files_never_crash(tmp_path: Path) -> None:
    """Flipped, dropped and inserted bytes: a valid timeline or one TraceError, nothing else."""
    sources = [_rocprof_like(), _sdk_app_like()]
    write_pftrace(tracekit.load(DEMO), tmp_path / "demo.pftrace")
    sources.append((tmp_path / "demo.pftrace").read_bytes()[:20_000])
    rng = np.random.default_rng(7)
    path = tmp_path / "damaged.pftrace"
    outcomes = {"rows": 0, "error": 0}
    for attempt in range(300):
        data = bytearray(sources[attempt % len(sources)])
        at = int(rng.integers(0, len(data)))
        if attempt % 3 == 0:
            data[at] = int(rng.integers(0, 256))
        elif attempt % 3 == 1:
            del data[at : at + int(rng.integers(1, 20))]
        else:
            data[at:at] = rng.bytes(int(rng.integers(1, 10)))
        path.write_bytes(bytes(data))
        try:
            timeline = PERFETTO.parse(path)
        except TraceError as exc:
            assert "\n" not in str(exc)
            outcomes["error"] += 1
        else:
            assert timeline.validate() == []
            outcomes["rows"] += 1
    assert outcomes["rows"] and outcomes["error"]


def test_trace_without_track_events(tmp_path: Path) -> None:
    clock = pb.ClockSnapshot(clocks=[pb.ClockSnapshot.Clock(clock_id=6, timestamp=5)])
    path = tmp_path / "clock.pftrace"
    path.write_bytes(pb.Trace(packet=[TP(clock_snapshot=clock)]).SerializeToString())
    with pytest.raises(TraceError, match="no track events"):
        PERFETTO.parse(path)


# -- CLI and Timeline.save -------------------------------------------------------------------


def test_convert_cli_writes_pftrace(tmp_path: Path) -> None:
    source = tmp_path / "demo.sqlite"
    shutil.copy(DEMO, source)
    digest = sha256(source)
    for name in ("out.pftrace", "out.perfetto-trace"):
        result = run_cli("convert", str(source), "-o", str(tmp_path / name))
        assert result.returncode == 0, result.stderr
        assert "2,328 events" in result.stderr
        back = PERFETTO.parse(tmp_path / name)
        assert _canonical(back.df).equals(_canonical(tracekit.load(DEMO).df))
    assert sha256(source) == digest
    result = run_cli("convert", str(source), "-o", str(tmp_path / "out.json"))
    assert result.returncode == 2 and ".pftrace" in result.stderr


def test_timeline_save_accepts_perfetto_names(tmp_path: Path) -> None:
    timeline = tracekit.load(DEMO)
    for name in ("a.pftrace", "b.perfetto-trace", "C.PFTRACE"):
        path = save(timeline, tmp_path / name)
        assert check_output(path) == path
        assert len(PERFETTO.parse(path)) == len(timeline)
    with pytest.raises(TraceError, match=r"\.pftrace"):
        check_output(tmp_path / "x.trace")


# -- sniffing --------------------------------------------------------------------------------


def test_sniff_by_content(tmp_path: Path) -> None:
    timeline = tracekit.load(DEMO)
    written = tmp_path / "demo.pftrace"
    write_pftrace(timeline, written)
    plain = tmp_path / "renamed.bin"
    shutil.copy(written, plain)
    packed = tmp_path / "demo.pftrace.gz"
    packed.write_bytes(gzip.compress(written.read_bytes()))
    for path in (written, plain, packed):
        assert PERFETTO.sniff(Probe(path)), path
    assert len(PERFETTO.parse(packed)) == len(timeline)

    others = {
        "demo.sqlite": DEMO.read_bytes(),
        "text.txt": b"\n  hello, a text file that starts with a newline\n" * 20,
        "json.json": b'\n{"traceEvents": []}\n',
        "random.bin": b"\x0a" + np.random.default_rng(1).bytes(5000),
        "descriptor.pb": _descriptor_set(),
        "empty.pftrace": b"",
        "text.pftrace": b"not a trace",
    }
    save(timeline, tmp_path / "saved.parquet")
    save(timeline, tmp_path / "saved.arrow")
    for name, data in others.items():
        (tmp_path / name).write_bytes(data)
    for name in [*others, "saved.parquet", "saved.arrow"]:
        assert not PERFETTO.sniff(Probe(tmp_path / name)), name


def _descriptor_set() -> bytes:
    """Another protobuf file: a FileDescriptorSet (starts with 0x0a too)."""
    from google.protobuf import descriptor_pb2

    files = descriptor_pb2.FileDescriptorSet()
    pb.DESCRIPTOR.CopyToProto(files.file.add())
    return files.SerializeToString()


@pytest.mark.parametrize("path", REAL + AMD_DIRS)
def test_sniff_claims_no_real_sample(path: Path) -> None:
    assert not PERFETTO.sniff(Probe(path))


# -- layout edge cases ----------------------------------------------------------------------


def _timeline(rows: list[tuple], meta: dict[str, Any] | None = None) -> Timeline:
    names = ("ts", "dur", "kind", "name", "device", "stream", "pid", "tid", "corr", "args")
    columns = {n: [r[i] for r in rows] for i, n in enumerate(names)}
    columns["rank"] = [0] * len(rows)
    columns["engine"] = ["sm" if k == "kernel" else None for k in columns["kind"]]
    types = {
        "ts": pa.int64(),
        "dur": pa.int64(),
        "device": pa.int32(),
        "stream": pa.int64(),
        "pid": pa.int64(),
        "tid": pa.int64(),
        "corr": pa.int64(),
        "rank": pa.int32(),
    }
    arrays = {k: pa.array(v, types.get(k, pa.string())) for k, v in columns.items()}
    return Timeline(build_table(arrays, len(rows)), {**empty_meta(), **(meta or {})})


def test_overlapping_rows_go_to_lanes(tmp_path: Path) -> None:
    rows = [
        (0, 100, "kernel", "a", 0, 7, None, None, 1, None),
        (50, 100, "kernel", "b", 0, 7, None, None, 2, '{"x":1}'),  # overlaps a, not nested
        (60, 10, "kernel", "c", 0, 7, None, None, 3, None),  # nests in a and b
        (60, 10, "kernel", "c", 0, 7, None, None, 3, None),  # an identical twin
        (150, 0, "kernel", "zero", 0, 7, None, None, None, None),  # zero length at b's end
        (150, 0, "marker", "mark", 0, 7, None, None, None, None),
        (0, 1000, "range", "outer", -1, None, 9, 10, None, None),  # nests properly
        (0, 500, "range", "inner", -1, None, 9, 10, None, None),
        (500, 500, "api", "tail", -1, None, 9, 10, 1, None),
        (900, 300, "range", "leak", -1, None, 9, 10, None, None),  # outlives outer
    ]
    timeline = _timeline(rows, {"origin_ns": 1_000_000})
    path = tmp_path / "lanes.pftrace"
    _round_trip(timeline, path)
    tracks, slices = _replay(pb.Trace.FromString(path.read_bytes()))
    lanes = sorted(t.name for t in tracks.values() if "overlap" in t.name)
    assert lanes == ["rank 0 · GPU 0 · stream 7 · overlap 1", "rank 0 · pid 9 · tid 10 · overlap 1"]
    thread = next(u for u, t in tracks.items() if t.HasField("thread"))
    assert sorted(n for n, *_ in slices[thread]) == ["inner", "outer", "tail"]


def test_ranks_sharing_a_pid_keep_apart(tmp_path: Path) -> None:
    rows = [
        (0, 10, "api", "launch", -1, None, 7, 8, 1, None),
        (5, 10, "kernel", "k", 0, 3, None, None, 1, None),
    ] * 2
    timeline = _timeline(rows)
    ranks = pa.array([0, 0, 1, 1], pa.int32())
    timeline = Timeline(timeline.events.set_column(6, "rank", ranks), timeline.meta)
    path = tmp_path / "ranks.pftrace"
    _round_trip(timeline, path)
    tracks, slices = _replay(pb.Trace.FromString(path.read_bytes()))
    assert not any(t.HasField("thread") or t.HasField("process") for t in tracks.values())
    names = {t.name for u, t in tracks.items() if slices.get(u)} - {"tracekit"}
    assert names == {
        "rank 0 · pid 7 · tid 8",
        "rank 1 · pid 7 · tid 8",
        "rank 0 · GPU 0 · stream 3",
        "rank 1 · GPU 0 · stream 3",
    }


def test_empty_and_negative_timelines(tmp_path: Path) -> None:
    _round_trip(_timeline([]), tmp_path / "empty.pftrace")
    rows = [
        (-500, 100, "range", "early", -1, None, 1, 1, None, None),
        (0, 10, "kernel", "k", 0, 1, None, None, None, "plain text args"),
        (5, 10, "kernel", "ünïcode ⟨名前⟩", 0, 1, None, None, -3, '{"名":"値"}'),
        (20, 1, "kernel", "empty args", 0, 1, None, None, 2**62, ""),
    ]
    _round_trip(_timeline(rows), tmp_path / "negative.pftrace")


# -- foreign traces ---------------------------------------------------------------------------

T0 = 5_000_000_000  # BOOTTIME of the first snapshot
R0 = 1_700_000_000_000_000_000  # REALTIME at T0


def _rocprof_like() -> bytes:
    """Shaped like rocprofv3 --output-format pftrace: named queue/stream tracks, interned
    names, an incremental clock, a counter track, a lost packet and a second generation."""
    packets: list[pb.TracePacket] = []
    tracks = {
        11: {"thread": pb.ThreadDescriptor(pid=4242, tid=4242, thread_name="python3")},
        12: {"name": "THREAD 1 (4250)"},
        13: {"name": "COMPUTE AGENT [1] STREAM [3] (GPU)"},
        14: {"name": "COPY to AGENT [1] STREAM [0] (GPU)"},
        15: {"name": "COMPUTE GPU [0] QUEUE [2] GPU"},
        16: {"name": "COPY BYTES to GPU [0] (GPU)", "counter": pb.CounterDescriptor()},
    }
    for uuid, fields in tracks.items():
        packets.append(TP(track_descriptor=pb.TrackDescriptor(uuid=uuid, **fields)))
    cats = ["hip_api", "kernel_dispatch", "memory_copy", "marker_api"]
    names = ["hipLaunchKernel", "void gemm<float>(float*)", "CopyHostToDevice", "roctx range"]
    notes = ["corr_id", "queue", "grid_size", "tid"]
    interned = pb.InternedData(
        event_categories=[pb.EventCategory(iid=i, name=n) for i, n in enumerate(cats, 1)],
        event_names=[pb.EventName(iid=i, name=n) for i, n in enumerate(names, 1)],
        debug_annotation_names=[
            pb.DebugAnnotationName(iid=i, name=n) for i, n in enumerate(notes, 1)
        ],
    )
    defaults = pb.TracePacketDefaults(timestamp_clock_id=64)
    seq = {"trusted_packet_sequence_id": 7}
    packets.append(
        TP(**seq, sequence_flags=1, trace_packet_defaults=defaults, interned_data=interned)
    )
    clock = pb.ClockSnapshot.Clock
    packets.append(
        TP(
            **seq,
            clock_snapshot=pb.ClockSnapshot(
                clocks=[
                    clock(clock_id=6, timestamp=T0),
                    clock(clock_id=1, timestamp=R0),
                    clock(clock_id=64, timestamp=T0, is_incremental=True),
                ]
            ),
        )
    )
    last = [T0]

    def event(t: int, **fields: Any) -> None:
        packets.append(TP(**seq, sequence_flags=2, timestamp=t - last[0], track_event=TE(**fields)))
        last[0] = t

    note = pb.DebugAnnotation
    event(
        T0 + 1000,
        type=1,
        track_uuid=11,
        category_iids=[1],
        name_iid=1,
        debug_annotations=[note(name_iid=1, uint_value=5), note(name_iid=4, uint_value=4242)],
    )
    event(T0 + 1500, type=2, track_uuid=11)
    event(
        T0 + 2000,
        type=1,
        track_uuid=13,
        category_iids=[2],
        name_iid=2,
        debug_annotations=[
            note(name_iid=1, uint_value=5),
            note(name_iid=2, uint_value=77),
            note(name_iid=3, uint_value=1024),
        ],
    )
    event(T0 + 2100, type=4, track_uuid=16, counter_value=3)
    event(T0 + 2200, type=1, track_uuid=12, category_iids=[4], name_iid=4)
    event(T0 + 2300, type=3, track_uuid=12, category_iids=[4], name_iid=4)
    event(T0 + 2500, type=2, track_uuid=12)
    event(T0 + 3000, type=2, track_uuid=13)
    event(
        T0 + 3000,
        type=1,
        track_uuid=14,
        category_iids=[3],
        name_iid=3,
        debug_annotations=[note(name_iid=1, int_value=6)],
    )
    event(T0 + 3400, type=2, track_uuid=14)
    packets.append(
        TP(
            **seq,
            previous_packet_dropped=1,
            sequence_flags=2,
            timestamp=10,
            track_event=TE(type=3, track_uuid=11, name_iid=1),
        )
    )  # lost state: skipped
    t1 = last[0] = T0 + 10_000
    again = pb.InternedData(
        event_names=[pb.EventName(iid=1, name="hipMemcpyAsync")],
        event_categories=[pb.EventCategory(iid=1, name="kernel_dispatch")],
    )
    packets.append(TP(**seq, sequence_flags=1, trace_packet_defaults=defaults, interned_data=again))
    packets.append(
        TP(
            **seq,
            clock_snapshot=pb.ClockSnapshot(
                clocks=[
                    clock(clock_id=6, timestamp=t1),
                    clock(clock_id=64, timestamp=t1, is_incremental=True),
                ]
            ),
        )
    )
    event(t1 + 100, type=1, track_uuid=15, category_iids=[1], name_iid=1)
    event(t1 + 900, type=2, track_uuid=15)
    return pb.Trace(packet=packets).SerializeToString()


def test_rocprofv3_like_trace(tmp_path: Path) -> None:
    path = tmp_path / "results.pftrace"
    path.write_bytes(_rocprof_like())
    timeline = PERFETTO.parse(path)
    got = timeline.df.with_columns(pl.col("kind", "name", "engine").cast(pl.String)).rows()
    assert got == [
        (0, 500, "api", "hipLaunchKernel", -1, None, 0, 4242, 4242, 5, None, '{"tid":4242}'),
        (
            1000,
            1000,
            "kernel",
            "void gemm<float>(float*)",
            1,
            3,
            0,
            None,
            None,
            5,
            "sm",
            '{"queue":77,"grid_size":1024}',
        ),
        (1200, 300, "range", "roctx range", -1, None, 0, None, 4250, None, None, None),
        (1300, 0, "marker", "roctx range", -1, None, 0, None, 4250, None, None, None),
        (2000, 400, "memcpy", "CopyHostToDevice", 1, 0, 0, None, None, 6, "copy", None),
        (9100, 800, "kernel", "hipMemcpyAsync", 0, 2, 0, None, None, None, "sm", None),
    ]
    meta = timeline.meta
    assert meta["origin_ns"] == R0 + 1000 and meta["clock"] == "BOOTTIME"
    assert meta["producer"]["name"].startswith("rocprofv3")
    assert [d["index"] for d in meta["devices"]] == [0, 1]
    assert meta["warnings"] == [
        "skipped 1 events whose incremental state was lost before them",
        "skipped 1 counter track events",
    ]


def _sdk_app_like() -> bytes:
    """Shaped like a Perfetto SDK app: a legacy thread descriptor, inline names and
    categories, MONOTONIC timestamps, nested annotations, compressed packets."""
    mono, boot = 900_000, T0 + 5_000_000
    clock = pb.ClockSnapshot.Clock
    snapshot = pb.ClockSnapshot(
        clocks=[clock(clock_id=3, timestamp=mono), clock(clock_id=6, timestamp=boot)]
    )
    thread = pb.ThreadDescriptor(pid=100, tid=101, thread_name="main")
    packets = [
        TP(clock_snapshot=snapshot),
        TP(trusted_packet_sequence_id=3, incremental_state_cleared=True, thread_descriptor=thread),
    ]
    inner = []

    def event(t: int, **fields: Any) -> None:
        inner.append(
            TP(
                trusted_packet_sequence_id=3,
                timestamp=mono + t,
                timestamp_clock_id=3,
                track_event=TE(**fields),
            )
        )

    note = pb.DebugAnnotation
    shape = note(
        name="shape",
        dict_entries=[note(name="n", int_value=3), note(name="dt", string_value="f16")],
    )
    event(
        100,
        type=1,
        name="step 1",
        categories=["app"],
        debug_annotations=[
            note(name="batch", int_value=8),
            note(name="ratio", double_value=0.5),
            note(name="ok", bool_value=True),
            shape,
        ],
    )
    event(150, type=3, name="tick", categories=["app"])
    event(200, type=1, name="inner", categories=["app"], correlation_id=99)
    event(300, type=2)
    event(900, type=2)
    event(
        1000,
        name="legacy complete",
        categories=["app"],
        legacy_event=TE.LegacyEvent(phase=ord("X"), duration_us=7),
    )
    body = pb.Trace(packet=inner).SerializeToString()
    packets.append(TP(compressed_packets=zlib.compress(body)))
    return pb.Trace(packet=packets).SerializeToString()


def test_sdk_app_like_trace(tmp_path: Path) -> None:
    path = tmp_path / "app.perfetto-trace"
    path.write_bytes(_sdk_app_like())
    timeline = PERFETTO.parse(path)
    got = timeline.df.select("ts", "dur", "kind", "name", "device", "pid", "tid", "corr", "args")
    assert got.with_columns(pl.col("kind", "name").cast(pl.String)).rows() == [
        (
            0,
            800,
            "range",
            "step 1",
            -1,
            100,
            101,
            None,
            '{"batch":8,"ratio":0.5,"ok":true,"shape":{"n":3,"dt":"f16"}}',
        ),
        (50, 0, "marker", "tick", -1, 100, 101, None, None),
        (100, 100, "range", "inner", -1, 100, 101, 99, None),
        (900, 7000, "range", "legacy complete", -1, 100, 101, None, None),
    ]
    assert timeline.meta["origin_ns"] is None
    assert "origin_ns unknown" in timeline.meta["warnings"][0]


def test_cut_at_a_packet_boundary_keeps_whole_slices(tmp_path: Path) -> None:
    data = pb.Trace.FromString(_sdk_app_like())
    inner = pb.Trace.FromString(zlib.decompress(data.packet[-1].compressed_packets))
    del inner.packet[-2:]  # the end of "step 1" and the legacy event are lost
    data.packet[-1].compressed_packets = zlib.compress(inner.SerializeToString())
    path = tmp_path / "cut.pftrace"
    path.write_bytes(data.SerializeToString())
    timeline = PERFETTO.parse(path)
    assert timeline.df["name"].cast(pl.String).to_list() == ["tick", "inner"]
    assert "1 slices never ended (trace cut short?); dropped" in timeline.meta["warnings"]
