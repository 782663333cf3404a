"""Timeline rows of one rocpd uuid set: kernel dispatches, regions, samples, memory copies.

``corr`` is the internal correlation id (``rocpd_event.stack_id``) on every row that has
one — API calls, the kernels and copies they enqueued, and roctx ranges and marks (the
same value rocprofv3 writes in the CSV ``Correlation_Id`` column); the external id
(``correlation_id``, 0 unless a tool pushed one) goes to args as ``ext_corr``.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from tracekit.parsers.assemble import Part
from tracekit.parsers.rocprof.args import INT, STR, Field, json_args
from tracekit.parsers.rocprof.rocpd.info import category_group, correlation, nonzero
from tracekit.parsers.rocprof.rocpd.tables import SYMBOL_BIT, Read, SetReader
from tracekit.parsers.rocprof.sdk import ROCTX_CALLS
from tracekit.parsers.rocprof.table import durations

_DISPATCH_COLUMNS = (
    "pid",
    "agent_id",
    "kernel_id",
    "dispatch_id",
    "queue_id",
    "stream_id",
    "start",
    "end",
    "private_segment_size",
    "group_segment_size",
    "workgroup_size_x",
    "workgroup_size_y",
    "workgroup_size_z",
    "grid_size_x",
    "grid_size_y",
    "grid_size_z",
    "region_name_id",
)
_COPY_COLUMNS = (
    "pid",
    "tid",
    "start",
    "end",
    "name_id",
    "dst_agent_id",
    "src_agent_id",
    "size",
    "queue_id",
    "stream_id",
)
_REGISTERS = ("sgpr_count", "arch_vgpr_count", "accum_vgpr_count")
KERNELS: Read = ("rocpd_kernel_dispatch", _DISPATCH_COLUMNS, True)
REGIONS: Read = ("rocpd_region", ("pid", "tid", "start", "end", "name_id", "event_id"), True)
SAMPLES: Read = ("rocpd_sample", ("track_id", "timestamp", "event_id"), True)
TRACKS: Read = ("rocpd_track", ("id", "pid", "tid", "name_id"), False)
COPIES: Read = ("rocpd_memory_copy", _COPY_COLUMNS, True)
READS = (KERNELS, REGIONS, SAMPLES, TRACKS, COPIES)  # in the order database.parse uses them
API, RANGE, MARKER, OTHER = 0, 1, 2, 3  # region kind codes
_KIND_NAMES = {API: "api", RANGE: "range", MARKER: "marker"}


def kernels(r: SetReader) -> list[Part]:
    """``rocpd_kernel_dispatch`` rows: names from the kernel symbols, agent -> GPU index,
    queue -> stream, launch shape and registers in args."""
    df = r.frame(*KERNELS)
    if df is None or not df.height:
        return []
    df = r.valid(df, "kernel")
    sym = r.symbols.select(
        pl.col("id").alias("kernel_id"),
        *(
            pl.col(c) if c in r.symbols.columns else pl.lit(None, pl.Int64).alias(c)
            for c in _REGISTERS
        ),
    )
    df = df.join(sym, on="kernel_id", how="left", maintain_order="left")
    regions = r.strings.filter(pl.col("string") != "")  # an empty region name is none
    args = json_args(
        df,
        Field("grid", tuple(f"grid_size_{a}" for a in "xyz"), INT, True),
        Field("workgroup", tuple(f"workgroup_size_{a}" for a in "xyz"), INT, True),
        Field("lds", "group_segment_size", INT, True),
        Field("scratch", "private_segment_size", INT, True),
        Field("vgpr", "arch_vgpr_count", INT, True),
        Field("accum_vgpr", "accum_vgpr_count", INT, True),
        Field("sgpr", "sgpr_count", INT, True),
        Field("hip_stream", "stream_id", INT, True),
        Field("dispatch_id", "dispatch_id"),
        Field("region", "region_name_id", STR, lookup=regions),
        Field("ext_corr", nonzero("correlation_id")),
    )
    name = r.pool.from_ids((df["kernel_id"] + (r.key | SYMBOL_BIT)).to_arrow())
    r.count_unnamed(name, "kernel")
    columns = {
        "device": r.gpu(df["agent_id"], "kernel"),
        "stream": df["queue_id"].to_arrow(),
        "rank": 0,
        "pid": r.map_ids(df["pid"], r.pid_of),
        "corr": correlation(df),
        "args": args,
    }
    dur = durations(df["start"], df["end"], "kernel", r.warnings)
    return [Part("kernel", df["start"].to_arrow(), dur, name, "sm", columns)]


def _kind_codes(r: SetReader, df: pl.DataFrame, instant: pl.Expr, what: str) -> pl.Series:
    """api / range / marker / other per row, decided once per distinct category (and, for
    roctx rows, per name: bookkeeping calls such as roctxRangePop are API calls, as the
    rocprofv3 CSV reader reads them)."""
    ids = df["category_id"].unique()
    texts = r.strings_of(ids)
    groups = [category_group(t) for t in texts.to_list()]
    code = {"api": API, "marker": RANGE}
    group = df["category_id"].replace_strict(
        ids, [code.get(g, OTHER) for g in groups], default=OTHER, return_dtype=pl.Int8
    )
    codes = group.to_numpy().copy()
    if others := int((codes == OTHER).sum()):
        names = sorted({str(t) for t, g in zip(texts.to_list(), groups) if g == "other"})
        what_else = "read as ranges" if what == "region" else "not read"
        r.warnings.append(f"{others} {what}s of categories {', '.join(names)} {what_else}")
    rows = np.flatnonzero(codes == RANGE)
    if not len(rows):
        return group
    marks = df[rows].with_columns(instant.alias("_instant"))  # roctx rows are few: look closer
    call = r.strings_of(marks["name_id"]).is_in(ROCTX_CALLS).fill_null(False).to_numpy()
    codes[rows] = np.where(call, API, np.where(marks["_instant"].to_numpy(), MARKER, RANGE))
    return pl.Series(codes)


def _split(df: pl.DataFrame, codes: pl.Series) -> list[tuple[int, pl.DataFrame]]:
    """The frame's rows per kind code, in code order (no copy when all share one kind)."""
    present = sorted(codes.unique().to_list())
    if len(present) == 1:
        return [(present[0], df)]
    return [(c, df.filter(codes == c)) for c in present]


