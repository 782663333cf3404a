"""HCCL: collective operators as ``comm`` rows, their plane tasks as device rows, counted once.

Every small HCCL task is listed twice in a timeline: on its hardware stream (Ascend Hardware,
named after the SQE type: ``Notify Wait``, ``Write Value``, ``SDMA``) and on a ``Plane N``
thread of the HCCL process (named after the HCCL task: ``Notify_Wait``, ``Memcpy``,
``Reduce_Inline`` …, with src/dst rank, transport, size, bandwidth). The pair is matched on
(stream, task id, context id, start) and written once, a ``comm`` row under the HCCL name
naming its operator in ``args.op``, with the SQE type in ``args.hw_type`` (hardware rows no
plane row matches are found by :mod:`.comm_tasks`). The operator itself
(``hcom_allReduce__586_0_1``, group thread) becomes a ``comm`` row on the stream of its first
task: found through its connection id, or by time on the planes of its group when the trace has
no connection ids (MindSpore graph mode); its device is its process's, else that task's.
"""

from __future__ import annotations

import polars as pl

from tracekit.parsers.convert import column_or_null
from tracekit.parsers.msprof import mc2
from tracekit.parsers.msprof.engines import hccl_task_kind, transport_engine
from tracekit.parsers.msprof.rows import not_sentinel, with_args

MATCH_TOLERANCE_NS = 1_000  # a plane row and its hardware row start together
_GROUP = r"^Group (.+?) Communication"
_INVALID = ("INVALID_TYPE", "N/A")


def _ctx(column: str) -> pl.Expr:
    return pl.col(column).fill_null(-1).cast(pl.Int64).alias("_ctx")


def match_planes(
    hw: pl.DataFrame | None, tasks: pl.DataFrame | None
) -> tuple[pl.DataFrame | None, pl.DataFrame | None]:
    """Pair plane tasks with their hardware rows: returns (hardware rows left, plane tasks with
    ``hw_type`` from the matched hardware row)."""
    if tasks is None or not tasks.height:
        return hw, tasks
    tasks = tasks.with_row_index("_t")
    if hw is None or not hw.height:
        return hw, tasks.with_columns(
            pl.lit(None, pl.String).alias("hw_type"), pl.lit(None, pl.Int64).alias("hw_corr")
        ).drop("_t")
    right = (
        hw.with_row_index("_h")
        .select(
            "_h",
            "stream",
            "task_id",
            _ctx("subtask_id"),
            pl.col("ts").alias("_hts"),
            pl.col("task_type").alias("hw_type"),
            pl.col("corr").alias("hw_corr"),
        )
        .drop_nulls(["stream", "task_id"])
        .sort("_hts")
    )
    left = (
        tasks.select("_t", "stream", "task_id", _ctx("context_id"), "ts")
        .drop_nulls(["stream", "task_id"])
        .sort("ts")
    )
    pairs = left.join_asof(
        right,
        left_on="ts",
        right_on="_hts",
        by=["stream", "task_id", "_ctx"],
        strategy="nearest",
        tolerance=MATCH_TOLERANCE_NS,
        check_sortedness=False,
    )
    pairs = (
        pairs.drop_nulls("_h").unique("_h", keep="first").select("_t", "_h", "hw_type", "hw_corr")
    )
    tasks = tasks.join(pairs.select("_t", "hw_type", "hw_corr"), on="_t", how="left").drop("_t")
    keep = ~hw.with_row_index("_h")["_h"].is_in(pairs["_h"].implode())
    return hw.filter(keep), tasks


def _device(frame: pl.DataFrame, device: int | None) -> pl.Expr:
    """The rows' own device (from their process or table) where known, else ``device``."""
    own = column_or_null(frame, "device", pl.Int64, cast=True)
    return pl.coalesce(own, pl.lit(device, pl.Int64)).cast(pl.Int32).alias("device")


def _group(thread: pl.Expr) -> pl.Expr:
    return thread.str.extract(_GROUP, 1)


