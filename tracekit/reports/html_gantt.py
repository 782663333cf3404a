"""Raw device events of the drilled-down steps, column by column, for the report's Gantt.

Times are ns relative to the start of the event's (rank, device) step window. Each step keeps
at most ``max_events`` events, the longest first (short ones are invisible at step scale);
``total`` says how many the step had. Names and args are indices into one string table.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from tracekit.analysis import Analysis
from tracekit.taxonomy import CATEGORIES
from tracekit.timeline import KINDS

ARGS_CHARS = 240  # args JSON shown on hover is cut to this many characters
COMM, FUSED, FALLBACK = "communication", "fused comm", "fallback"
CLASSES = (FALLBACK, FUSED, COMM, *(c for c in CATEGORIES if c != "comm"))


def event_class() -> pl.Expr:
    """Colour class of a work row as an index into :data:`CLASSES`: fallback, fused comm,
    communication, else its category."""
    return (
        pl.when(pl.col("is_fallback"))
        .then(pl.lit(FALLBACK))
        .when(pl.col("is_fused_comm"))
        .then(pl.lit(FUSED))
        .when(pl.col("is_comm"))
        .then(pl.lit(COMM))
        .otherwise(pl.col("category").cast(pl.String))
        .replace_strict(CLASSES, range(len(CLASSES)), default=len(CLASSES) - 1)
    )


class Strings:
    """A table of distinct strings; :meth:`index` maps a column to positions in it."""

    def __init__(self) -> None:
        self.values: list[str] = []
        self._at: dict[str, int] = {}

    def index(self, column: pl.Series) -> list[int | None]:
        """Positions of the column's values (None stays None), adding new ones."""
        distinct = column.drop_nulls().unique(maintain_order=True).to_list()
        for value in distinct:
            if value not in self._at:
                self._at[value] = len(self.values)
                self.values.append(value)
        at = self._at
        return [None if v is None else at[v] for v in column.to_list()]


def _rows(analysis: Analysis, steps: list[int]) -> pl.DataFrame:
    """Work rows of ``steps`` with their window start, class and rank within the step."""
    key = ["rank", "device", "step"]
    wins = analysis.windows.filter(pl.col("step").is_in(steps)).select(*key, win="start")
    rows = analysis.work.filter(pl.col("step").is_in(steps)).join(wins, on=key, how="inner")
    return rows.with_columns(
        rel=pl.col("ts") - pl.col("win"),
        cls=event_class(),
        name=pl.col("name").cast(pl.String),
        total=pl.len().over("step"),
        order=pl.col("dur").rank("ordinal", descending=True).over("step"),
    )


def gantt(
    analysis: Analysis, steps: list[int], max_events: int, strings: Strings
) -> dict[str, Any]:
    """Per embedded step: its windows, stream rows and capped events (see module docstring)."""
    rows = _rows(analysis, steps)
    kept = rows.filter(pl.col("order") <= max_events).sort("step", "rank", "device", "stream", "ts")
    kept = kept.with_columns(
        args=pl.when(pl.col("args").str.len_chars() > ARGS_CHARS)
        .then(pl.col("args").str.slice(0, ARGS_CHARS - 1) + "…")
        .otherwise(pl.col("args"))
    )
    totals = dict(rows.group_by("step").agg(pl.col("total").first()).iter_rows())
    wins = analysis.windows.filter(pl.col("step").is_in(steps))
    out: dict[str, Any] = {}
    for step in steps:
        part = kept.filter(pl.col("step") == step)
        lanes = part.select("rank", "device", "stream").unique(maintain_order=True)
        lane_of = {tuple(lane): i for i, lane in enumerate(lanes.iter_rows())}
        here = wins.filter(pl.col("step") == step)
        out[str(step)] = {
            "total": int(totals.get(step, 0)),
            "shown": part.height,
            "windows": [list(w) for w in here.select("rank", "device", "start", "dur").iter_rows()],
            "lanes": [list(lane) for lane in lanes.iter_rows()],
            "lane": [lane_of[k] for k in part.select("rank", "device", "stream").iter_rows()],
            "start": part["rel"].to_list(),
            "dur": part["dur"].to_list(),
            "name": strings.index(part["name"]),
            "cls": part["cls"].to_list(),
            "kind": part["kind"].cast(pl.String).replace_strict(KINDS, range(len(KINDS))).to_list(),
            "args": strings.index(part["args"]),
        }
    return out
