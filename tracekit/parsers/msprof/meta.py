"""Metadata of an Ascend output: chips and core counts, clock anchors, profiler settings.

* ``info.json`` (``PROF_*/device_N/info.json.N``, ``PROF_*/host/info.json``): ``DeviceInfo``
  (``ai_core_num``, ``aiv_num``, ``ai_cpu_core_num``, frequencies), ``platform_version``
  (``"1"`` CHIP_V2_1_0 = Ascend910, ``"5"`` CHIP_V4_1_0 = Ascend910B), ``rank_id``;
* ``start_info.N``: ``collectionTimeBegin`` (epoch µs) with ``clockMonotonicRaw`` (ns) at the
  same instant, to put the older device-monotonic timelines on the epoch;
* ``profiler_info_N.json`` (torch_npu): level, AI Core metrics, export type, rank.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tracekit.parsers.convert import as_int

PLATFORMS = {"1": "Ascend910", "5": "Ascend910B"}
VENDOR = "Huawei"


def _json(path: Path) -> dict[str, Any] | None:
    try:
        value = json.loads(path.read_text(errors="replace"))
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def device_info(paths: list[Path]) -> tuple[dict[int, dict[str, Any]], dict[str, Any]]:
    """Per device id: chip name and core counts; and run-level facts (platform, rank)."""
    devices: dict[int, dict[str, Any]] = {}
    run: dict[str, Any] = {}
    for path in paths:
        info = _json(path)
        if info is None:
            continue
        platform = str(info.get("platform_version", "") or "")
        if platform:
            run["platform_version"] = platform
        if isinstance(info.get("rank_id"), int) and info["rank_id"] >= 0:
            run["rank"] = info["rank_id"]
        for dev in info.get("DeviceInfo") or []:
            if not isinstance(dev, dict) or as_int(dev.get("id")) is None:
                continue
            devices[as_int(dev["id"])] = {
                "name": PLATFORMS.get(platform),
                "cores": as_int(dev.get("ai_core_num")),
                "vector_cores": as_int(dev.get("aiv_num")),
                "ai_cpu_cores": as_int(dev.get("ai_cpu_core_num")),
                "aic_mhz": as_int(dev.get("aic_frequency")),
            }
    return devices, run


def clock_anchor(path: Path | None) -> tuple[int, int] | None:
    """(collectionTimeBegin µs, clockMonotonicRaw ns) of a ``start_info`` file."""
    if path is None:
        return None
    info = _json(path)
    if info is None:
        return None
    begin, mono = as_int(info.get("collectionTimeBegin")), as_int(info.get("clockMonotonicRaw"))
    return None if begin is None or mono is None else (begin, mono)


def profiler_settings(path: Path | None) -> dict[str, Any]:
    """torch_npu profiler level, AI Core metrics, export type and rank from profiler_info."""
    info = _json(path) if path else None
    if info is None:
        return {}
    config = info.get("config") or {}
    experimental = config.get("experimental_config") or {} if isinstance(config, dict) else {}
    out = {
        "level": experimental.get("_profiler_level"),
        "aic_metrics": experimental.get("_aic_metrics"),
        "export_type": experimental.get("_export_type"),
    }
    if isinstance(info.get("rank_id"), int) and info["rank_id"] >= 0:
        out["rank"] = info["rank_id"]
    return {k: v for k, v in out.items() if v is not None}


def devices_list(
    used: set[int], known: dict[int, dict[str, Any]], chips: dict[int, str]
) -> list[dict[str, Any]]:
    """The ``devices`` metadata: one entry per device index that rows use."""
    out = []
    for index in sorted(used):
        info = dict(known.get(index, {}))
        name = chips.get(index) or info.pop("name", None)
        info.pop("name", None)
        out.append(
            {
                "index": index,
                "name": name,
                "vendor": VENDOR,
                "cores": info.pop("cores", None),
                **{k: v for k, v in info.items() if v is not None},
            }
        )
    return out


def rank_of(source: Any) -> int | None:
    """The rank a source records: torch_npu profiler_info, msprof info.json, or the db's
    ``RANK_DEVICE_MAP`` (one row)."""
    settings = profiler_settings(source.profiler_info)
    if "rank" in settings:
        return settings["rank"]
    _, run = device_info(source.info)
    if "rank" in run:
        return run["rank"]
    if source.db is not None:
        from tracekit.parsers.sqlite import open_readonly

        try:
            con = open_readonly(source.db)
            try:
                rows = con.execute("SELECT rankId FROM RANK_DEVICE_MAP").fetchall()
            finally:
                con.close()
        except Exception:  # no such table, or not readable: the reader reports the latter
            return None
        if len(rows) == 1 and isinstance(rows[0][0], int) and 0 <= rows[0][0] < 4294967295:
            return rows[0][0]
    return None
