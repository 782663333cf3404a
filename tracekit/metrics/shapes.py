"""The shapes a device row computed on, where the trace records them: Ascend operators carry
``input_shapes`` (``"m,k;k,n"``) on the device row itself; PyTorch-profiler traces recorded
with ``record_shapes`` carry ``input_dims`` (``[[m, k], [k, n]]``) on the host operator that
launched the kernel, reached through the External id that the kernel, its launch call and the
operator share (the kernel's own, else its launch call's)."""

from __future__ import annotations

import json
import re

import polars as pl

EXTERNAL_ID = r'"external_id":\s*(\d+)'
ASCEND_SHAPES = r'"input_shapes":\s*"([^"]*)"'


def _external_ids() -> pl.Expr:
    return pl.col("args").str.extract(EXTERNAL_ID).cast(pl.Int64)


def launching_op_dims(rows: pl.DataFrame, wanted: pl.DataFrame) -> pl.DataFrame:
    """For each device row of ``wanted`` (columns ``rank``, ``corr``, ``args``, in any
    order): ``op``, ``input_dims``, ``input_types`` and ``concrete_inputs`` (JSON texts) of
    the host operator that launched it and its External id ``op_ext``; null where the trace
    recorded no shapes. One output row per input row, in order."""
    texts = ("op", "input_dims", "input_types", "concrete_inputs")
    empty = wanted.with_columns(
        *(pl.lit(None, pl.String).alias(t) for t in texts), op_ext=pl.lit(None, pl.Int64)
    ).select(*texts, "op_ext")
    has_dims = pl.col("args").str.contains('"input_dims"', literal=True).fill_null(False)
    ops = rows.filter((pl.col("kind") == "op") & has_dims)
    if ops.height == 0 or wanted.height == 0:
        return empty
    ops = ops.select(
        "rank",
        _ext=_external_ids(),
        op=pl.col("name").cast(pl.String),
        input_dims=pl.col("args").str.json_path_match("$.input_dims"),
        input_types=pl.col("args").str.json_path_match("$.input_types"),
        concrete_inputs=pl.col("args").str.json_path_match("$.concrete_inputs"),
    ).unique(["rank", "_ext"], keep="first")
    calls = rows.filter((pl.col("kind") == "api") & pl.col("corr").is_not_null()).select(
        "rank", "corr", _call_ext=_external_ids()
    )
    calls = calls.filter(pl.col("_call_ext").is_not_null()).unique(["rank", "corr"])
    found = (
        wanted.select("rank", "corr", _own=_external_ids())
        .join(calls, on=["rank", "corr"], how="left", maintain_order="left")
        .with_columns(_ext=pl.coalesce("_own", "_call_ext"))
        .join(ops, on=["rank", "_ext"], how="left", maintain_order="left")
    )
    ext = pl.when(pl.col("op").is_not_null()).then("_ext")
    return found.select(*texts, op_ext=ext)


# PyTorch operators whose first input is the bias added to the product (addmm(bias, mat1,
# mat2), baddbmm, addbmm, addmv): their matrix is the second input, whatever the bias's rank
_BIAS_FIRST = re.compile(r"^aten::(addmm|baddbmm|addbmm|addmv)")


def matmul_shape(
    input_shapes: str | None, input_dims: str | None, op: str | None = None
) -> tuple[int, int] | None:
    """(rows m, inner k) of a GEMM: its first input of two or more dimensions, m the product
    of all but the last, k the last. From Ascend ``input_shapes`` (``"b,s,k;k,n"``) or a
    PyTorch operator's ``input_dims`` JSON; for ``op`` ``aten::addmm`` and its kin the bias
    (first input, of any rank) is skipped. None where neither says."""
    inputs: list[list[int]] = []
    if input_shapes:
        try:
            inputs = [
                [int(d) for d in part.split(",") if d.strip()] for part in input_shapes.split(";")
            ]
        except ValueError:
            inputs = []
    elif input_dims:
        try:
            decoded = json.loads(input_dims)
        except ValueError:
            decoded = []
        if op and _BIAS_FIRST.match(op):
            decoded = decoded[1:]
        inputs = [d for d in decoded if isinstance(d, list) and all(isinstance(x, int) for x in d)]
    first = next((dims for dims in inputs if len(dims) >= 2), None)
    if first is None:
        return None
    rows = 1
    for d in first[:-1]:
        rows *= d
    return rows, first[-1]
