"""Step markers: the ranges that profilers and serving engines draw around one step.

:data:`MARKERS` lists them by family, most specific first; the first family with a match in
the trace gives the steps. A family's ``decode`` turns a marker's name into its phase and
token count when the engine encodes them (the engine tables are in :mod:`.engines`). Host
ranges come first: the same annotation recorded on the device (Kineto's
``gpu_user_annotation``) is the same step, so device copies are used only when the host ones
are missing, and then the rows are placed by their own time.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import polars as pl

from tracekit.steps.engines import ENGINE_MARKERS, EngineMarker
from tracekit.steps.model import (
    OPEN_END,
    empty_ranges,
    is_host,
    kind_is,
    named,
    numbered,
    outermost,
)

MARKER_KINDS = ("range", "op")


@dataclass(frozen=True)
class Marker:
    """A family of step markers: a regex over range names and what the names encode."""

    family: str
    pattern: str
    decode: Callable[[pl.Expr], tuple[pl.Expr, pl.Expr]] | None = None
    open_ended: bool = False  # the marker covers part of a step: it runs to the next one


def _engine(marker: EngineMarker) -> Marker:
    return Marker(marker.engine, marker.pattern, marker.decode, marker.open_ended)


def _says_decode(name: pl.Expr) -> tuple[pl.Expr, pl.Expr]:
    """A range named a decode step is one: phase ``decode``, tokens unknown."""
    return pl.lit("decode"), pl.lit(None, pl.Int64)


MARKERS: tuple[Marker, ...] = (
    *(_engine(m) for m in ENGINE_MARKERS),
    Marker("pytorch", r"^ProfilerStep#\d+$"),  # torch/profiler/profiler.py: prof.step()
    # generic step ranges (NVTX / roctx / mstx), older engines' model-runner ranges
    Marker("generic", r"^(model_runner|ModelRunner)[.:_ ]*(forward|execute)"),
    Marker("generic", r"^(decode|Decode)[ _-]?[Ss]tep", _says_decode),
    Marker("generic", r"^[Ss]tep[ _#-]?\d+$"),  # torch_npu STEP_TIME rows, user ranges
    Marker("msprof", r"^Iteration \d+$"),  # msprof Step Trace (device-side ranges)
)


def candidates(df: pl.DataFrame, host: bool) -> pl.DataFrame:
    """The rows that may be step markers: ranges and operators (torch_npu records
    ``ProfilerStep#N`` as an operator, Kineto as a range) of the host, or of the devices."""
    return df.filter(kind_is(*MARKER_KINDS) & (is_host() if host else ~is_host()))


def marker_ranges(df: pl.DataFrame, marker: Marker, host: bool) -> pl.DataFrame:
    """The outermost host (or device) ranges matching ``marker``, numbered per rank, with
    phase and tokens where the family encodes them."""
    side = candidates(df, host)
    rows = side.filter(named(side, marker.pattern))
    if not rows.height:
        return empty_ranges()
    name = pl.col("name").cast(pl.String)
    phase, tokens = marker.decode(name) if marker.decode else (None, None)
    ranges = rows.select(
        pl.col("rank").fill_null(0).cast(pl.Int32),
        label=name,
        start=pl.col("ts"),
        end=pl.col("ts") + pl.col("dur"),
        phase=pl.lit(None, pl.String) if phase is None else phase,
        tokens=pl.lit(None, pl.Int64) if tokens is None else tokens,
    )
    ranges = outermost(ranges)
    if marker.open_ended:  # the last one runs to the end of the trace (closed by the caller)
        ranges = ranges.sort("rank", "start").with_columns(
            end=pl.col("start").shift(-1).over("rank").fill_null(pl.lit(OPEN_END, pl.Int64))
        )
    return numbered(ranges)


def borrow_phases(df: pl.DataFrame, ranges: pl.DataFrame, host: bool) -> pl.DataFrame:
    """Phase and tokens of ranges whose markers encode none (``ProfilerStep#N``, Python
    frames) from the engine markers nested inside them: one phase when they agree, ``mixed``
    when prefill and decode meet; tokens when a single marker is nested."""
    side = candidates(df, host)
    for marker in MARKERS:
        if marker.decode is None:
            continue
        inner = marker_ranges(side, marker, host)
        if not inner.height:
            continue
        inner = inner.select("rank", "phase", "tokens", at=pl.col("start")).sort("at")
        within = inner.join_asof(
            ranges.select("rank", "step", "start", "end").sort("start"),
            left_on="at",
            right_on="start",
            by="rank",
            strategy="backward",
            check_sortedness=False,
        ).filter(pl.col("at") < pl.col("end"))
        if not within.height:
            continue
        phases = within.group_by("rank", "step").agg(
            _phases=pl.col("phase").drop_nulls().unique(),
            # several forwards in one step (speculative decoding: drafts and a verify) do not
            # add up to its tokens: tokens only from a single nested marker
            _tokens=pl.when(pl.len() == 1).then(pl.col("tokens").first()),
        )
        one = pl.col("_phases").list.len() == 1
        phase = (
            pl.when(one)
            .then(pl.col("_phases").list.first())
            .when(pl.col("_phases").list.len() > 1)
            .then(pl.lit("mixed"))
        )
        donated = ranges.drop("phase", "tokens").join(phases, on=["rank", "step"], how="left")
        return donated.with_columns(phase=phase, tokens=pl.col("_tokens")).select(ranges.columns)
    return ranges


def find_markers(df: pl.DataFrame) -> tuple[pl.DataFrame, Marker, bool] | None:
    """The first marker family found: ``(ranges, marker, on_host)``, host ranges first."""
    for host in (True, False):
        side = candidates(df, host)
        if not side.height:
            continue
        names = side.get_column("name").unique().cast(pl.String).drop_nulls()
        for marker in MARKERS:
            if names.str.contains(marker.pattern).any():
                return marker_ranges(side, marker, host), marker, host
    return None


def user_marker(df: pl.DataFrame, pattern: str) -> tuple[pl.DataFrame, bool]:
    """Ranges matching the user's ``--step-marker``: host ones, else device ones."""
    marker = Marker("user", pattern)
    for host in (True, False):
        ranges = marker_ranges(df, marker, host)
        if ranges.height:
            return ranges, host
    return empty_ranges(), True
