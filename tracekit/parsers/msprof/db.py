"""SQLite exports: msprof ``msprof_*.db`` and torch_npu ``ascend_pytorch_profiler_N.db``.

Times are epoch ns; text is interned in ``STRING_IDS``. ``TASK`` holds every device task
(runtime task types); ``COMPUTE_TASK_INFO`` (joined on ``globalTaskId``) names the kernels and
gives their core type, op type, block dim and shapes; ``COMMUNICATION_TASK_INFO`` turns a task
into an HCCL plane task (src/dst rank, transport, size through the ``ENUM_HCCL_*`` tables);
``COMMUNICATION_OP`` holds the collectives (no ``deviceId`` in torch_npu 2.1: they take that of
the tasks sharing their connection id, which become communication rows, :mod:`.comm_tasks`).
Rows without a device take the export's one (``TASK.deviceId``, else ``RANK_DEVICE_MAP``).
Host rows: ``CANN_API`` (``globalTid`` is pid << 32 | tid), torch_npu ``PYTORCH_API`` (whose
times are TEXT), ``MSTX_EVENTS``; ``STEP_TIME`` gives the steps. Tables that a version lacks are
skipped; a file without ``TASK`` is refused.

Read by :mod:`.db_reader` (bulk reads, strings), :mod:`.db_tasks` (device tables) and
:mod:`.db_host` (host tables); this module puts the rows and the metadata together.
"""

from __future__ import annotations

import polars as pl

from tracekit.parsers.msprof import comm_tasks, device, device_index, hccl, host, summaries
from tracekit.parsers.msprof.db_host import read_cann, read_mstx, read_pytorch
from tracekit.parsers.msprof.db_reader import DbReader
from tracekit.parsers.msprof.db_tasks import (
    read_comm_ops,
    read_comm_tasks,
    read_compute,
    read_tasks,
)
from tracekit.parsers.msprof.layout import Source
from tracekit.parsers.msprof.meta import device_info, profiler_settings
from tracekit.parsers.msprof.rows import NO_ID, Loaded


def read_db(source: Source, include_python: bool = False) -> Loaded:
    """Rows and metadata of one SQLite export."""
    assert source.db is not None
    db = DbReader(source.db)
    try:
        return _read(db, source, include_python)
    finally:
        db.close()


def _read(db: DbReader, source: Source, include_python: bool) -> Loaded:
    loaded = Loaded(rank=source.rank, device=source.device)
    all_tasks = read_tasks(db)
    task_devices = all_tasks["device"].drop_nulls().unique().to_list()
    tasks, _ = device.drop_ffts_parents(all_tasks)
    comm = read_comm_tasks(db, tasks)
    if comm is not None:
        tasks = tasks.filter(~pl.col("gtid").is_in(comm["gtid"].implode()))
    frames = []
    ops = read_comm_ops(db)
    op_rows = planes = None
    if ops is not None:
        ops = hccl.op_streams(ops, all_tasks, comm)
        op_rows = hccl.op_rows(ops, None)
        frames.append(op_rows)
    # each table let go once used (at 10M rows each is a few hundred MB), every task before
    # the kernels' args are built
    del all_tasks
    compute = read_compute(db)
    if compute is not None:
        tasks = tasks.join(compute, on="gtid", how="left")
    del compute
    task_rows = device.task_rows(tasks, None)
    del tasks
    if comm is not None:
        op_names = ops.select("thread", "ts", "dur", "name") if ops is not None else None
        planes = hccl.task_rows(comm, op_names, None)
        frames.append(planes)
    hccl_ops = comm_tasks.operators([op_rows] if op_rows is not None else [])
    frames.insert(0, comm_tasks.mark(task_rows, hccl_ops, planes))
    cann = read_cann(db)
    if cann is not None:
        frames.append(host.host_rows(cann))
    for frame in read_pytorch(db, include_python):
        frames.append(host.host_rows(frame))
    mstx = read_mstx(db)
    if mstx is not None:
        frames.append(mstx)
    steps = db.frame("STEP_TIME", ["id", "startNs", "endNs"])
    if steps is not None and steps.height:
        frames.append(host.step_time_rows(steps))
        loaded.meta["steps"] = sorted(steps["id"].drop_nulls().cast(pl.Int64).unique().to_list())
    loaded.frames = frames
    _meta(db, loaded, source, task_devices)
    if loaded.device is not None:  # rows whose table records no device: the export's one
        loaded.frames = [
            f.with_columns(pl.col("device").fill_null(loaded.device))
            if "device" in f.columns
            else f
            for f in frames
        ]
    return loaded


def _meta(db: DbReader, loaded: Loaded, source: Source, task_devices: list[int]) -> None:
    meta = loaded.meta
    torch = db.has("PYTORCH_API") or source.db.name.startswith("ascend_pytorch_profiler")
    meta["layout"] = "torch_npu-db" if torch else "msprof-db"
    meta["files"] = [source.db.name]
    npu = db.frame("NPU_INFO", ["id", "name"])
    if npu is not None:
        loaded.chips = {int(i): str(n) for i, n in npu.iter_rows() if i is not None and n}
    rank_map = db.frame("RANK_DEVICE_MAP", ["rankId", "deviceId"])
    if loaded.rank is None and rank_map is not None and rank_map.height == 1:
        rank = rank_map["rankId"][0]
        loaded.rank = int(rank) if rank is not None and rank != NO_ID and rank >= 0 else None
    mapped = None
    if rank_map is not None and rank_map.height == 1 and "deviceId" in rank_map.columns:
        mapped = device_index.single(rank_map["deviceId"].cast(pl.Int64, strict=False))
    used = device_index.single(task_devices)
    loaded.device = next((d for d in (used, mapped, loaded.device) if d is not None), None)
    known, _ = device_info(source.info)
    loaded.devices = known
    settings = profiler_settings(source.profiler_info)
    version = db.frame("META_DATA", ["name", "value"])
    schema = None
    if version is not None:
        schema = dict(version.iter_rows()).get("SCHEMA_VERSION")
    meta["producer"] = {
        "name": "torch_npu profiler" if torch else "msprof",
        "export_type": "db",
        **({"db_schema": schema} if schema else {}),
        **{k: v for k, v in settings.items() if k not in ("rank", "export_type")},
    }
    meta.setdefault("steps", [])
    analysis = source.db.parent / "analysis.db"  # torch_npu's own per-step summary
    found = summaries.analysis_db(analysis, loaded.rank) if analysis.is_file() else None
    if found:
        meta["summaries"] = [found]
    loaded.warnings += db.src.warnings
