"""Legacy rocprof ``results.json``: a Chrome trace written by rocprof's tblextr.py.

Numbers are JSON strings; ``pid`` is a lane (0 roctx, 1 COPY, 2 CPU HIP API, 3 CPU HSA API,
6 + n GPU n, 518 + n its barrier packets); ``args.BeginNs``/``EndNs`` hold exact ns (the
``ts``/``dur`` µs values are truncated copies and are used only to bind flows).

API -> device links come from the ``DataFlow`` flow events: ``t`` sits at the device row's
``ts`` on its lane and thread; ``s`` sits at the API call's midpoint (``ts + dur // 2``) on
the API thread, or at the device row's ``ts`` when that is earlier. So a flow binds to the
first call on that thread whose midpoint is at or after ``s`` — among the calls that can
enqueue device work, as tblextr.py chooses them (copies, memsets, kernel launches, graph
launches, synchronisation). Rows of one call share ``corr`` (its lowest flow id).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import polars as pl

from tracekit.errors import TraceError
from tracekit.parsers.convert import texts
from tracekit.parsers.io import read_bytes
from tracekit.parsers.rocprof.legacy.rows import Frames

Val = str | int | float | None
EXT_LANE, COPY_LANE, HIP_LANE, HSA_LANE, GPU_LANE, BARRIER_LANE = 0, 1, 2, 3, 6, 518
_OP_CALL = (
    r"^(hipMemcpy|hipMemset)|hipGraphLaunch|WaitEvent|hipStreamSynchronize"
    r"|hipDeviceSynchronize|hipStreamWaitValue|hipStreamWriteValue"
)


Text = str | None  # rocprof writes every args value as a JSON string


class Args(msgspec.Struct, gc=False):
    BeginNs: Text = None
    EndNs: Text = None
    Name: Text = None
    KernelName: Text = None
    pid: Text = None
    tid: Text = None
    dev_id: Text = msgspec.field(name="dev-id", default=None)
    gpu_id: Text = msgspec.field(name="gpu-id", default=None)
    queue_id: Text = msgspec.field(name="queue-id", default=None)
    stream_id: Text = msgspec.field(name="stream-id", default=None)
    call: Text = msgspec.field(name="args", default=None)
    grd: Text = None
    wgr: Text = None
    lds: Text = None
    scr: Text = None
    vgpr: Text = None
    arch_vgpr: Text = None
    accum_vgpr: Text = None
    sgpr: Text = None
    wave_size: Text = None


class Event(msgspec.Struct, gc=False):
    ph: str | None = None
    name: Val = None
    cat: str | None = None
    pid: Val = None
    tid: Val = None
    ts: Val = None
    dur: Val = None
    id: Val = None
    args: Args | None = None


class Trace(msgspec.Struct, gc=False):
    traceEvents: list[Event] | None = None
    otherData: dict[str, Any] | None = None


def _lenient(struct: type, **overrides: Any) -> Any:
    """``struct`` with every field typed ``Any``: for files that stray from rocprof's types."""
    fields = []
    for info in msgspec.structs.fields(struct):
        kind = overrides.get(info.name, Any)
        fields.append((info.name, kind, msgspec.field(name=info.encode_name, default=None)))
    return msgspec.defstruct(f"Lenient{struct.__name__}", fields, gc=False)


_LenientArgs = _lenient(Args)
_LenientEvent = _lenient(Event, args=_LenientArgs | None, ph=Any)
_LenientTrace = _lenient(Trace, traceEvents=list[_LenientEvent] | None, otherData=Any)
_DECODERS = (msgspec.json.Decoder(Trace), msgspec.json.Decoder(_LenientTrace))


def sniff_head(head: bytes) -> bool:
    """rocprof's JSON starts ``{ "traceEvents":[{}`` and labels its lanes right after."""
    text = head[:4096]
    if b'"traceEvents"' not in text:
        return False
    lanes = (b'"CPU HIP API"', b'"CPU HSA API"', b'"Markers and Ranges"', b'"BeginNs"')
    return text.lstrip().startswith(b'{ "traceEvents":[{}') or any(m in text for m in lanes)


