"""The host tables of an Ascend SQLite export: ``CANN_API`` (``globalTid`` is pid << 32 | tid),
torch_npu ``PYTORCH_API`` (whose times are TEXT; links to device tasks through
``CONNECTION_IDS``) and ``MSTX_EVENTS``."""

from __future__ import annotations

import polars as pl

from tracekit.engine_frames import STEP_FUNCTIONS
from tracekit.parsers.convert import column_or_null
from tracekit.parsers.msprof.db_reader import DbReader
from tracekit.parsers.msprof.rows import with_args

PYTORCH_KINDS = {50001: "op", 50002: "api", 50003: "python", 50004: "range"}
_TIDS = (
    (pl.col("globalTid") // (1 << 32)).alias("pid"),
    (pl.col("globalTid") % (1 << 32)).alias("tid"),
)


def read_cann(db: DbReader) -> pl.DataFrame | None:
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


def read_pytorch(db: DbReader, include_python: bool) -> list[pl.DataFrame]:
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
        column_or_null(api, "sequenceNumber", pl.Int64, cast=True).alias("seq"),
    )
    return [frame]


def read_mstx(db: DbReader) -> pl.DataFrame | None:
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
