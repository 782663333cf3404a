"""Legacy rocprof kernel tables: ``results.csv`` (v1) and the rocprofv2 file-plugin CSV.

v1 (``rocprof --stats`` / ``--timestamp on`` / ``-i counters.txt``): ``Index,KernelName,
gpu-id,queue-id,queue-index,pid,tid,grd,wgr,lds,scr,`` then ``vgpr,sgpr,fbar`` (ROCm < 5)
or ``arch_vgpr,accum_vgpr,sgpr,wave_size`` (ROCm 5+), ``sig,obj``, the counters, then
``DispatchNs,BeginNs,EndNs,CompleteNs`` and, after ``--stats``, ``DurationNs``.
rocprofv2 file plugin version 2: ``Dispatch_ID,GPU_ID,Queue_ID,PID,TID,Grid_Size,
Workgroup_Size,LDS_Per_Workgroup,Scratch_Per_Workitem,Arch_VGPR,Accum_VGPR,SGPR,Wave_Size,
Kernel_Name,Start_Timestamp,End_Timestamp,Correlation_ID`` and the counters.
``gpu-id`` / ``GPU_ID`` is the GPU index; kernel rows carry no API link in these files.

The header decides, not its layout: rocprof writes it bare (plain ``-i``/``--timestamp``
runs) or every name quoted (``--stats`` and the trace modes, whose CSV comes from SQLite);
columns may come in any order, a UTF-8 BOM and CRLF line ends (files re-saved on Windows)
read the same, and ``DurationNs`` is not needed (kernel times are ``EndNs - BeginNs``).
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from tracekit.errors import TraceError
from tracekit.parsers.rocprof.csv_header import read_header
from tracekit.parsers.rocprof.legacy.rows import Frames

_V1 = {
    "Index": "dispatch",
    "KernelName": "name",
    "gpu-id": "gpu",
    "queue-id": "queue",
    "pid": "pid",
    "tid": "tid",
    "grd": "grid",
    "wgr": "workgroup",
    "lds": "lds",
    "scr": "scratch",
    "vgpr": "vgpr",
    "arch_vgpr": "vgpr",
    "accum_vgpr": "accum_vgpr",
    "sgpr": "sgpr",
    "wave_size": "wave_size",
    "BeginNs": "begin",
    "EndNs": "end",
}
_V2 = {
    "Dispatch_ID": "dispatch",
    "Kernel_Name": "name",
    "GPU_ID": "gpu",
    "Queue_ID": "queue",
    "PID": "pid",
    "TID": "tid",
    "Grid_Size": "grid",
    "Workgroup_Size": "workgroup",
    "LDS_Per_Workgroup": "lds",
    "Scratch_Per_Workitem": "scratch",
    "Arch_VGPR": "vgpr",
    "Accum_VGPR": "accum_vgpr",
    "SGPR": "sgpr",
    "Wave_Size": "wave_size",
    "Start_Timestamp": "begin",
    "End_Timestamp": "end",
    "Correlation_ID": "corr",
}


V1_KEYS, V2_KEYS = {"KernelName", "gpu-id"}, {"Kernel_Name", "GPU_ID", "Dispatch_ID"}


def header_kind(columns: list[str]) -> str | None:
    """``"v1"`` (rocprof ``results.csv``), ``"v2"`` (rocprofv2 kernel CSV) or None."""
    cols = set(columns)
    if cols >= V1_KEYS and ({"Index", "BeginNs"} & cols):
        return "v1"
    if cols >= V2_KEYS:
        return "v2"
    return None


def sniff_head(head: bytes) -> bool:
    """A rocprof v1 ``results.csv`` or rocprofv2 kernel CSV, by the names in its header."""
    return header_kind(read_header(Path(), head)) is not None


def read(path: Path) -> Frames:
    """Read a v1 ``results.csv`` or rocprofv2 kernel CSV into :class:`Frames`."""
    mapping = _V2 if header_kind(read_header(path)) == "v2" else _V1
    try:
        df = pl.read_csv(
            path, infer_schema=False, truncate_ragged_lines=True, encoding="utf8-lossy"
        )
    except (pl.exceptions.ComputeError, pl.exceptions.NoDataError, OSError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise TraceError(f"{path}: cannot read as rocprof CSV ({first}); check the file") from exc
    df = df.select([c for c in df.columns if c.strip() and not c.startswith("_duplicated")])
    df = df.rename({c: c.strip().strip('"').lstrip("\ufeff") for c in df.columns})
    name_col = "Kernel_Name" if mapping is _V2 else "KernelName"
    begin_col, end_col = (
        ("Start_Timestamp", "End_Timestamp") if mapping is _V2 else ("BeginNs", "EndNs")
    )
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
        pl.col(c)
        .str.strip_chars()
        .cast(pl.String if mapping[c] == "name" else pl.Int64, strict=False)
        .alias(mapping[c])
        for c in present
    )
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
