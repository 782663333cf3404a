"""Device tasks that belong to an HCCL operator are communication rows.

An HCCL collective runs as hardware tasks on the device's streams (``Notify Wait``, ``Write
Value``, ``SDMA``, reductions on the AI Cores or the SDMA engine …). Where the export lists them
with their plane details, :mod:`.hccl` writes them as ``comm`` rows already; where it does not
(torch_npu Level0, msprof task_time, a hardware row no plane row matched) they would read as
copies, notifies or kernels of their own and count as non-communication work.

A task belongs to an operator when it carries the operator's connection id (the runtime gives
the operator and every task it launches the same one). Without connection ids (task_time, the
CANN 6/7 timelines, torch_npu output without launch links), a task belongs to the operator
whose window holds its start when it runs on an HCCL stream: the stream of an operator or of
its plane tasks, or a stream with a notify task inside an operator's window (a stream runs one
task at a time, so inside the window it runs the operator's). A copy on another stream never
does. The MC² ``<Op>Aicpu`` operators are left out: their connection id is the fused kernel's.

:func:`mark` makes such rows ``kind = "comm"`` (engine kept where the row had one: ``sdma``,
``aiv`` …; ``comm`` otherwise) and names the operator in ``args.op``.
"""

from __future__ import annotations

import json

import numpy as np
import polars as pl

from tracekit.parsers.convert import column_or_null

NOTIFY_TYPES = (
    "Notify Wait",
    "Notify Record",
    "Write Value",
    "NOTIFY_WAIT",
    "NOTIFY_RECORD",
    "NOTIFY_WAIT_SQE",
    "NOTIFY_RECORD_SQE",
    "WRITE_VALUE_SQE",
)
_BY_TIME_KINDS = ("kernel", "memcpy", "sync")
_NO_DEVICE = -1


def operators(frames: list[pl.DataFrame]) -> pl.DataFrame | None:
    """The HCCL operator rows among timeline row frames (``comm`` rows of the ``comm`` engine
    that are no operator's task), or None."""
    found = [
        f.filter(
            (pl.col("kind") == "comm")
            & (pl.col("engine") == "comm")
            & ~column_or_null(f, "args", pl.String)
            .fill_null("")
            .str.contains('"op":', literal=True)
        ).select(
            "ts",
            "dur",
            "name",
            *(column_or_null(f, c, pl.Int64, cast=True) for c in ("device", "stream", "corr")),
        )
        for f in frames
        if f.height and {"kind", "engine"} <= set(f.columns)
    ]
    found = [f for f in found if f.height]
    return pl.concat(found, how="vertical_relaxed") if found else None


def _key(frame: pl.DataFrame) -> pl.Expr:
    device = column_or_null(frame, "device", pl.Int64, cast=True)
    return device.fill_null(_NO_DEVICE).alias("_dev")


def _by_connection(rows: pl.DataFrame, ops: pl.DataFrame) -> pl.DataFrame:
    """(_r, _op) of rows carrying an operator's connection id."""
    first = (
        ops.drop_nulls("corr")
        .sort("ts")
        .group_by("corr", maintain_order=True)
        .agg(pl.col("name").first().alias("_op"))
    )
    return rows.filter(pl.col("corr").is_not_null()).join(first, on="corr").select("_r", "_op")


def _windows(ops: pl.DataFrame) -> pl.DataFrame:
    """Per device, the union of the operators' windows (start, end), sorted."""
    spans = ops.select(_key(ops), "ts", (pl.col("ts") + pl.col("dur")).alias("_end")).sort(
        "_dev", "ts"
    )
    spans = (
        spans.with_columns(_reach=pl.col("_end").cum_max().over("_dev"))
        .with_columns(_new=(pl.col("ts") > pl.col("_reach").shift(1).over("_dev")).fill_null(True))
        .with_columns(_id=pl.col("_new").cast(pl.Int64).cum_sum())
    )
    return (
        spans.group_by("_dev", "_id")
        .agg(pl.col("ts").min().alias("_ws"), pl.col("_end").max().alias("_we"))
        .drop("_id")
        .sort("_ws")
    )


