"""Legacy rocprof kernel tables: ``results.csv`` (v1) and the rocprofv2 file-plugin CSV.

v1 (``rocprof --stats`` / ``--timestamp on`` / ``-i counters.txt``): ``Index,KernelName,
gpu-id,queue-id,queue-index,pid,tid,grd,wgr,lds,scr,`` then ``vgpr,sgpr,fbar`` (ROCm < 5)
or ``arch_vgpr,accum_vgpr,sgpr,wave_size`` (ROCm 5+), ``sig,obj``, the counters, then
``DispatchNs,BeginNs,EndNs,CompleteNs`` and, after ``--stats``, ``DurationNs``.
rocprofv2 file plugin version 2: ``Dispatch_ID,GPU_ID,Queue_ID,PID,TID,Grid_Size,
Workgroup_Size,LDS_Per_Workgroup,Scratch_Per_Workitem,Arch_VGPR,Accum_VGPR,SGPR,Wave_Size,
Kernel_Name,Start_Timestamp,End_Timestamp,Correlation_ID`` and the counters.
``gpu-id`` / ``GPU_ID`` is the GPU index; kernel rows carry no API link in these files.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from tracekit.errors import TraceError
from tracekit.parsers.rocprof.legacy_rows import Frames

V1_HEAD, V2_HEAD = b"Index,KernelName,", b"Dispatch_ID,GPU_ID,"
_V1 = {"Index": "dispatch", "KernelName": "name", "gpu-id": "gpu", "queue-id": "queue",
       "pid": "pid", "tid": "tid", "grd": "grid", "wgr": "workgroup", "lds": "lds",
       "scr": "scratch", "vgpr": "vgpr", "arch_vgpr": "vgpr", "accum_vgpr": "accum_vgpr",
       "sgpr": "sgpr", "wave_size": "wave_size", "BeginNs": "begin", "EndNs": "end"}  # fmt: skip
_V2 = {"Dispatch_ID": "dispatch", "Kernel_Name": "name", "GPU_ID": "gpu", "Queue_ID": "queue",
       "PID": "pid", "TID": "tid", "Grid_Size": "grid", "Workgroup_Size": "workgroup",
       "LDS_Per_Workgroup": "lds", "Scratch_Per_Workitem": "scratch", "Arch_VGPR": "vgpr",
       "Accum_VGPR": "accum_vgpr", "SGPR": "sgpr", "Wave_Size": "wave_size",
       "Start_Timestamp": "begin", "End_Timestamp": "end", "Correlation_ID": "corr"}  # fmt: skip


def sniff_head(head: bytes) -> bool:
    first = head.lstrip(b"\xef\xbb\xbf").lstrip()
    return first.startswith((V1_HEAD, V2_HEAD))


def read(path: Path) -> Frames:
    """Read a v1 ``results.csv`` or rocprofv2 kernel CSV into :class:`Frames`."""
    with path.open("rb") as fh:
        head = fh.read(4096)
    mapping = _V2 if head.lstrip(b"\xef\xbb\xbf").lstrip().startswith(V2_HEAD) else _V1
    try:
        df = pl.read_csv(path, infer_schema=False, truncate_ragged_lines=True,
                         encoding="utf8-lossy")  # fmt: skip
    except (pl.exceptions.ComputeError, pl.exceptions.NoDataError, OSError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise TraceError(f"{path}: cannot read as rocprof CSV ({first}); check the file") from exc
    df = df.select([c for c in df.columns if c.strip() and not c.startswith("_duplicated")])
    df = df.rename({c: c.strip() for c in df.columns})
    name_col = "Kernel_Name" if mapping is _V2 else "KernelName"
    begin_col, end_col = ("Start_Timestamp", "End_Timestamp") if mapping is _V2 else (
        "BeginNs", "EndNs")  # fmt: skip
    if name_col not in df.columns:
        raise TraceError(f"{path}: rocprof CSV without a {name_col} column; not a kernel table")
    if begin_col not in df.columns or end_col not in df.columns:
        raise TraceError(
            f"{path}: rocprof CSV holds no {begin_col}/{end_col} columns (counters only);"
            " profile with `rocprof --timestamp on` or `--stats` to get kernel times"
        )
    present, targets = [], set()
    for column, target in mapping.items():
        if column in df.columns and target not in targets:
            present.append(column)
            targets.add(target)
    out = df.select(
        pl.col(c).str.strip_chars().cast(pl.String if mapping[c] == "name" else pl.Int64,
                                         strict=False).alias(mapping[c])
        for c in present
    )  # fmt: skip
    frames = Frames()
    out = out.filter(pl.col("name").is_not_null() | pl.col("begin").is_not_null())
    bad = out.filter(pl.col("begin").is_null() | pl.col("end").is_null())
    if bad.height:
        frames.warnings.append(
            f"{bad.height} kernel rows with unreadable {begin_col}/{end_col}; dropped"
        )
        out = out.filter(pl.col("begin").is_not_null() & pl.col("end").is_not_null())
    if not out.height:
        raise TraceError(f"{path}: rocprof CSV has a header but no kernel rows")
    frames.device = out.with_columns(copy=pl.lit(False))
    return frames
