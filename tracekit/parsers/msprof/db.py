"""SQLite exports: msprof ``msprof_*.db`` and torch_npu ``ascend_pytorch_profiler_N.db``.

Times are epoch ns; text is interned in ``STRING_IDS``. ``TASK`` holds every device task
(runtime task types); ``COMPUTE_TASK_INFO`` (joined on ``globalTaskId``) names the kernels and
gives their core type, op type, block dim and shapes; ``COMMUNICATION_TASK_INFO`` turns a task
into an HCCL plane task (src/dst rank, transport, size through the ``ENUM_HCCL_*`` tables);
``COMMUNICATION_OP`` holds the collectives (no ``deviceId`` in torch_npu 2.1: they take that of
the tasks sharing their connection id, which become communication rows, :mod:`.comm_tasks`).
Rows without a device take the export's one (``TASK.deviceId``, else ``RANK_DEVICE_MAP``).
Host rows: ``CANN_API`` (``globalTid`` is
pid << 32 | tid), torch_npu ``PYTORCH_API`` (whose times are TEXT), ``MSTX_EVENTS``;
``STEP_TIME`` gives the steps. Tables that a version lacks are skipped; a file without
``TASK`` is refused.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from tracekit.engine_frames import STEP_FUNCTIONS
from tracekit.errors import TraceError
from tracekit.parsers._sqlite import SqliteSource
from tracekit.parsers.msprof import comm_tasks, device, device_index, hccl, host, summaries
from tracekit.parsers.msprof.layout import Source
from tracekit.parsers.msprof.meta import device_info, profiler_settings
from tracekit.parsers.msprof.rows import NO_ID, Loaded, with_args

PYTORCH_KINDS = {50001: "op", 50002: "api", 50003: "python", 50004: "range"}
_TIDS = (
    (pl.col("globalTid") // (1 << 32)).alias("pid"),
    (pl.col("globalTid") % (1 << 32)).alias("tid"),
)


class DbReader:
    """Bulk reads of one export, strings resolved by joins on ``STRING_IDS``."""

    def __init__(self, path: Path) -> None:
        try:
            self.src = SqliteSource(path)
        except Exception as exc:  # sqlite3.DatabaseError and friends: one line
            raise TraceError(
                f"{path}: not a readable SQLite file ({exc}); export it again"
            ) from exc
        self.path = path
        if "TASK" not in self.src.tables:
            tables = ", ".join(sorted(self.src.tables)[:6]) or "none"
            raise TraceError(
                f"{path}: Ascend db without a TASK table (tables: {tables}); it holds no device "
                "tasks: export with msprof --export=on --type=db or torch_npu ExportType.Db again"
            )
        self.strings = self._strings()

    def close(self) -> None:
        self.src.close()

    def has(self, table: str) -> bool:
        return table in self.src.tables

    def cols(self, table: str) -> tuple[str, ...]:
        return self.src.columns(table)

    def frame(
        self, table: str, wanted: list[str], aliases: dict[str, str] | None = None
    ) -> pl.DataFrame | None:
        """The ``wanted`` columns the table has (``aliases`` map alternative names), or None."""
        if not self.has(table):
            return None
        present = set(self.cols(table))
        select = []
        for name in wanted:
            column = next(
                (
                    c
                    for c in (name, *(aliases or {}).get(name, "").split("|"))
                    if c and c in present
                ),
                None,
            )
            if column is not None:
                select.append(f'"{column}" AS "{name}"')
        if not select:
            return None
        return pl.from_arrow(self.src.scan(table, ", ".join(select)))  # type: ignore[return-value]

    def _strings(self) -> pl.DataFrame:
        frame = self.frame("STRING_IDS", ["id", "value"])
        if frame is None:
            return pl.DataFrame(schema={"id": pl.Int64, "value": pl.String})
        return frame.select(pl.col("id").cast(pl.Int64), pl.col("value").cast(pl.String))

    def enum(self, table: str) -> pl.DataFrame | None:
        frame = self.frame(table, ["id", "name"])
        return (
            None
            if frame is None
            else frame.select(pl.col("id").cast(pl.Int64), pl.col("name").cast(pl.String))
        )

    def resolve(
        self, frame: pl.DataFrame, columns: dict[str, str], table: str = "STRING_IDS"
    ) -> pl.DataFrame:
        """Replace id ``columns`` (source -> target name) by their strings."""
        values = self.strings if table == "STRING_IDS" else self.enum(table)
        for column, target in columns.items():
            if column not in frame.columns:
                continue
            if values is None:  # no enum table: keep the id as text
                frame = frame.with_columns(pl.col(column).cast(pl.String).alias(target))
                continue
            lookup = values.rename({values.columns[0]: "_id", values.columns[1]: target})
            ids = frame[column].cast(pl.Int64).alias("_id")
            frame = frame.drop([c for c in {column, target} if c in frame.columns]).with_columns(
                ids
            )
            frame = frame.join(lookup, on="_id", how="left", maintain_order="left").drop("_id")
        return frame


def _tasks(db: DbReader) -> pl.DataFrame:
    task = db.frame(
        "TASK",
        [
            "startNs",
            "endNs",
            "deviceId",
            "connectionId",
            "globalTaskId",
            "taskType",
            "contextId",
            "streamId",
            "taskId",
            "modelId",
        ],
    )
    if task is None or not task.height:
        raise TraceError(f"{db.path}: TASK table has no rows; the export holds no device tasks")
    task = task.select(
        pl.col("startNs").cast(pl.Int64).alias("ts"),
        (pl.col("endNs").cast(pl.Int64) - pl.col("startNs").cast(pl.Int64)).clip(0).alias("dur"),
        pl.col("deviceId").cast(pl.Int64).alias("device"),
        pl.col("connectionId").cast(pl.Int64).alias("corr"),
        pl.col("globalTaskId").cast(pl.Int64).alias("gtid"),
        pl.col("taskType").cast(pl.Int64),
        pl.col("contextId").cast(pl.Int64).alias("subtask_id"),
        pl.col("streamId").cast(pl.Int64).alias("stream"),
        pl.col("taskId").cast(pl.Int64).alias("task_id"),
        pl.col("modelId").cast(pl.Int64).alias("model_id"),
    )
    return db.resolve(task, {"taskType": "task_type"})


def _compute(db: DbReader) -> pl.DataFrame | None:
    info = db.frame(
        "COMPUTE_TASK_INFO",
        [
            "name",
            "globalTaskId",
            "blockDim",
            "mixBlockDim",
            "taskType",
            "opType",
            "inputFormats",
            "inputDataTypes",
            "inputShapes",
            "outputFormats",
            "outputDataTypes",
            "outputShapes",
            "opState",
            "hf32Eligible",
        ],
        {"blockDim": "blockNum|block_dim", "mixBlockDim": "mixBlockNum"},
    )
    if info is None or "globalTaskId" not in info.columns:
        return None
    names = {
        "name": "d_name",
        "taskType": "d_core",
        "opType": "d_op_type",
        "inputFormats": "d_input_formats",
        "inputDataTypes": "d_input_dtypes",
        "inputShapes": "d_input_shapes",
        "outputFormats": "d_output_formats",
        "outputDataTypes": "d_output_dtypes",
        "outputShapes": "d_output_shapes",
        "opState": "d_op_state",
        "hf32Eligible": "d_hf32",
    }
    info = db.resolve(info, names)
    return info.rename(
        {
            k: v
            for k, v in {
                "globalTaskId": "gtid",
                "blockDim": "d_block_dim",
                "mixBlockDim": "d_mix_block_dim",
            }.items()
            if k in info.columns
        }
    ).with_columns(pl.col("gtid").cast(pl.Int64))


def _comm_tasks(db: DbReader, tasks: pl.DataFrame) -> pl.DataFrame | None:
    info = db.frame(
        "COMMUNICATION_TASK_INFO",
        [
            "name",
            "globalTaskId",
            "taskType",
            "planeId",
            "groupName",
            "notifyId",
            "srcRank",
            "dstRank",
            "transportType",
            "size",
            "dataType",
            "linkType",
            "opId",
            "bandwidth",
        ],
    )
    if info is None or not info.height:
        return None
    if "planeId" in info.columns:  # Level0 lists the tasks of an operator without plane details
        plane = pl.col("planeId").cast(pl.Int64)
        info = info.filter(plane.is_not_null() & (plane >= 0) & (plane != NO_ID))
        if not info.height:
            return None
    info = db.resolve(info, {"name": "op_name", "taskType": "task_type", "groupName": "group"})
    info = db.resolve(info, {"transportType": "transport"}, "ENUM_HCCL_TRANSPORT_TYPE")
    info = db.resolve(info, {"dataType": "data_type"}, "ENUM_HCCL_DATA_TYPE")
    info = db.resolve(info, {"linkType": "link_type"}, "ENUM_HCCL_LINK_TYPE")
    info = info.with_columns(pl.col("globalTaskId").cast(pl.Int64).alias("gtid"))
    joined = tasks.select(
        "gtid",
        "ts",
        "dur",
        "stream",
        "task_id",
        "subtask_id",
        "model_id",
        pl.col("task_type").alias("hw_type"),
        pl.col("corr").alias("hw_corr"),
    ).join(info, on="gtid")
    c = lambda n, t=pl.Int64: pl.col(n).cast(t) if n in joined.columns else pl.lit(None, t)  # noqa: E731
    joined = joined.join(tasks.select("gtid", "device"), on="gtid", how="left")
    return joined.select(
        "gtid",
        "ts",
        "dur",
        "stream",
        "device",
        "task_id",
        pl.col("subtask_id").alias("context_id"),
        "model_id",
        "hw_type",
        "hw_corr",
        pl.col("task_type").alias("name"),
        "task_type",
        pl.concat_str(pl.lit("Group "), pl.col("group"), pl.lit(" Communication")).alias("thread"),
        c("planeId").alias("plane"),
        c("notifyId", pl.String).alias("notify_id"),
        c("srcRank").alias("src_rank"),
        c("dstRank").alias("dst_rank"),
        c("transport", pl.String).alias("transport"),
        c("size").alias("size"),
        c("data_type", pl.String).alias("data_type"),
        c("link_type", pl.String).alias("link_type"),
        c("bandwidth", pl.Float64).alias("bandwidth"),
        pl.col("op_name").alias("_op_name"),
    )


def _comm_ops(db: DbReader) -> pl.DataFrame | None:
    ops = db.frame(
        "COMMUNICATION_OP",
        [
            "opName",
            "startNs",
            "endNs",
            "connectionId",
            "groupName",
            "relay",
            "retry",
            "dataType",
            "algType",
            "count",
            "deviceId",
        ],
    )
    if ops is None or not ops.height:
        return None
    ops = db.resolve(ops, {"opName": "name", "groupName": "group", "algType": "alg_type"})
    ops = db.resolve(ops, {"dataType": "data_type"}, "ENUM_HCCL_DATA_TYPE")
    c = lambda n, t=pl.Int64: pl.col(n).cast(t) if n in ops.columns else pl.lit(None, t)  # noqa: E731
    return ops.select(
        pl.col("startNs").cast(pl.Int64).alias("ts"),
        (pl.col("endNs").cast(pl.Int64) - pl.col("startNs").cast(pl.Int64)).clip(0).alias("dur"),
        "name",
        c("connectionId").alias("corr"),
        pl.concat_str(pl.lit("Group "), pl.col("group"), pl.lit(" Communication")).alias("thread"),
        pl.lit(None, pl.Int64).alias("model_id"),
        c("data_type", pl.String).alias("data_type"),
        c("alg_type", pl.String).alias("alg_type"),
        c("count").alias("count"),
        c("relay").alias("relay"),
        c("retry").alias("retry"),
        c("deviceId").alias("device"),
    )


def _cann(db: DbReader) -> pl.DataFrame | None:
    api = db.frame("CANN_API", ["startNs", "endNs", "type", "globalTid", "connectionId", "name"])
    if api is None or not api.height:
        return None
    api = db.resolve(api, {"name": "name"})
    api = db.resolve(api, {"type": "level"}, "ENUM_API_TYPE")
    return api.select(
        pl.col("startNs").cast(pl.Int64).alias("ts"),
        (pl.col("endNs").cast(pl.Int64) - pl.col("startNs").cast(pl.Int64)).clip(0).alias("dur"),
        pl.lit("api").alias("kind"),
        "name",
        *_TIDS,
        pl.col("connectionId").cast(pl.Int64).alias("corr"),
        "level",
    )


def _pytorch(db: DbReader, include_python: bool) -> list[pl.DataFrame]:
    api = db.frame(
        "PYTORCH_API",
        ["startNs", "endNs", "globalTid", "connectionId", "name", "sequenceNumber", "type"],
    )
    if api is None or not api.height:
        return []
    api = db.resolve(api, {"name": "name"})
    links = db.frame("CONNECTION_IDS", ["id", "connectionId"])
    api = api.with_columns(
        # PYTORCH_API keeps its times as TEXT
        pl.col("startNs")
        .cast(pl.String)
        .str.strip_chars()
        .cast(pl.Int64, strict=False)
        .alias("ts"),
        pl.col("endNs")
        .cast(pl.String)
        .str.strip_chars()
        .cast(pl.Int64, strict=False)
        .alias("_end"),
        pl.col("type")
        .cast(pl.Int64)
        .replace_strict(PYTORCH_KINDS, default="op", return_dtype=pl.String)
        .alias("kind"),
    ).filter(pl.col("ts").is_not_null())
    if links is not None and links.height and "connectionId" in api.columns:
        first = links.group_by(pl.col("id").cast(pl.Int64)).agg(
            pl.col("connectionId").cast(pl.Int64).min().alias("corr")
        )
        api = api.join(
            first, left_on=pl.col("connectionId").cast(pl.Int64), right_on="id", how="left"
        )
    else:
        api = api.with_columns(pl.lit(None, pl.Int64).alias("corr"))
    if not include_python:  # the engine's step function stays: a step marker
        api = api.filter((pl.col("kind") != "python") | pl.col("name").str.contains(STEP_FUNCTIONS))
    frame = api.select(
        "ts",
        (pl.col("_end") - pl.col("ts")).clip(0).fill_null(0).alias("dur"),
        pl.col("kind").replace("python", "op"),
        "name",
        *_TIDS,
        "corr",
        pl.col("sequenceNumber").cast(pl.Int64).alias("seq")
        if "sequenceNumber" in api.columns
        else pl.lit(None, pl.Int64).alias("seq"),
    )
    return [frame]


def _mstx(db: DbReader) -> pl.DataFrame | None:
    marks = db.frame("MSTX_EVENTS", ["startNs", "endNs", "eventType", "globalTid", "message"])
    if marks is None or not marks.height:
        return None
    marks = db.resolve(marks, {"message": "name"})
    instant = pl.col("eventType").cast(pl.Int64).is_in([0, 3])
    return with_args(
        marks,
        marks.select(
            pl.col("startNs").cast(pl.Int64).alias("ts"),
            pl.when(instant)
            .then(0)
            .otherwise(pl.col("endNs").cast(pl.Int64) - pl.col("startNs").cast(pl.Int64))
            .clip(0)
            .alias("dur"),
            pl.when(instant).then(pl.lit("marker")).otherwise(pl.lit("range")).alias("kind"),
            "name",
            *_TIDS,
            pl.lit(-1, pl.Int32).alias("device"),
        ),
        [("domain", pl.lit("mstx"), "text")],
    )


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
    all_tasks = _tasks(db)
    tasks, _ = device.drop_ffts_parents(all_tasks)
    comm = _comm_tasks(db, tasks)
    if comm is not None:
        tasks = tasks.filter(~pl.col("gtid").is_in(comm["gtid"].implode()))
    compute = _compute(db)
    if compute is not None:
        tasks = tasks.join(compute, on="gtid", how="left")
    task_rows = device.task_rows(tasks, None)
    frames = []
    ops = _comm_ops(db)
    op_rows = planes = None
    if ops is not None:
        ops = hccl.op_streams(ops, all_tasks, comm)
        op_rows = hccl.op_rows(ops, None)
        frames.append(op_rows)
    if comm is not None:
        op_names = ops.select("thread", "ts", "dur", "name") if ops is not None else None
        planes = hccl.task_rows(comm, op_names, None)
        frames.append(planes)
    hccl_ops = comm_tasks.operators([op_rows] if op_rows is not None else [])
    frames.insert(0, comm_tasks.mark(task_rows, hccl_ops, planes))
    cann = _cann(db)
    if cann is not None:
        frames.append(host.host_rows(cann))
    for frame in _pytorch(db, include_python):
        frames.append(host.host_rows(frame))
    mstx = _mstx(db)
    if mstx is not None:
        frames.append(mstx)
    steps = db.frame("STEP_TIME", ["id", "startNs", "endNs"])
    if steps is not None and steps.height:
        frames.append(host.step_time_rows(steps))
        loaded.meta["steps"] = sorted(steps["id"].drop_nulls().cast(pl.Int64).unique().to_list())
    loaded.frames = frames
    _meta(db, loaded, source, all_tasks)
    if loaded.device is not None:  # rows whose table records no device: the export's one
        loaded.frames = [
            f.with_columns(pl.col("device").fill_null(loaded.device)) if "device" in f.columns
            else f
            for f in frames
        ]  # fmt: skip
    return loaded


def _meta(db: DbReader, loaded: Loaded, source: Source, tasks: pl.DataFrame) -> None:
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
    used = device_index.single(tasks["device"].drop_nulls().unique().to_list())
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