def _inside(rows: pl.DataFrame, windows: pl.DataFrame) -> pl.DataFrame:
    """``rows`` (with ``_dev``) whose start lies inside a window of their device."""
    found = rows.sort("ts").join_asof(
        windows,
        left_on="ts",
        right_on="_ws",
        by="_dev",
        strategy="backward",
        check_sortedness=False,
    )
    return found.filter(pl.col("ts") < pl.col("_we")).drop("_ws", "_we")


def _by_time(rows: pl.DataFrame, ops: pl.DataFrame, planes: pl.DataFrame | None) -> pl.DataFrame:
    """(_r, _op) of task rows without a connection id that start inside an operator's window
    on an HCCL stream."""
    loose = rows.filter(
        pl.col("corr").is_null()
        & pl.col("kind").is_in(_BY_TIME_KINDS)
        & pl.col("stream").is_not_null()
    ).select("_r", "ts", "name", "stream", _key(rows))
    if not loose.height:
        return pl.DataFrame(schema={"_r": pl.UInt32, "_op": pl.String})
    inside = _inside(loose, _windows(ops))
    streams = [ops.select(_key(ops), "stream")]
    if planes is not None and planes.height:
        streams.append(planes.select(_key(planes), "stream"))
    streams.append(inside.filter(pl.col("name").is_in(NOTIFY_TYPES)).select("_dev", "stream"))
    hccl = pl.concat(streams, how="vertical_relaxed").drop_nulls().unique()
    inside = inside.join(hccl, on=["_dev", "stream"], how="semi")
    named = inside.sort("ts").join_asof(
        ops.select(_key(ops), pl.col("ts").alias("_ots"), pl.col("name").alias("_op")).sort("_ots"),
        left_on="ts",
        right_on="_ots",
        by="_dev",
        strategy="backward",
        check_sortedness=False,
    )
    return named.select("_r", "_op")


def _json_texts(names: pl.Series) -> dict[str, str]:
    return {n: json.dumps(n, ensure_ascii=False) for n in names.drop_nulls().unique().to_list()}


def mark(
    rows: pl.DataFrame, ops: pl.DataFrame | None, planes: pl.DataFrame | None = None
) -> pl.DataFrame:
    """Device task ``rows`` (timeline row frame) with the tasks of the HCCL operators ``ops``
    (see :func:`operators`) made ``comm`` rows naming their operator in ``args.op``; ``planes``
    are the operators' plane task rows (their streams are HCCL streams)."""
    if ops is None or not ops.height or not rows.height:
        return rows
    indexed = rows.with_row_index("_r")
    found = pl.concat([_by_connection(indexed, ops), _by_time(indexed, ops, planes)])
    found = found.unique("_r", keep="first").sort("_r")
    if not found.height:
        return rows
    hit = found["_r"]
    name = pl.col("o").replace_strict(_json_texts(found["_op"]), default=None)
    encoded = (
        pl.DataFrame({"a": rows["args"].gather(hit), "o": found["_op"]})
        .select(
            pl.when(name.is_null())
            .then(pl.col("a"))
            .when(pl.col("a").is_null())
            .then(pl.concat_str(pl.lit('{"op":'), name, pl.lit("}")))
            .otherwise(
                pl.concat_str(
                    pl.col("a").str.strip_suffix("}"), pl.lit(',"op":'), name, pl.lit("}")
                )
            )
        )
        .to_series()
    )
    args = rows["args"].clone().scatter(hit, encoded)
    flags = np.zeros(rows.height, dtype=bool)
    flags[hit.to_numpy()] = True
    member = pl.Series("_m", flags)
    return rows.with_columns(
        pl.when(member).then(pl.lit("comm")).otherwise(pl.col("kind")).alias("kind"),
        pl.when(member)
        .then(pl.coalesce(pl.col("engine"), pl.lit("comm")))
        .otherwise(pl.col("engine"))
        .alias("engine"),
        args.alias("args"),
    )
