"""One text source (timeline JSON and/or CSV tables) -> row frames.

Device tasks come from the timeline's Ascend Hardware layer when there is one, else from
``task_time_*.csv``, else from the op_summary / kernel_details table alone; op details enrich
the tasks (see :mod:`.device`). HCCL comes from the timeline's HCCL layer, else from the
HCCL rows of the op table; the hardware tasks of an HCCL operator become communication rows
(:mod:`.comm_tasks`). The device of every row is its process's (packed pid or ``NPU <n>``
label), else the ``device_<n>`` folder, the op table's ``Device_id`` or the memory CSVs
(:mod:`.device_index`). Older per-device timelines count in device-monotonic µs: they are
put on the epoch through ``start_info.N``; without it they stay monotonic (with a warning).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import polars as pl

from tracekit.parsers.msprof import comm_tasks, device, device_index, hccl, host, summaries
from tracekit.parsers.msprof.csv_tables import read_op_details, read_step_trace, read_task_time
from tracekit.parsers.msprof.layout import Source
from tracekit.parsers.msprof.meta import PLATFORMS, clock_anchor, device_info, profiler_settings
from tracekit.parsers.msprof.rows import Loaded, in_halves
from tracekit.parsers.msprof.trace_json import Layers
from tracekit.parsers.msprof.trace_read import read_layers

EPOCH_MIN_NS = 10**17  # 1973: anything earlier is a monotonic clock, not the epoch


def _concat(frames: list[pl.DataFrame | None]) -> pl.DataFrame | None:
    present = [f for f in frames if f is not None and f.height]
    return pl.concat(present, how="diagonal_relaxed") if present else None


def _merge(layers: list[Layers]) -> Layers:
    if len(layers) == 1:
        return layers[0]
    out = Layers()
    out.hardware = _concat([x.hardware for x in layers])
    out.hccl_ops = _concat([x.hccl_ops for x in layers])
    out.hccl_tasks = _concat([x.hccl_tasks for x in layers])
    out.steps = _concat([x.steps for x in layers])
    out.flows = _concat([x.flows for x in layers])
    for x in layers:
        out.host += x.host
        out.warnings += [w for w in x.warnings if w not in out.warnings]
        out.stream_keys += [k for k in x.stream_keys if k not in out.stream_keys]
        out.processes = sorted(set(out.processes) | set(x.processes))
        for key, value in x.overlap_ns.items():
            out.overlap_ns[key] = out.overlap_ns.get(key, 0) + value
        out.device = out.device if out.device is not None else x.device
    return out


def _shift(frame: pl.DataFrame | None, shift: int) -> pl.DataFrame | None:
    return None if frame is None else frame.with_columns(pl.col("ts") + shift)


def _to_epoch(layers: Layers, source: Source, loaded: Loaded) -> None:
    """Put device-monotonic timelines on the epoch with their start_info anchor."""
    firsts = [
        f["ts"].min()
        for f in (layers.hardware, layers.hccl_ops, layers.steps, *layers.host)
        if f is not None and f.height
    ]
    if not firsts or min(firsts) >= EPOCH_MIN_NS:
        return
    dev = source.device if source.device is not None else layers.device
    anchor = clock_anchor(source.start_info.get(dev) if dev is not None else None)
    if anchor is None and source.start_info:
        anchor = clock_anchor(next(iter(source.start_info.values())))
    if anchor is None:
        loaded.monotonic = True
        loaded.warnings.append(
            "device-monotonic timestamps and no start_info.N to convert them;"
            " times stay on the monotonic clock (origin_ns unknown)"
        )
        return
    shift = int(anchor[0]) * 1000 - int(anchor[1])
    layers.hardware = _shift(layers.hardware, shift)
    layers.hccl_ops = _shift(layers.hccl_ops, shift)
    layers.hccl_tasks = _shift(layers.hccl_tasks, shift)
    layers.steps = _shift(layers.steps, shift)
    layers.flows = _shift(layers.flows, shift)
    layers.host = [_shift(f, shift) for f in layers.host]  # type: ignore[misc]
    loaded.meta["clock"] = {"domain": "CLOCK_MONOTONIC_RAW", "to_epoch_ns": shift}


def _details(paths: list[Path], warnings: list[str]) -> pl.DataFrame | None:
    frames = [read_op_details(p, warnings) for p in paths]
    return _concat(frames)


def _task_time(paths: list[Path], warnings: list[str]) -> pl.DataFrame | None:
    frame = _concat([read_task_time(p, warnings) for p in paths])
    if frame is None:
        return None
    return frame.select(
        pl.col("start").alias("ts"),
        "dur",
        pl.col("name").alias("kernel_name"),
        pl.col("name"),
        "task_type",
        "stream",
        "task_id",
        *([pl.col("device")] if "device" in frame.columns else []),
    ).filter(pl.col("ts").is_not_null())


def read_text(source: Source, include_python: bool = False) -> Loaded:
    """Rows and metadata of one text (or older per-device) source."""
    loaded = Loaded(rank=source.rank, device=source.device)
    # polars reads the tables in a thread (it releases the GIL) while msgspec decodes the JSON
    with ThreadPoolExecutor(max_workers=1) as pool:
        tables = pool.submit(_details, source.op_details, loaded.warnings)
        layers = (
            _merge([read_layers(p, include_python) for p in source.timeline])
            if source.timeline
            else Layers()
        )
        details = tables.result()
    loaded.warnings += layers.warnings
    _to_epoch(layers, source, loaded)
    if details is not None and "start" in details.columns and details["start"].null_count():
        loaded.warnings.append(
            f"{details['start'].null_count()} op table rows without a usable start time; dropped"
        )
        details = details.filter(pl.col("start").is_not_null())
    task_details, op_details = (
        device.split_details(details) if details is not None else (None, None)
    )
    dev = _device(source, layers, details)
    loaded.device = dev
    all_hw = hw = layers.hardware
    # the three row sets are independent; their polars and Arrow work releases the GIL
    with ThreadPoolExecutor(max_workers=3) as pool:
        rest = pool.submit(_host_rows, layers, all_hw, dev)
        if hw is not None:
            hw, _ = device.drop_ffts_parents(hw)
            hw, layers.hccl_tasks = hccl.match_planes(hw, layers.hccl_tasks)
        tasks = pool.submit(_device_rows, hw, source, task_details, dev)
        comm = pool.submit(_hccl_rows, layers, all_hw, op_details, dev)
        frames, warnings = tasks.result()
        ops, planes = comm.result()
        others = rest.result()
    hccl_ops = comm_tasks.operators([ops] if ops is not None else [])
    frames = [comm_tasks.mark(f, hccl_ops, planes) for f in frames]
    frames += [f for f in (ops, planes) if f is not None] + others
    loaded.warnings += warnings
    loaded.frames = frames
    _meta(loaded, source, layers, details)
    return loaded


def _device_rows(
    hw: pl.DataFrame | None, source: Source, details: pl.DataFrame | None, dev: int | None
) -> tuple[list[pl.DataFrame], list[str]]:
    """Device task rows (timeline hardware layer, else task_time, else the op table alone)
    and the warning about op table rows that match no task."""
    frames: list[pl.DataFrame] = []
    warnings: list[str] = []
    unmatched = None
    if hw is not None:
        rows, unmatched = _enrich(hw, details, detail_time=False)
        frames.append(rows)
    else:
        task_time = _task_time(source.task_time, warnings)
        if task_time is not None:
            rows, unmatched = _enrich(task_time, details, detail_time=True)
            frames.append(rows)
        elif details is not None:
            frames.append(device.detail_rows(details, dev))
    if unmatched is not None and unmatched.height:
        warnings.append(
            f"{unmatched.height} op table rows match no device task; added from the table"
        )
        frames.append(device.detail_rows(unmatched, dev))
    return [_with_device(f, dev) for f in frames], warnings


def _hccl_rows(
    layers: Layers, hw: pl.DataFrame | None, op_details: pl.DataFrame | None, dev: int | None
) -> tuple[pl.DataFrame | None, pl.DataFrame | None]:
    """HCCL operator rows (timeline, else op table) and plane task rows."""
    ops = planes = None
    if layers.hccl_ops is not None and layers.hccl_ops.height:
        ops = hccl.op_rows(hccl.op_streams(layers.hccl_ops, hw, layers.hccl_tasks), dev)
    elif op_details is not None and op_details.height:
        ops = hccl.detail_ops(op_details, dev)
    if layers.hccl_tasks is not None and layers.hccl_tasks.height:
        planes = hccl.task_rows(layers.hccl_tasks, layers.hccl_ops, dev)
    return ops, planes


def _device(source: Source, layers: Layers, details: pl.DataFrame | None) -> int | None:
    """The device of a source's rows, from what it records (see :mod:`.device_index`): the
    ``device_<n>`` folder, the timeline's device processes, the op table's ``Device_id``, the
    memory CSVs."""
    if source.device is not None:
        return source.device
    if layers.device is not None:
        return layers.device
    if details is not None and "device" in details.columns:
        found = device_index.single(details["device"].drop_nulls().unique().to_list())
        if found is not None:
            return found
    return device_index.memory_device(source.memory)


def _host_rows(layers: Layers, hw: pl.DataFrame | None, dev: int | None) -> list[pl.DataFrame]:
    """Host rows (Python ops linked to their tasks, API calls) and step ranges."""
    frames = []
    for frame in layers.host:
        frame = host.link_ops(frame, layers.flows, hw) if (frame["kind"] == "op").any() else frame
        frames.append(host.host_rows(frame))
    if layers.steps is not None and layers.steps.height:
        frames.append(host.step_rows(layers.steps, dev))
    return frames


def _with_device(frame: pl.DataFrame, dev: int | None) -> pl.DataFrame:
    if dev is None or "device" not in frame.columns:
        return frame
    return frame.with_columns(pl.col("device").fill_null(dev))


def _enrich(
    tasks: pl.DataFrame, details: pl.DataFrame | None, detail_time: bool
) -> tuple[pl.DataFrame, pl.DataFrame | None]:
    if details is None or not details.height:
        return in_halves(device.task_rows, tasks, None), None
    joined, unmatched = device.attach(tasks, details)
    return in_halves(device.task_rows, joined, None, detail_time), unmatched


def _meta(loaded: Loaded, source: Source, layers: Layers, details: pl.DataFrame | None) -> None:
    meta = loaded.meta
    meta["layout"] = (
        "msprof-legacy"
        if source.kind == "legacy"
        else (
            "torch_npu"
            if source.profiler_info
            or any(
                p.name == "trace_view.json" or p.name == "kernel_details.csv" for p in source.files
            )
            else "msprof"
        )
    )
    meta["files"] = [
        str(p.relative_to(source.root)) if p.is_relative_to(source.root) else p.name
        for p in source.files
    ]
    if layers.overlap_ns:
        meta["overlap_analysis_ns"] = dict(sorted(layers.overlap_ns.items()))
    if layers.stream_keys:
        meta["stream_id_key"] = layers.stream_keys
    steps: set[int] = set()
    if details is not None and "step" in details.columns:
        steps |= set(details["step"].drop_nulls().unique().to_list())
    if layers.steps is not None and layers.steps.height:
        steps |= set(layers.steps["iteration"].drop_nulls().unique().to_list())
    trace = [read_step_trace(p, loaded.warnings) for p in source.step_trace]
    if trace:
        frame = pl.concat(trace, how="diagonal_relaxed")
        meta["step_trace_us"] = frame.to_dicts()
        steps |= {int(s) for s in frame["Step"].drop_nulls().to_list() if str(s).isdigit()}
        meta["summaries"] = [
            summaries.step_trace(meta["step_trace_us"], source.step_trace[0].name, loaded.rank)
        ]
    for path in source.op_statistic:
        found = summaries.op_statistic(path, loaded.device, loaded.rank)
        if found:
            meta.setdefault("summaries", []).append(found)
    for path in source.op_details if source.timeline else ():  # else the rows are this table
        found = summaries.op_details(path, loaded.device, loaded.rank)
        if found:
            meta.setdefault("summaries", []).append(found)
    meta["steps"] = sorted(steps)
    known, run = device_info(source.info)
    loaded.devices = known
    settings = profiler_settings(source.profiler_info)
    meta["producer"] = {
        "name": "torch_npu profiler" if meta["layout"] == "torch_npu" else "msprof",
        **{k: v for k, v in settings.items() if k != "rank"},
        **({"platform_version": run["platform_version"]} if "platform_version" in run else {}),
    }
    if loaded.rank is None:
        loaded.rank = settings.get("rank", run.get("rank"))
    platform = PLATFORMS.get(run.get("platform_version", ""))
    if platform and loaded.device is not None:
        loaded.chips.setdefault(loaded.device, platform)
    if loaded.device is None and len(known) == 1:
        loaded.device = next(iter(known))
        loaded.frames = [_with_device(f, loaded.device) for f in loaded.frames]
    if loaded.device in known and known[loaded.device].get("vector_cores") == 0:
        # a chip without vector cores runs every AI_CORE task on the cube units
        loaded.frames = [_cube_only(f) for f in loaded.frames]


def _cube_only(frame: pl.DataFrame) -> pl.DataFrame:
    if "_type" not in frame.columns:
        return frame
    cube = (
        pl.col("engine").is_null() & (pl.col("kind") == "kernel") & (pl.col("_type") == "AI_CORE")
    )
    return frame.with_columns(
        pl.when(cube).then(pl.lit("aic")).otherwise(pl.col("engine")).alias("engine")
    )


def first_ts(frames: list[pl.DataFrame]) -> int | None:
    """Earliest ts over the frames (None when they are all empty)."""
    values = [f["ts"].min() for f in frames if f.height]
    values = [v for v in values if v is not None]
    return int(np.min(values)) if values else None
