"""Steps the export names: torch_npu's ``Step Id`` of each device row (``kernel_details.csv``,
the db's task tables), kept by the parsers in ``args.step``.

An export without step ranges (a ``kernel_details.csv`` alone, or a db without ``STEP_TIME``)
still says which step every task belongs to; each step's range is then the device span of
its rows, and rows are placed by their Step Id.
"""

from __future__ import annotations

import polars as pl

from tracekit.steps.model import WORK_KINDS, empty_ranges, kind_is, numbered

NO_STEP = 4294967295  # torch_npu writes 2**32 - 1 where a task belongs to no step


def export_step_ranges(df: pl.DataFrame) -> pl.DataFrame:
    """``Step N`` device-time ranges from the rows' Step Ids; empty when the export names
    none (or only one step-less value)."""
    if "args" not in df.columns:
        return empty_ranges()
    rows = df.filter(kind_is(*WORK_KINDS) & pl.col("args").str.contains('"step":', literal=True))
    if not rows.height:
        return empty_ranges()
    number = pl.col("args").str.json_path_match("$.step").cast(pl.Int64, strict=False)
    rows = rows.with_columns(number=number).filter(
        pl.col("number").is_not_null() & (pl.col("number") != NO_STEP)
    )
    if not rows.height:
        return empty_ranges()
    ranges = rows.group_by(pl.col("rank").fill_null(0).cast(pl.Int32), "number").agg(
        start=pl.col("ts").min(), end=(pl.col("ts") + pl.col("dur")).max()
    )
    return numbered(ranges.with_columns(label=pl.format("Step {}", pl.col("number"))))