def read(path: Path) -> tuple[Frames, dict[str, Any]]:
    """Read a ``results.json`` into :class:`Frames`, plus its ``otherData`` (rocminfo)."""
    data = read_bytes(path)
    try:
        try:
            trace = _DECODERS[0].decode(data)
        except msgspec.ValidationError:
            trace = _DECODERS[1].decode(data)
    except msgspec.ValidationError as exc:
        raise TraceError(
            f"{path}: JSON that is not a rocprof trace ({exc}); pass results.db instead"
        ) from exc
    except msgspec.DecodeError as exc:
        raise TraceError(
            f"{path}: not valid JSON ({exc}); the file may be truncated (rocprof killed before"
            " it finished?) — pass results.db from the same run instead"
        ) from exc
    events = trace.traceEvents or []
    frames = Frames()
    slices = [e for e in events if e.ph == "X"]
    if not slices:
        raise TraceError(f"{path}: rocprof JSON holds no events; the profiled run recorded nothing")
    rows = _slices(slices, frames.warnings)
    flows = _flows([e for e in events if e.ph in ("s", "t", "f") and e.cat == "DataFlow"])
    rows = _correlate(rows, flows, frames.warnings)
    lane = pl.col("lane")
    frames.api = rows.filter(lane.is_in([HIP_LANE, HSA_LANE]))
    device = rows.filter((lane == COPY_LANE) | (lane >= GPU_LANE))
    kern = device.filter(pl.col("kern"))
    if kern.height and device.filter(~pl.col("kern") & (lane >= GPU_LANE)).height:
        frames.warnings.append(
            f"{kern.height} KERN rows not read: OPS rows hold the same dispatches with their"
            " API link"
        )
        device = device.filter(~pl.col("kern"))
    frames.device = device.with_columns(
        copy=lane == COPY_LANE,
        node=pl.when(pl.col("kern")).then(None).otherwise(pl.col("node")),
        dispatch=pl.when(pl.col("kern")).then(pl.col("dispatch")),
    )
    frames.markers = rows.filter(lane == EXT_LANE)
    other = rows.filter(~lane.is_in([EXT_LANE, COPY_LANE, HIP_LANE, HSA_LANE]) & (lane < GPU_LANE))
    if other.height:
        frames.warnings.append(f"{other.height} rows on lanes rocprof does not define; dropped")
    other = trace.otherData
    return frames, other if isinstance(other, dict) else {}


def _strings(values: list[Any]) -> pl.Series:
    return pl.Series(texts(values))


def _ints(values: list[Any]) -> pl.Series:
    """Integral text -> Int64, null elsewhere: cast by polars as a column (rocprof writes every
    number as a JSON string; :func:`tracekit.parsers.convert.ints` would go value by value)."""
    return _strings(values).str.strip_chars().cast(pl.Int64, strict=False)


_KERN_FIELDS = {
    "grid": "grd",
    "workgroup": "wgr",
    "lds": "lds",
    "scratch": "scr",
    "accum_vgpr": "accum_vgpr",
    "sgpr": "sgpr",
    "wave_size": "wave_size",
}


def _slices(events: list[Any], warnings: list[str]) -> pl.DataFrame:
    """Complete events as columns; exact ns from args, µs fields kept for flow binding."""
    empty = Args()
    args = [e.args or empty for e in events]
    kern = [a.KernelName is not None for a in args]
    columns = {
        "lane": _ints([e.pid for e in events]),
        "lane_tid": _ints([e.tid for e in events]),
        "ts_us": _ints([e.ts for e in events]),
        "dur_us": _ints([e.dur for e in events]),
        "begin": _ints([a.BeginNs for a in args]),
        "end": _ints([a.EndNs for a in args]),
        "label": _strings([e.name for e in events]),
        "name": _strings([a.Name if a.Name is not None else a.KernelName for a in args]),
        "kern": pl.Series(kern, dtype=pl.Boolean),
        "pid": _ints([a.pid for a in args]),
        "tid": _ints([a.tid for a in args]),
        "node": _ints([a.dev_id for a in args]),
        "queue": _ints([a.queue_id for a in args]),
        "stream": _ints([a.stream_id for a in args]),
        "call": _strings([a.call for a in args]),
    }
    if any(kern):  # KERN rows (--stats / --timestamp on) carry the dispatch fields
        columns["gpu"] = _ints([a.gpu_id for a in args])
        for column, key in _KERN_FIELDS.items():
            columns[column] = _ints([getattr(a, key) for a in args])
        columns["vgpr"] = _ints([a.vgpr if a.arch_vgpr is None else a.arch_vgpr for a in args])
    df = pl.DataFrame(columns).with_row_index("row")
    df = df.with_columns(name=pl.coalesce("name", "label"), dispatch=pl.lit(None, pl.Int64))
    coarse = df.filter(pl.col("begin").is_null() | pl.col("end").is_null())
    if coarse.height:
        warnings.append(f"{coarse.height} rows without BeginNs/EndNs; times taken from µs ts/dur")
        df = df.with_columns(
            begin=pl.coalesce("begin", pl.col("ts_us") * 1000),
            end=pl.coalesce("end", (pl.col("ts_us") + pl.col("dur_us")) * 1000),
        )
    lost = df.filter(pl.col("begin").is_null() | pl.col("end").is_null() | pl.col("lane").is_null())
    if lost.height:
        warnings.append(f"{lost.height} rows without a time or lane; dropped")
        df = df.filter(
            pl.col("begin").is_not_null()
            & pl.col("end").is_not_null()
            & pl.col("lane").is_not_null()
        )
    return df


