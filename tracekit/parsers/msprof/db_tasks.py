"""The device tables of an Ascend SQLite export: ``TASK`` (every device task, runtime task
types), ``COMPUTE_TASK_INFO`` (kernel names, core type, op type, block dim, shapes; joined on
``globalTaskId``), ``COMMUNICATION_TASK_INFO`` (a task as an HCCL plane task: src/dst rank,
transport, size through the ``ENUM_HCCL_*`` tables) and ``COMMUNICATION_OP`` (the collectives).
Times are epoch ns."""

from __future__ import annotations

import polars as pl

from tracekit.errors import TraceError
from tracekit.parsers.convert import column_or_null
from tracekit.parsers.msprof.db_reader import DbReader
from tracekit.parsers.msprof.rows import NO_ID


def read_tasks(db: DbReader) -> pl.DataFrame:
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


def read_compute(db: DbReader) -> pl.DataFrame | None:
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


def read_comm_tasks(db: DbReader, tasks: pl.DataFrame) -> pl.DataFrame | None:
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

    def c(name: str, dtype: pl.DataType = pl.Int64) -> pl.Expr:
        return column_or_null(joined, name, dtype, cast=True)

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


def read_comm_ops(db: DbReader) -> pl.DataFrame | None:
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

    def c(name: str, dtype: pl.DataType = pl.Int64) -> pl.Expr:
        return column_or_null(ops, name, dtype, cast=True)

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
