"""Device task rows: hardware tasks joined with their op details, kind and engine normalised.

Task rows come from a timeline's Ascend Hardware layer, from ``task_time_*.csv`` or from the
db ``TASK`` table; op details (op type, core type, block dim, shapes, step) from
``kernel_details.csv`` / ``op_summary_*.csv`` or ``COMPUTE_TASK_INFO``. CSV details are joined
to tasks on (stream, task id) at the nearest start, else on (name, start) when the table has
no ids (torch_npu Level0), within :data:`TOLERANCE_NS`.

FFTS+ tasks are written twice by the runtime: a parent row (context id 4294967295) spanning the
subtasks, and the subtasks. A parent whose subtasks are present is dropped (the text exports
already leave it out); HCCL operators are represented by their ``comm`` row instead.
"""

from __future__ import annotations

import polars as pl

from tracekit.parsers.convert import column_or_null
from tracekit.parsers.msprof import mc2
from tracekit.parsers.msprof.engines import classify
from tracekit.parsers.msprof.rows import NO_ID, Field, not_sentinel, per_distinct_row, with_args

TOLERANCE_NS = 20_000
DETAIL_COLUMNS = (
    "name",
    "op_type",
    "core",
    "start",
    "dur",
    "wait",
    "block_dim",
    "mix_block_dim",
    "op_state",
    "hf32",
    "input_shapes",
    "input_dtypes",
    "input_formats",
    "output_shapes",
    "output_dtypes",
    "output_formats",
    "step",
    "model_id",
    "context_id",
    "device",
    "task_id",
    "stream",
)
COMM_CORES = ("HCCL", "COMMUNICATION")


def drop_ffts_parents(tasks: pl.DataFrame) -> tuple[pl.DataFrame, int]:
    """Tasks without the FFTS+ parent rows whose subtasks are listed; and how many were dropped."""
    if "subtask_id" not in tasks.columns or not tasks.height:
        return tasks, 0
    keys = [c for c in ("device", "stream", "task_id", "corr") if c in tasks.columns]
    parent = pl.col("subtask_id").fill_null(NO_ID) == NO_ID
    has_sub = (~parent).cast(pl.Int32).sum().over(keys) > 0
    dropped = tasks.select((parent & has_sub).sum()).item()
    if not dropped:
        return tasks, 0
    return tasks.filter(~(parent & has_sub)), int(dropped)


