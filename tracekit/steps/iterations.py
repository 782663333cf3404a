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
from tracekit.steps.placement import launch_times, step_at
from tracekit.steps.workload import OPTIMIZER

ITERATION_SHARE = 0.75  # periods that must run an optimizer step to be training iterations
STEP_RANGES = r"^Optimizer\.step#|^torch/optim/.*: step$|optimizer\.step"


def _rank() -> pl.Expr:
    return pl.col("rank").fill_null(0).cast(pl.Int32)


def optimizer_kernels(df: pl.DataFrame) -> pl.DataFrame:
    """``rank, at``: the start of every kernel of an optimizer step (named after it, or
    launched from inside an ``Optimizer.step#`` range of its rank)."""
    kernels = df.lazy().filter(kind_is("kernel")).select(_rank(), "name", "corr", "ts").collect()
    of_step = named(kernels, OPTIMIZER)
    wanted = named(df, STEP_RANGES) & is_host() & kind_is("range", "op")
    steps = df.lazy().filter(wanted).select(_rank(), start="ts", end=pl.col("ts") + pl.col("dur"))
    ranges = steps.collect().with_columns(step=pl.int_range(pl.len(), dtype=pl.Int64))
    if ranges.height:
        launched = kernels.select("rank", _launch=launch_times(df, kernels)["_launch"])
        of_step = of_step | step_at(launched, "_launch", ranges, ["rank"], ends=True).is_not_null()
    return kernels.filter(of_step).select("rank", at="ts")


def iteration_share(df: pl.DataFrame, ranges: pl.DataFrame) -> float:
    """Share of the period ``ranges`` (the load and cut-short windows aside) that hold a
    kernel of an optimizer step."""
    real = ranges.filter(~pl.col("label").is_in(NOT_STEPS))
    optimizer = optimizer_kernels(df)
    if not real.height or not optimizer.height:
        return 0.0
    held = optimizer.select("rank", step=step_at(optimizer, "at", real, ["rank"], ends=True))
    return held.drop_nulls("step").unique().height / real.height
