"""What every step-finding method returns: :class:`Steps`, its ranges table and helpers."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import polars as pl

from tracekit.timeline import WORK_KINDS as WORK_KINDS  # defined beside the timeline

PHASES = ("prefill", "decode", "mixed")
CONFIDENCES = ("high", "medium", "low", "none")
RANGE_SCHEMA: dict[str, pl.DataType] = {
    "rank": pl.Int32(),
    "step": pl.Int64(),
    "label": pl.String(),
    "start": pl.Int64(),
    "end": pl.Int64(),
    "phase": pl.String(),
    "tokens": pl.Int64(),
}


@dataclass
class Steps:
    """How steps were found and their ranges per rank.

    ``ranges`` has ``rank, step, label, start, end, phase, tokens``; ``by_device_time`` is
    True when the ranges are on the device's clock (device annotations, msprof ``Iteration N``,
    period and gap methods without launch links), so rows are placed by their own time rather
    than through their launch. ``phase_method`` says where phases and tokens came from
    (``marker``, ``export``, ``kernels`` or None); ``warnings`` what the method had to guess;
    ``family`` which markers cut the steps (an engine's, ``pytorch``, ``generic`` …).
    """

    method: str
    confidence: str
    detail: str
    ranges: pl.DataFrame
    by_device_time: bool = False
    phase_method: str | None = None
    warnings: list[str] = field(default_factory=list)
    family: str | None = None  # the marker family (an engine, pytorch, user ranges …)

    def __len__(self) -> int:
        return self.ranges.height


def empty_ranges() -> pl.DataFrame:
    """A ranges table with no rows."""
    return pl.DataFrame(schema=RANGE_SCHEMA)


def is_host() -> pl.Expr:
    """Rows of the host: no device or device -1."""
    return pl.col("device").is_null() | (pl.col("device") < 0)


def kind_is(*kinds: str) -> pl.Expr:
    """Rows whose ``kind`` is one of ``kinds``."""
    return pl.col("kind").is_in(list(kinds))


def named(frame: pl.DataFrame, pattern: str) -> pl.Expr:
    """Rows of ``frame`` whose name matches the regex ``pattern``, tested once per distinct
    name (a trace has millions of rows and a few thousand names)."""
    names = frame.get_column("name").unique().cast(pl.String).drop_nulls()
    hits = names.filter(names.str.contains(pattern))
    return pl.col("name").is_in(hits.to_list())


def outermost(ranges: pl.DataFrame) -> pl.DataFrame:
    """Ranges that are steps of their own, per rank: a range inside a kept one (a marker
    nested in itself) or overlapping it by half its length or more (the copy of one
    annotation on a second stream) is dropped; one that only runs into the next by a little
    (a kernel's tail) stays. One pass over the ranges, which are few (one per step)."""
    ranges = ranges.sort("rank", "start", pl.col("end"), descending=[False, False, True])
    rank = ranges["rank"].to_numpy()
    start, end = ranges["start"].to_numpy(), ranges["end"].to_numpy()
    keep = np.zeros(ranges.height, dtype=bool)
    reach, last_rank = None, None
    for i in range(ranges.height):
        if rank[i] != last_rank or reach is None or start[i] >= reach:
            keep[i], reach, last_rank = True, end[i], rank[i]
        elif end[i] > reach and (reach - start[i]) * 2 < end[i] - start[i]:
            keep[i], reach = True, end[i]
    return ranges.filter(pl.Series(keep))


def numbered(ranges: pl.DataFrame) -> pl.DataFrame:
    """Ranges sorted per rank and numbered from 0, in :data:`RANGE_SCHEMA`; a missing
    ``phase`` or ``tokens`` column is null."""
    missing = [
        pl.lit(None, RANGE_SCHEMA[c]).alias(c)
        for c in ("phase", "tokens")
        if c not in ranges.columns
    ]
    return (
        ranges.with_columns(missing)
        .sort("rank", "start")
        .with_columns(step=pl.int_range(pl.len(), dtype=pl.Int64).over("rank"))
        .select(list(RANGE_SCHEMA))
        .cast(RANGE_SCHEMA)
    )


OPEN_END = 2**62  # the end of a range that runs until the next one, before it is closed


def closed(ranges: pl.DataFrame, df: pl.DataFrame) -> pl.DataFrame:
    """``ranges`` whose open end (:data:`OPEN_END`, the last range of a rank) is set to the
    end of the rank's last row."""
    last = df.group_by(rank=pl.col("rank").fill_null(0).cast(pl.Int32)).agg(
        _last=(pl.col("ts") + pl.col("dur")).max()
    )
    out = ranges.join(last, on="rank", how="left", maintain_order="left")
    end = pl.when(pl.col("end") >= OPEN_END).then(pl.max_horizontal("_last", "start"))
    return out.with_columns(end=end.otherwise(pl.col("end"))).drop("_last")
