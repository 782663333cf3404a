"""Where an Ascend export records the NPU device index, read in the order the exports trust it.

* Timeline JSON (``trace_view.json``, ``msprof_*.json``, CANN 8.x): a device process (its
  ``process_labels`` start with ``NPU``) is labelled ``NPU <n>`` by current msprof; older
  torch_npu writes ``NPU`` alone, but every msprof since CANN 8.0 packs the device into the
  process id: ``pid = host_pid << 10 | sort_index << 5 | device`` (msprof
  ``TraceViewManager.get_format_pid``, torch_npu ``TraceEventManager.get_pid_format``; slot 31
  is the host). The low five bits are read only where the middle five equal the process's own
  ``process_sort_index``: older pids (CANN <= 7, decimal ``<pid><sort:02><device:02>``) fail
  that check and give no device.
* ``memory_record.csv`` / ``operator_memory.csv`` (``Device Type``) and ``npu_module_mem.csv``
  (``Device``) of the torch_npu text export hold ``NPU:<n>``.
* ``kernel_details.csv`` / ``op_summary`` ``Device_id``, ``TASK.deviceId``, the ``device_<n>``
  folders of a ``PROF_*`` directory and ``RANK_DEVICE_MAP`` are read where those tables are.

``profiler_info_<n>.json`` records the rank (``rank_id``), not the device: it is not used here.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import polars as pl

NPU_LABEL = re.compile(r"^NPU\s*(\d+)?$")
HOST_SLOT = 31  # the device bits of host (CPU) layers in current msprof
MEMORY_CSVS = ("memory_record.csv", "operator_memory.csv", "npu_module_mem.csv")
_MEMORY_COLUMNS = ("Device Type", "Device")
_NPU_VALUE = re.compile(r"^\s*NPU:(\d+)\s*$")
_HEAD_BYTES = 1 << 16


def packed_device(pid: Any, sort_index: Any) -> int | None:
    """The device bits of a CANN 8.x process id, or None when the pid is not packed that way
    (its middle bits are not its sort index) or names the host slot."""
    if isinstance(pid, bool) or not isinstance(pid, int) or pid < 0:
        return None
    if isinstance(sort_index, bool) or not isinstance(sort_index, int):
        return None
    device = pid & 0x1F
    if (pid >> 5) & 0x1F != sort_index or device == HOST_SLOT:
        return None
    return device


def process_devices(
    labels: dict[Any, str], sort_index: dict[Any, Any], pids: Iterable[Any]
) -> dict[Any, int]:
    """Device index of each NPU process among ``pids``: from its ``NPU <n>`` label, else from
    its packed pid, when the pids of every unnumbered NPU process are packed (a decimal pid of
    CANN <= 7 passes the check by chance one time in 32; all of them together do not);
    processes that say nothing are left out."""
    found: dict[Any, int] = {}
    packed: dict[Any, int | None] = {}
    for pid in pids:
        match = NPU_LABEL.match((labels.get(pid) or "").strip())
        if match is None:
            continue
        if match.group(1) is not None:
            found[pid] = int(match.group(1))
        else:
            packed[pid] = packed_device(pid, sort_index.get(pid))
    if packed and all(device is not None for device in packed.values()):
        found.update(packed)  # type: ignore[arg-type]
    return found


def with_devices(frame: pl.DataFrame | None, devices: dict[Any, int]) -> pl.DataFrame | None:
    """``frame`` (rows with the ``pid`` of their process) with a ``device`` column from
    ``devices`` (null where its process gave none) instead of the pid."""
    if frame is None or "pid" not in frame.columns:
        return frame
    keys = {int(p): d for p, d in devices.items() if isinstance(p, int) and not isinstance(p, bool)}
    device = pl.col("pid").replace_strict(keys, default=None, return_dtype=pl.Int64)
    return frame.with_columns(device.alias("device")).drop("pid")


def single(values: Iterable[Any]) -> int | None:
    """The one non-negative device index among ``values`` (None for none or several)."""
    found = {int(v) for v in values if v is not None and 0 <= int(v) < HOST_SLOT}
    return found.pop() if len(found) == 1 else None


def memory_device(paths: Iterable[Path]) -> int | None:
    """The device named ``NPU:<n>`` by the first rows of the torch_npu memory CSVs (only
    their head is read: they hold a row per allocation)."""
    values: set[int] = set()
    for path in paths:
        try:
            with path.open("rb") as fh:
                head = fh.read(_HEAD_BYTES)
        except OSError:
            continue
        text = head.decode("utf-8-sig", errors="replace")
        if len(head) == _HEAD_BYTES:  # a cut line is not a row
            text = text[: text.rfind("\n") + 1]
        rows = csv.reader(io.StringIO(text))
        header = next(rows, [])
        columns = [i for i, name in enumerate(header) if name.strip() in _MEMORY_COLUMNS]
        if not columns:
            continue
        for row in rows:
            for i in columns:
                match = _NPU_VALUE.match(row[i]) if i < len(row) else None
                if match:
                    values.add(int(match.group(1)))
    return values.pop() if len(values) == 1 else None