def op_streams(
    ops: pl.DataFrame, hw: pl.DataFrame | None, tasks: pl.DataFrame | None
) -> pl.DataFrame:
    """``ops`` with a ``stream``: that of the first hardware task sharing the op's connection
    id, else of the first plane task of its group inside the op's window; and that task's
    ``device`` where the op records none."""
    ops = ops.with_row_index("_o")
    stream = pl.DataFrame(schema={"_o": pl.UInt32, "stream": pl.Int64, "_tdev": pl.Int64})
    if hw is not None and hw.height and "corr" in ops.columns:
        first = (  # the tasks of the ops' connection ids alone are sorted, not every task
            hw.lazy()
            .select("ts", "corr", "stream", _task_device(hw))
            .filter(pl.col("corr").is_in(ops["corr"].drop_nulls().implode()))
            .drop_nulls(["corr", "stream"])
            .collect()
            .sort("ts", maintain_order=True)
            .group_by("corr")
            .agg(pl.col("stream").first(), pl.col("_tdev").first())
        )
        stream = ops.select("_o", "corr").join(first, on="corr", how="inner").drop("corr")
    missing = ops.filter(~pl.col("_o").is_in(stream["_o"].implode()))
    if missing.height and tasks is not None and tasks.height:
        planes = (
            tasks.select("thread", pl.col("ts").alias("_tts"), "stream", _task_device(tasks))
            .drop_nulls(["stream", "thread"])
            .sort("_tts")
        )
        found = (
            missing.select("_o", "thread", "ts", (pl.col("ts") + pl.col("dur")).alias("_end"))
            .drop_nulls("thread")
            .sort("ts")
            .join_asof(
                planes,
                left_on="ts",
                right_on="_tts",
                by="thread",
                strategy="forward",
                check_sortedness=False,
            )
            .filter(pl.col("_tts") <= pl.col("_end"))
            .select("_o", "stream", "_tdev")
        )
        stream = pl.concat([stream, found], how="vertical_relaxed")
    out = ops.join(stream, on="_o", how="left").drop("_o")
    own = column_or_null(out, "device", pl.Int64, cast=True)
    return out.with_columns(pl.coalesce(own, pl.col("_tdev")).alias("device")).drop("_tdev")


def _task_device(tasks: pl.DataFrame) -> pl.Expr:
    return column_or_null(tasks, "device", pl.Int64, cast=True).alias("_tdev")


def op_rows(ops: pl.DataFrame, device: int | None) -> pl.DataFrame:
    """Timeline rows of HCCL operators (``comm``) and MC² Aicpu operators / phases."""
    thread = pl.col("thread").fill_null("")
    aicpu = thread.str.contains("(?i)aicpu")
    phase = pl.col("name").str.extract(mc2.PHASE, 1)
    fused = pl.when(aicpu & phase.is_null()).then(pl.col("name").str.replace(r"(?i)aicpu$", ""))
    fields = [
        ("group", _group(thread), "text"),
        ("alg", pl.col("alg_type"), "text"),
        ("dtype", pl.when(~pl.col("data_type").is_in(_INVALID)).then(pl.col("data_type")), "text"),
        ("count", pl.col("count"), "int"),
        ("relay", pl.col("relay"), "int"),
        ("retry", pl.col("retry"), "int"),
        ("model_id", not_sentinel(pl.col("model_id")), "int"),
        ("mc2", fused, "text"),
        ("mc2_phase", phase, "text"),
        ("round", pl.col("name").str.extract(mc2.PHASE, 2).cast(pl.Int64, strict=False), "int"),
    ]
    return with_args(
        ops,
        ops.select(
            "ts",
            "dur",
            "name",
            "corr",
            "stream",
            pl.when(phase.is_not_null())
            .then(pl.lit("range"))
            .otherwise(pl.lit("comm"))
            .alias("kind"),
            pl.when(aicpu).then(pl.lit("ai_cpu")).otherwise(pl.lit("comm")).alias("engine"),
            _device(ops, device),
        ),
        fields,
    )