def _host_part(
    r: SetReader, kind: int, sel: pl.DataFrame, ts: str, what: str, dur: object = None
) -> Part:
    """One kind of host rows: ``category`` (and ``ext_corr``) in args, roctx messages as
    names for ranges and marks, the internal correlation id as ``corr``."""
    args = json_args(
        sel,
        Field("category", "category_id", STR, True, r.strings),
        Field("ext_corr", nonzero("correlation_id")),
    )
    name = r.names(sel, messages=kind != API)
    r.count_unnamed(name, what)
    if dur is None:
        dur = np.zeros(sel.height, dtype=np.int64)
    columns = {
        "device": -1,
        "rank": 0,
        "pid": r.map_ids(sel["pid"], r.pid_of),
        "tid": r.map_ids(sel["tid"], r.tid_of),
        "corr": correlation(sel),
        "args": args,
    }
    return Part(_KIND_NAMES[kind], sel[ts].to_arrow(), dur, name, None, columns)


def regions(r: SetReader) -> list[Part]:
    """``rocpd_region`` rows: HIP/HSA/RCCL/… calls as ``api``, roctx ranges as ``range``
    (``marker`` when start == end), other categories as ranges (with a warning)."""
    df = r.frame(*REGIONS)
    if df is None or not df.height:
        return []
    df = r.valid(df, "region")
    codes = _kind_codes(r, df, pl.col("start") == pl.col("end"), "region")
    parts = []
    for kind, sel in _split(df, codes.replace(OTHER, RANGE)):
        dur = (
            None
            if kind == MARKER
            else durations(sel["start"], sel["end"], f"{_KIND_NAMES[kind]} region", r.warnings)
        )
        parts.append(_host_part(r, kind, sel, "start", "region", dur))
    return parts


def samples(r: SetReader) -> list[Part]:
    """Instants: rocprofiler-sdk stores API records with start == end (roctxMarkA, …)
    as ``rocpd_sample`` rows on a per-thread track named by their category."""
    df = r.frame(*SAMPLES)
    tracks = r.frame(*TRACKS)
    if df is None or not df.height or tracks is None:
        return []
    df = df.join(
        tracks.rename({"id": "track_id"}), on="track_id", how="left", maintain_order="left"
    ).filter(pl.col("timestamp").is_not_null())
    known = pl.col("category_id").is_in(r.strings["id"].implode())
    df = df.with_columns(category_id=pl.when(known).then("category_id").otherwise("name_id"))
    codes = _kind_codes(r, df, pl.lit(True), "rocpd sample")
    parts = []
    for code, sel in _split(df, codes):
        if code == OTHER:
            continue
        if code == API:
            r.warnings.append(
                f"{sel.height} zero-length API calls are rocpd samples without their"
                " function name; named by their category"
            )
        parts.append(_host_part(r, code, sel, "timestamp", "sample"))
    return parts


def copies(r: SetReader) -> list[Part]:
    """``rocpd_memory_copy`` rows on the GPU end of the copy, agents named in args."""
    df = r.frame(*COPIES)
    if df is None or not df.height:
        return []
    df = r.valid(df, "memory copy")
    dst = df["dst_agent_id"].replace_strict(r.gpu_of, default=None, return_dtype=pl.Int64)
    src = df["src_agent_id"].replace_strict(r.gpu_of, default=None, return_dtype=pl.Int64)
    labels = {k: v for k, v in r.agent_label.items() if k is not None}
    df = df.with_columns(
        device=dst.fill_null(src),
        src=pl.col("src_agent_id").replace_strict(labels, default=None, return_dtype=pl.String),
        dst=pl.col("dst_agent_id").replace_strict(labels, default=None, return_dtype=pl.String),
    )
    if unmapped := int(df["device"].is_null().sum()):
        r.warnings.append(f"{unmapped} memory copy rows touch no known GPU; device left empty")
    args = json_args(
        df,
        Field("bytes", "size", INT, True),
        Field("src", "src", STR, True),
        Field("dst", "dst", STR, True),
        Field("hip_stream", "stream_id", INT, True),
        Field("ext_corr", nonzero("correlation_id")),
    )
    name = r.pool.from_ids((df["name_id"] + r.key).to_arrow())
    r.count_unnamed(name, "memory copy")
    columns = {
        "device": df["device"].to_arrow(),
        "stream": df["queue_id"].to_arrow(),
        "rank": 0,
        "pid": r.map_ids(df["pid"], r.pid_of),
        "corr": correlation(df),
        "args": args,
    }
    dur = durations(df["start"], df["end"], "memory copy", r.warnings)
    return [Part("memcpy", df["start"].to_arrow(), dur, name, "copy", columns)]
