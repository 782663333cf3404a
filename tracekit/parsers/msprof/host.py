"""Host rows (Python ops, torch_npu task queue, CANN / AscendCL API) and step ranges.

``corr`` is the Ascend connection id: a CANN API call and the device tasks it launched carry
the same one (the ``HostToDevice`` flows of a timeline join exactly these). A Python ``cpu_op``
gets the connection id of the first task its ``async_npu`` flows reach: the flow starts at the
op's own start on its thread and ends at the task's start on its stream.
"""

from __future__ import annotations

import polars as pl

from tracekit.parsers.convert import column_or_null
from tracekit.parsers.msprof.rows import not_sentinel, with_args


def host_rows(frame: pl.DataFrame) -> pl.DataFrame:
    """Timeline rows of one host frame from :mod:`.trace_json` (kind already set)."""

    def c(name: str, dtype: pl.DataType = pl.String) -> pl.Expr:
        return column_or_null(frame, name, dtype)

    fields = [
        ("level", c("level"), "text"),
        ("mode", c("mode"), "text"),
        ("seq", pl.when(c("seq", pl.Int64) >= 0).then(c("seq", pl.Int64)), "int"),
        ("queue_id", c("queue_corr", pl.Int64), "int"),
    ]
    return with_args(
        frame,
        frame.select(
            "ts",
            "dur",
            "kind",
            "name",
            "pid",
            "tid",
            c("corr", pl.Int64).alias("corr"),
            pl.lit(-1, pl.Int32).alias("device"),
        ),
        fields,
    )


def link_ops(
    ops: pl.DataFrame, flows: pl.DataFrame | None, hw: pl.DataFrame | None
) -> pl.DataFrame:
    """``ops`` (Python op rows) with ``corr`` from their async_npu flows, where there are any."""
    if flows is None or hw is None or not flows.height or not hw.height or not ops.height:
        return ops
    starts = flows.filter(pl.col("ph") == "s").select("id", "pid", "tid", "ts")
    ends = flows.filter(pl.col("ph") == "f").select(
        "id", pl.col("tid").alias("stream"), pl.col("ts").alias("end_ts")
    )
    tasks = hw.drop_nulls(["corr"]).group_by("stream", "ts").agg(pl.col("corr").min())
    reached = ends.join(tasks, left_on=["stream", "end_ts"], right_on=["stream", "ts"])
    launches = (
        starts.join(reached.select("id", "corr"), on="id")
        .group_by("pid", "tid", "ts")
        .agg(pl.col("corr").min().alias("_flow_corr"))
    )
    indexed = ops.with_row_index("_r")
    # ops sharing a start on one thread are nested: the innermost (shortest) launched the task
    inner = (
        indexed.filter(pl.col("kind") == "op")
        .sort("dur")
        .unique(["pid", "tid", "ts"], keep="first")
        .select("_r", "pid", "tid", "ts")
    )
    linked = inner.join(launches, on=["pid", "tid", "ts"]).select("_r", "_flow_corr")
    out = indexed.join(linked, on="_r", how="left")
    corr = (
        pl.coalesce(pl.col("corr"), pl.col("_flow_corr"))
        if "corr" in ops.columns
        else pl.col("_flow_corr")
    )
    return out.with_columns(corr.alias("corr")).drop("_r", "_flow_corr")


def step_rows(steps: pl.DataFrame, device: int | None) -> pl.DataFrame:
    """msprof Step Trace rows (``Iteration N``, ``FP_BP Time`` …) as device-side ranges."""
    fields = [
        ("step", pl.col("iteration"), "int"),
        ("phase", pl.col("cat"), "text"),
    ]
    return with_args(
        steps,
        steps.select(
            "ts",
            "dur",
            "name",
            pl.lit("range").alias("kind"),
            pl.lit(device, pl.Int32).alias("device"),
        ),
        fields,
    )


def step_time_rows(steps: pl.DataFrame) -> pl.DataFrame:
    """torch_npu ``STEP_TIME`` (id, startNs, endNs) as host ranges ``Step <id>``."""
    return with_args(
        steps,
        steps.select(
            pl.col("startNs").alias("ts"),
            (pl.col("endNs") - pl.col("startNs")).alias("dur"),
            pl.concat_str(pl.lit("Step "), pl.col("id").cast(pl.String)).alias("name"),
            pl.lit("range").alias("kind"),
            pl.lit(-1, pl.Int32).alias("device"),
        ),
        [("step", not_sentinel(pl.col("id").cast(pl.Int64)), "int")],
    )