def _flows(events: list[Event]) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "id": _ints([e.id for e in events]),
            "ph": _strings([e.ph for e in events]),
            "lane": _ints([e.pid for e in events]),
            "lane_tid": _ints([e.tid for e in events]),
            "ts_us": _ints([e.ts for e in events]),
        }
    ).drop_nulls()


def _correlate(rows: pl.DataFrame, flows: pl.DataFrame, warnings: list[str]) -> pl.DataFrame:
    """``corr`` for API calls and device rows joined by a flow; null elsewhere."""
    lane = pl.col("lane")
    starts = flows.filter((pl.col("ph") == "s") & lane.is_in([HIP_LANE, HSA_LANE]))
    ends = flows.filter(pl.col("ph").is_in(["t", "f"]) & ((lane == COPY_LANE) | (lane >= GPU_LANE)))
    device = rows.filter((lane == COPY_LANE) | (lane >= GPU_LANE)).select(
        "row", "lane", "lane_tid", "ts_us"
    )
    # t -> the device row starting at that µs on that lane (and thread, when it matches)
    bound_t = ends.join(device, on=["lane", "lane_tid", "ts_us"], how="left")
    bound_t = bound_t.unique(subset="id", keep="first", maintain_order=True)
    loose = bound_t.filter(pl.col("row").is_null()).drop("row")
    if loose.height:
        by_lane = device.unique(subset=["lane", "ts_us"], keep="first").drop("lane_tid")
        again = loose.join(by_lane, on=["lane", "ts_us"], how="left")
        bound_t = pl.concat([bound_t.filter(pl.col("row").is_not_null()), again])
    bound_t = bound_t.select("id", dev_row="row")
    # s -> the first API call on that thread whose midpoint is at or after s
    calls = rows.filter(lane.is_in([HIP_LANE, HSA_LANE]))
    calls = (
        calls.filter(
            (lane == HSA_LANE)
            | pl.col("name").str.contains(_OP_CALL)
            | pl.col("call").fill_null("").str.contains(" kernel(", literal=True)
        )
        .select("row", "lane", "lane_tid", mid=pl.col("ts_us") + pl.col("dur_us").fill_null(0) // 2)
        .sort("mid")
    )
    bound_s = (
        starts.sort("ts_us")
        .join_asof(
            calls,
            left_on="ts_us",
            right_on="mid",
            by=["lane", "lane_tid"],
            strategy="forward",
            check_sortedness=False,
        )
        .select("id", api_row="row")
    )
    pairs = bound_s.join(bound_t, on="id", how="inner").drop_nulls()
    unbound = starts.join(ends, on="id", how="semi").height - pairs.height
    if unbound > 0:
        warnings.append(f"{unbound} DataFlow links without an API call or device row; not used")
    api_corr = pairs.group_by("api_row").agg(corr=pl.col("id").min())
    dev_corr = (
        pairs.join(api_corr, on="api_row")
        .group_by("dev_row")
        .agg(pl.col("corr").min())
        .rename({"dev_row": "row"})
    )
    links = pl.concat([api_corr.rename({"api_row": "row"}), dev_corr])
    rows = rows.join(links, on="row", how="left", maintain_order="left")
    return rows.with_columns(corr=pl.col("corr").cast(pl.Int64)).drop("row")
