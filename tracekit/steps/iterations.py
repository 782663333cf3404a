"""Training iterations among the periods of the kernels: a period is an iteration only when
nearly every period runs an optimizer step (a forward pass alone repeats its layer blocks,
and those are no iterations).

An optimizer step shows as kernels named after it (``multi_tensor_apply``, fused Adam / SGD
kernels, :data:`~tracekit.steps.workload.OPTIMIZER`) or as the kernels launched from inside
PyTorch's ``Optimizer.step#…`` host range (a plain SGD runs ATen elementwise kernels).
"""

from __future__ import annotations

import polars as pl

from tracekit.steps.model import is_host, kind_is, named
from tracekit.steps.period import NOT_STEPS
from tracekit.steps.workload import OPTIMIZER

ITERATION_SHARE = 0.75  # periods that must run an optimizer step to be training iterations
STEP_RANGES = r"^Optimizer\.step#|^torch/optim/.*: step$|optimizer\.step"


def _rank() -> pl.Expr:
    return pl.col("rank").fill_null(0).cast(pl.Int32)


def _within(times: pl.DataFrame, ranges: pl.DataFrame) -> pl.DataFrame:
    """The rows of ``times`` whose ``at`` falls inside one of ``ranges`` (``rank, start,
    end``, disjoint per rank) of their rank, with that range's columns."""
    found = times.sort("at").join_asof(
        ranges.sort("start"),
        left_on="at",
        right_on="start",
        by="rank",
        strategy="backward",
        check_sortedness=False,
    )
    return found.filter(pl.col("at") < pl.col("end"))


def optimizer_kernels(df: pl.DataFrame) -> pl.DataFrame:
    """``rank, at``: the start of every kernel of an optimizer step."""
    kernels = df.filter(kind_is("kernel"))
    by_name = kernels.filter(named(kernels, OPTIMIZER)).select(_rank(), at=pl.col("ts"))
    host = df.filter(is_host() & kind_is("range", "op"))
    steps = host.filter(named(host, STEP_RANGES)) if host.height else host
    if not steps.height:
        return by_name
    ranges = steps.select(_rank(), start=pl.col("ts"), end=pl.col("ts") + pl.col("dur"))
    calls = df.filter(kind_is("api") & pl.col("corr").is_not_null()).select(
        _rank(), "corr", at=pl.col("ts")
    )
    inside = _within(calls, ranges).select("rank", "corr").unique()
    launched = kernels.select(_rank(), "corr", at=pl.col("ts")).join(inside, on=["rank", "corr"])
    return pl.concat([by_name, launched.select("rank", "at")]).unique()


def iteration_share(df: pl.DataFrame, ranges: pl.DataFrame) -> float:
    """Share of the period ``ranges`` (the load and cut-short windows aside) that hold a
    kernel of an optimizer step."""
    real = ranges.filter(~pl.col("label").is_in(NOT_STEPS))
    optimizer = optimizer_kernels(df)
    if not real.height or not optimizer.height:
        return 0.0
    held = _within(optimizer, real.select("rank", "step", "start", "end"))
    return held.select(pl.struct("rank", "step").n_unique()).item() / real.height
