"""Nsight Systems export metadata: producer, session origin, GPUs and CUDA device mapping."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tracekit.parsers.convert import as_int
from tracekit.parsers.sqlite import SqliteSource
from tracekit.timeline import empty_meta

META_TABLES = ("META_DATA_EXPORT", "EXPORT_META_DATA")  # 3.x name, 2.x name
_GPU_COLUMNS = (
    "id",
    "name",
    "smCount",
    "totalMemory",
    "chipName",
    "busLocation",
    "computeMajor",
    "computeMinor",
)


def metadata(db: SqliteSource, path: Path) -> dict[str, Any]:
    """Timeline metadata from the export's metadata, session and GPU tables."""
    meta = empty_meta()
    meta["format"] = "nsys-sqlite"
    meta["source"] = path.name
    table = next((t for t in META_TABLES if t in db.tables), None)
    info: dict[str, str] = {}
    if table:
        info = dict(db.con.execute(f'SELECT name, value FROM "{table}"').fetchall())
    meta["producer"] = {
        "name": info.get("EXPORT_PRODUCT_NAME", "NVIDIA Nsight Systems"),
        "version": info.get("EXPORT_PRODUCT_VERSION"),
        "export_schema": info.get("EXPORT_SCHEMA_VERSION"),
    }
    if "TARGET_INFO_SESSION_START_TIME" in db.tables:
        meta["origin_ns"] = db.scalar('SELECT utcEpochNs FROM "TARGET_INFO_SESSION_START_TIME"')
    meta["devices"] = devices(db)
    if not meta["devices"]:
        meta["warnings"].append("no GPU description table (TARGET_INFO_GPU); device names unknown")
    return meta


def devices(db: SqliteSource) -> list[dict[str, Any]]:
    """One entry per GPU of ``TARGET_INFO_GPU`` (index = its id, as the timeline uses it).

    Exports without it may still have ``TARGET_INFO_CUDA_DEVICE`` (GPU id and SM count).
    """
    cols = db.columns("TARGET_INFO_GPU")
    if not cols:
        return _cuda_devices(db)
    want = [c for c in _GPU_COLUMNS if c in cols]
    rows = db.con.execute(f'SELECT {", ".join(want)} FROM "TARGET_INFO_GPU" ORDER BY id')
    out = []
    for row in rows.fetchall():
        gpu = dict(zip(want, row))
        major, minor = as_int(gpu.get("computeMajor")), as_int(gpu.get("computeMinor"))
        out.append(
            {
                "index": as_int(gpu.get("id")),
                "name": _text(gpu.get("name")),
                "vendor": "NVIDIA",
                "cores": as_int(gpu.get("smCount")),
                "memory": as_int(gpu.get("totalMemory")),
                "compute_capability": None if major is None else f"{major}.{minor or 0}",
                "chip": _text(gpu.get("chipName")),
                "bus": _text(gpu.get("busLocation")),
            }
        )
    return out


def _cuda_devices(db: SqliteSource) -> list[dict[str, Any]]:
    cols = set(db.columns("TARGET_INFO_CUDA_DEVICE"))
    if "gpuId" not in cols:
        return []
    cores = "numMultiprocessors" if "numMultiprocessors" in cols else "NULL"
    rows = db.con.execute(
        f'SELECT DISTINCT gpuId, {cores} FROM "TARGET_INFO_CUDA_DEVICE" ORDER BY gpuId'
    ).fetchall()
    return [
        {"index": as_int(g), "name": None, "vendor": "NVIDIA", "cores": as_int(c)} for g, c in rows
    ]


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def cuda_device_map(db: SqliteSource) -> dict[tuple[int, int], int]:
    """(process id, CUDA device ordinal) -> GPU id, where the export records it.

    CUPTI's ``deviceId`` is the ordinal a process sees, which ``CUDA_VISIBLE_DEVICES``
    renumbers; ``TARGET_INFO_CUDA_DEVICE`` ties it to the physical GPU of
    ``TARGET_INFO_GPU``. Identity mappings are dropped.
    """
    cols = set(db.columns("TARGET_INFO_CUDA_DEVICE"))
    if not {"pid", "cudaId", "gpuId"} <= cols:
        return {}
    rows = db.con.execute('SELECT pid, cudaId, gpuId FROM "TARGET_INFO_CUDA_DEVICE"').fetchall()
    mapping = {(int(p), int(c)): int(g) for p, c, g in rows if None not in (p, c, g)}
    return {} if all(c == g for (_, c), g in mapping.items()) else mapping