def split_details(details: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(task rows, HCCL operator rows): an HCCL/COMMUNICATION row without a stream id is an
    operator; one with ids is a task (HCCL AIV-mode kernels)."""
    if "core" not in details.columns:
        return details, details.head(0)
    stream = pl.col("stream").is_null() if "stream" in details.columns else pl.lit(True)
    op = pl.col("core").is_in(COMM_CORES) & stream
    return details.filter(~op.fill_null(False)), details.filter(op.fill_null(False))


def attach(tasks: pl.DataFrame, details: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """``tasks`` with the ``d_*`` columns of the detail row each one matches, and the detail
    rows that matched no task."""
    tasks = tasks.with_row_index("_i")
    details = details.with_row_index("_d")
    right = tasks.select("_i", "ts", "stream", "task_id", "name").sort("ts")
    pairs = []
    remaining = details
    if {"stream", "task_id"} <= set(details.columns):
        by_ids = remaining.select("_d", "start", "stream", "task_id")
        found = (
            by_ids.drop_nulls(["stream", "task_id", "start"])
            .sort("start")
            .join_asof(
                right.drop_nulls(["stream", "task_id"]).select("_i", "ts", "stream", "task_id"),
                left_on="start",
                right_on="ts",
                by=["stream", "task_id"],
                strategy="nearest",
                tolerance=TOLERANCE_NS,
                check_sortedness=False,
            )
            .drop_nulls("_i")
        )
        pairs.append(found.select("_d", "_i"))
        remaining = remaining.filter(~pl.col("_d").is_in(found["_d"].implode()))
    if remaining.height and "name" in remaining.columns:
        by_name = remaining.select("_d", "start", "name").drop_nulls(["name", "start"])
        found = (
            by_name.sort("start")
            .join_asof(
                right.drop_nulls("name").select("_i", "ts", "name"),
                left_on="start",
                right_on="ts",
                by="name",
                strategy="nearest",
                tolerance=TOLERANCE_NS,
                check_sortedness=False,
            )
            .drop_nulls("_i")
        )
        pairs.append(found.select("_d", "_i"))
    matched = pl.concat(pairs) if pairs else pl.DataFrame(schema={"_d": pl.UInt32, "_i": pl.UInt32})
    # a task takes its first match, and a detail row its first task
    matched = matched.filter(pl.col("_i").is_first_distinct()).filter(
        pl.col("_d").is_first_distinct()
    )
    keep = [c for c in DETAIL_COLUMNS if c in details.columns]
    row = pl.repeat(None, tasks.height, dtype=pl.UInt32, eager=True).scatter(
        matched["_i"], matched["_d"]
    )
    joined = details.select(pl.col(c).gather(row).alias(f"d_{c}") for c in keep)
    unmatched = details.filter(~pl.col("_d").is_in(matched["_d"].implode())).drop("_d")
    return tasks.drop("_i").hstack(joined), unmatched


def task_rows(frame: pl.DataFrame, device: int | None, detail_time: bool = False) -> pl.DataFrame:
    """Timeline rows of device tasks carrying ``d_*`` detail columns (any may be missing).

    ``detail_time`` takes start and duration from the detail row where one matched (task_time
    and op_summary time the same task slightly differently; op_statistic sums the latter)."""

    def d(name: str, dtype: pl.DataType = pl.String) -> pl.Expr:
        return column_or_null(frame, f"d_{name}", dtype)

    def c(name: str, dtype: pl.DataType = pl.String) -> pl.Expr:
        return column_or_null(frame, name, dtype)

    keys = frame.with_columns(
        _n=pl.coalesce(d("name"), c("name"), c("task_type")), _c=d("core"), _t=c("task_type")
    ).select("_n", "_c", "_t")
    classes = per_distinct_row(keys, _classify)
    frame = frame.with_columns(keys["_n"], *classes)
    name, kind, engine = pl.col("_n"), pl.col("_kind"), pl.col("_engine")
    op_type = d("op_type")
    kernel = kind == "kernel"
    fields: list[Field] = [
        ("op_type", op_type, "text"),
        ("core", d("core"), "text"),
        ("task_type", c("task_type"), "text"),
        ("block_dim", d("block_dim", pl.Int64), "int"),
        ("mix_block_dim", d("mix_block_dim", pl.Int64), "int"),
        ("op_state", d("op_state"), "text"),
        ("hf32", d("hf32"), "text"),
        ("input_shapes", d("input_shapes"), "text"),
        ("input_dtypes", d("input_dtypes"), "text"),
        ("input_formats", d("input_formats"), "text"),
        ("output_shapes", d("output_shapes"), "text"),
        ("output_dtypes", d("output_dtypes"), "text"),
        ("output_formats", d("output_formats"), "text"),
        ("step", d("step", pl.Int64), "int"),
        (
            "model_id",
            not_sentinel(pl.coalesce(c("model_id", pl.Int64), d("model_id", pl.Int64))),
            "int",
        ),
        ("task_id", c("task_id", pl.Int64), "int"),
        (
            "context_id",
            not_sentinel(pl.coalesce(c("subtask_id", pl.Int64), d("context_id", pl.Int64))),
            "int",
        ),
        ("kernel_name", pl.when(d("name").is_not_null()).then(c("kernel_name")), "text"),
        ("wait_ns", d("wait", pl.Int64), "int"),
        ("mc2", pl.col("_mc2"), "text"),
    ]
    named = frame.select(name.alias("n"), op_type.alias("t"), kernel.alias("k"))
    types = mc2.mc2_types(named["t"], named["n"])
    frame = frame.with_columns(
        _mc2=types.zip_with(named["k"].fill_null(False), types.clear(len(types)))
    )
    ts, dur = pl.col("ts"), pl.col("dur")
    if detail_time:
        ts, dur = pl.coalesce(d("start", pl.Int64), ts), pl.coalesce(d("dur", pl.Int64), dur)
    dev = pl.coalesce(c("device", pl.Int64), d("device", pl.Int64), pl.lit(device, pl.Int64))
    return with_args(
        frame,
        frame.select(
            ts.alias("ts"),
            dur.alias("dur"),
            name.alias("name"),
            kind.alias("kind"),
            engine.alias("engine"),
            dev.cast(pl.Int32).alias("device"),
            c("stream", pl.Int64),
            c("corr", pl.Int64).alias("corr"),
            pl.col("_unknown"),
            c("task_type").alias("_type"),
        ),
        fields,
    )


def _classify(keys: pl.DataFrame) -> pl.DataFrame:
    kind, engine, known = classify(pl.col("_c"), pl.col("_t"), pl.col("_n"))
    return keys.select(kind.alias("_kind"), engine.alias("_engine"), (~known).alias("_unknown"))


def detail_rows(details: pl.DataFrame, device: int | None) -> pl.DataFrame:
    """Device rows from an op_summary / kernel_details table alone (no task list to join)."""
    renamed = details.select(
        pl.col("start").alias("ts"),
        "dur",
        *(pl.col(c).alias(f"d_{c}") for c in DETAIL_COLUMNS if c in details.columns),
    )
    for column in ("stream", "task_id"):
        if f"d_{column}" in renamed.columns:
            renamed = renamed.with_columns(pl.col(f"d_{column}").alias(column))
    return task_rows(renamed, device)


def unknown_types(rows: pl.DataFrame) -> str | None:
    """A warning naming task types no vocabulary knew (read as kernels with no engine)."""
    unknown = (
        rows.filter(pl.col("_unknown") & pl.col("_type").is_not_null())
        .group_by("_type")
        .len()
        .sort("len", "_type", descending=[True, False])
    )
    if not unknown.height:
        return None
    listing = ", ".join(f"{t} ({n})" for t, n in unknown.iter_rows())
    return f"unknown task types read as kernels without an engine: {listing}"
