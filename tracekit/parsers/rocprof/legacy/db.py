"""Legacy rocprof ``results.db``: tables HIP, HSA, OPS, COPY, KERN and rocTX.

``Index`` is the correlation: a HIP (or HSA) row's own call number, and on an OPS/COPY row
the number of the call that enqueued it. HSA call numbers are moved up by
:data:`HSA_CORR_OFFSET` when HIP calls are present too, since both count from 1.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from tracekit.errors import TraceError
from tracekit.parsers.rocprof.legacy.rows import HSA_CORR_OFFSET, Frames
from tracekit.parsers.rocprof.sqlite_tables import RESULTS_TABLES
from tracekit.parsers.sqlite import SqliteSource

_API = {
    "BeginNs": "begin",
    "EndNs": "end",
    "pid": "pid",
    "tid": "tid",
    "Name": "name",
    "args": "call",
    "Index": "corr",
}
_OPS = {
    "BeginNs": "begin",
    "EndNs": "end",
    "dev-id": "node",
    "queue-id": "queue",
    "stream-id": "stream",
    "Name": "name",
    "pid": "pid",
    "tid": "tid",
    "Index": "corr",
    "roctx-range": "roctx",
}
_KERN = {
    "BeginNs": "begin",
    "EndNs": "end",
    "gpu-id": "gpu",
    "queue-id": "queue",
    "KernelName": "name",
    "pid": "pid",
    "tid": "tid",
    "Index": "dispatch",
    "grd": "grid",
    "wgr": "workgroup",
    "lds": "lds",
    "scr": "scratch",
    "vgpr": "vgpr",
    "arch_vgpr": "vgpr",
    "accum_vgpr": "accum_vgpr",
    "sgpr": "sgpr",
    "wave_size": "wave_size",
}
_MARK = {"BeginNs": "begin", "EndNs": "end", "pid": "pid", "tid": "tid", "Name": "name"}


def read(path: Path) -> Frames:
    """Read a ``results.db`` into :class:`Frames`."""
    db = SqliteSource(path)
    try:
        present = [t for t in RESULTS_TABLES if t in db.tables]
        if not present:
            raise TraceError(
                f"{path}: SQLite file has none of the rocprof tables ({', '.join(RESULTS_TABLES)});"
                " pass the results.db that `rocprof --hip-trace` or `--stats` wrote"
            )
        frames = Frames()
        api = [_api(db, t, path) for t in ("HIP", "HSA") if t in present]
        if len(api) == 2:  # HSA call numbers share no space with HIP's
            api[1] = api[1].with_columns(pl.col("corr") + HSA_CORR_OFFSET)
        api = [a for a in api if a.height]
        frames.api = pl.concat(api, how="diagonal_relaxed") if api else None
        device: list[pl.DataFrame] = []
        has_ops = False
        for table in ("OPS", "COPY"):
            if table not in present:
                continue
            df = _select(db, table, _OPS, path)
            hsa_copy = table == "COPY" and "dev-id" not in db.columns(table)
            if hsa_copy and "HIP" in present:
                df = df.with_columns(pl.col("corr") + HSA_CORR_OFFSET)
            has_ops = has_ops or (table == "OPS" and df.height > 0)
            device.append(df.with_columns(copy=pl.lit(table == "COPY")))
        kern = _kernels(db, path, frames.warnings, ops=has_ops)
        if kern is not None:
            device.append(kern.with_columns(copy=pl.lit(False)))
        device = [d for d in device if d.height]
        frames.device = pl.concat(device, how="diagonal_relaxed") if device else None
        if "rocTX" in present:
            frames.markers = _select(db, "rocTX", _MARK, path)
        if not any(f is not None and f.height for f in (frames.api, frames.device, frames.markers)):
            raise TraceError(
                f"{path}: rocprof database holds no rows ({', '.join(present)} are empty);"
                " the profiled run recorded nothing"
            )
        frames.warnings.extend(db.warnings)
        return frames
    finally:
        db.close()


def _api(db: SqliteSource, table: str, path: Path) -> pl.DataFrame:
    return _select(db, table, _API, path)


def _kernels(db: SqliteSource, path: Path, warnings: list[str], ops: bool) -> pl.DataFrame | None:
    """KERN rows (``--stats`` / ``--timestamp on``); None when absent or without times."""
    cols = db.columns("KERN")
    if "BeginNs" not in cols:
        return None
    df = _select(db, "KERN", _KERN, path)
    if ops and df.height:
        warnings.append(
            f"{df.height} KERN rows not read: OPS holds the same dispatches with their API link"
        )
        return None
    return df


def _select(db: SqliteSource, table: str, mapping: dict[str, str], path: Path) -> pl.DataFrame:
    """The mapped plain columns of ``table``, renamed; BeginNs and EndNs are required."""
    cols = db.columns(table)
    missing = [c for c in ("BeginNs", "EndNs") if c in mapping and c not in cols]
    if missing:
        raise TraceError(
            f"{path}: rocprof table {table} lacks column {', '.join(missing)}; the file is"
            " not a complete rocprof results.db, export it again"
        )
    present, targets = [], set()
    for column, target in mapping.items():
        if column in cols and target not in targets:  # vgpr or arch_vgpr, whichever is there
            present.append(column)
            targets.add(target)
    frame = pl.from_arrow(db.scan(table, ", ".join(f'"{c}"' for c in present)))
    assert isinstance(frame, pl.DataFrame)
    return frame.rename({c: mapping[c] for c in present})