def _parent_ops(tasks: pl.DataFrame, ops: pl.DataFrame | None) -> pl.Expr | pl.Series:
    """The name of the operator whose window holds each task, on the same group thread."""
    if ops is None or not ops.height or "thread" not in tasks.columns:
        return pl.lit(None, pl.String)
    windows = (
        ops.select(
            pl.col("thread"),
            pl.col("ts").alias("_ots"),
            (pl.col("ts") + pl.col("dur")).alias("_oend"),
            pl.col("name").alias("_op"),
        )
        .drop_nulls("thread")
        .sort("_ots")
    )
    found = (
        tasks.with_row_index("_t")
        .select("_t", "thread", "ts")
        .sort("ts")
        .join_asof(
            windows,
            left_on="ts",
            right_on="_ots",
            by="thread",
            strategy="backward",
            check_sortedness=False,
        )
        .select("_t", pl.when(pl.col("ts") <= pl.col("_oend")).then(pl.col("_op")).alias("op"))
        .sort("_t")
    )
    return found["op"]


def task_rows(tasks: pl.DataFrame, ops: pl.DataFrame | None, device: int | None) -> pl.DataFrame:
    """Timeline rows of plane tasks: ``comm`` rows (the work of their operator, named in
    ``args.op``), engine ``sdma`` / ``comm`` by transport for data moves, ``comm`` for
    notifies."""
    tasks = tasks.with_columns(_op=_parent_ops(tasks, ops))
    task_type = pl.coalesce(pl.col("task_type"), pl.col("name"))
    aicpu = pl.col("thread").fill_null("").str.contains("(?i)aicpu")
    fields = [
        ("op", pl.col("_op"), "text"),
        ("group", _group(pl.col("thread").fill_null("")), "text"),
        ("plane", pl.col("plane"), "int"),
        ("src_rank", not_sentinel(pl.col("src_rank")), "int"),
        ("dst_rank", not_sentinel(pl.col("dst_rank")), "int"),
        ("transport", pl.col("transport"), "text"),
        ("size", pl.col("size"), "int"),
        ("bandwidth_gbps", pl.col("bandwidth"), "float"),
        ("link", pl.when(~pl.col("link_type").is_in(_INVALID)).then(pl.col("link_type")), "text"),
        ("dtype", pl.when(~pl.col("data_type").is_in(_INVALID)).then(pl.col("data_type")), "text"),
        ("notify_id", pl.col("notify_id"), "text"),
        ("task_id", pl.col("task_id"), "int"),
        ("context_id", not_sentinel(pl.col("context_id")), "int"),
        ("hw_type", pl.col("hw_type"), "text"),
        ("mc2", pl.when(aicpu).then(pl.col("_op").str.replace(r"(?i)aicpu$", "")), "text"),
    ]
    moves = hccl_task_kind(task_type) == "memcpy"
    corr = column_or_null(tasks, "hw_corr", pl.Int64)
    return with_args(
        tasks,
        tasks.select(
            "ts",
            "dur",
            "stream",
            corr.alias("corr"),
            pl.col("name"),
            pl.lit("comm").alias("kind"),
            pl.when(moves)
            .then(transport_engine(pl.col("transport")))
            .otherwise(pl.lit("comm"))
            .alias("engine"),
            _device(tasks, device),
        ),
        fields,
    )


def detail_ops(details: pl.DataFrame, device: int | None) -> pl.DataFrame:
    """HCCL operators from op_summary / kernel_details rows (``Stream ID`` N/A): ``comm`` rows
    with no stream, as the table gives none."""
    fields = [("op_type", pl.col("op_type"), "text")] if "op_type" in details.columns else []
    if "step" in details.columns:
        fields.append(("step", pl.col("step"), "int"))
    dev = pl.col("device").cast(pl.Int32) if "device" in details.columns else pl.lit(device)
    return with_args(
        details,
        details.select(
            pl.col("start").alias("ts"),
            "dur",
            "name",
            pl.lit("comm").alias("kind"),
            pl.lit("comm").alias("engine"),
            dev.cast(pl.Int32).alias("device"),
        ),
        fields,
    )
