"""The communication rows of the steps with how much of each ran beside compute, computed
once per analysis for the rules that read them."""

from __future__ import annotations

import polars as pl

from tracekit.metrics.streams import comm_exposure
from tracekit.model import Context


def step_exposure(ctx: Context) -> pl.DataFrame:
    """The communication rows in steps with ``overlap_ns``
    (:func:`tracekit.metrics.streams.comm_exposure`), computed once per context: rules
    ``overlap`` and ``mc2`` (its fused operators) read the same rows."""
    work = ctx.work
    return ctx.shared(
        "step_exposure", lambda: comm_exposure(work.lazy().filter(pl.col("step").is_not_null()))
    )
