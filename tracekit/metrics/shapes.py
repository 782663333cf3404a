"""The shapes a device row computed on, where the trace records them: Ascend operators carry
``input_shapes`` (``"m,k;k,n"``) on the device row itself; PyTorch-profiler traces recorded
with ``record_shapes`` carry ``input_dims`` (``[[m, k], [k, n]]``) on the host operator that
launched the kernel, reached through the External id that the kernel, its launch call and the
operator share (the kernel's own, else its launch call's)."""

from __future__ import annotations

import json
import re

import polars as pl

# the Kineto parser writes an External id first in a row's args: anchored, a row without one
# fails at its first characters instead of being scanned to its end
EXTERNAL_ID = r'^\{"external_id":(\d+)'
PREFIX = '{"external_id":'
ASCEND_SHAPES = r'"input_shapes":\s*"([^"]*)"'


def _external_ids() -> pl.Expr:
    return pl.col("args").str.extract(EXTERNAL_ID).cast(pl.Int64)


def _ranked(ids: pl.Expr) -> pl.Expr:
    """An id made unique across ranks, as one integer (single-column joins are the fast
    ones): the rank above bit 44, the id (a correlation or External id) below it."""
    return pl.col("rank").fill_null(-1).cast(pl.Int64) * 2**44 + ids


INPUT_TEXTS = ("input_dims", "input_types", "concrete_inputs")
SHAPES_SCHEMA = {"shape_id": pl.UInt32, **dict.fromkeys(INPUT_TEXTS, pl.String)}


def launching_ops(rows: pl.DataFrame, wanted: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """For each device row of ``wanted`` (columns ``rank``, ``corr``, ``args``, in any
    order): ``op``, the name of the host operator that launched it, ``op_key`` (that
    operator's rank, process and External id as one integer) and ``shape_id``, the row of the
    second frame that holds its inputs' ``input_dims``, ``input_types`` and
    ``concrete_inputs`` (JSON texts); nulls where the
    trace recorded no shapes. The first frame has one row per input row, in order; the second
    one row per distinct inputs (a few hundred where operators number millions: the JSON is
    read once per distinct text, not per operator)."""
    empty = wanted.with_columns(
        op=pl.lit(None, pl.String).cast(pl.Categorical),
        op_key=pl.lit(None, pl.UInt64),
        shape_id=pl.lit(None, pl.UInt32),
    ).select("op", "op_key", "shape_id")
    # args '{"external_id":N,"input_dims":…': the id before the inputs, read without a regex;
    # the text from "input_dims" on is the same for every call with the same inputs
    find = pl.col("args").str.find('"input_dims"', literal=True)
    ops = rows.filter(pl.col("kind") == "op").select("rank", "pid", "name", "args", _at=find)
    ops = ops.filter(pl.col("_at").is_not_null())
    if ops.height == 0 or wanted.height == 0:
        return empty, pl.DataFrame(schema=SHAPES_SCHEMA)
    at, args = pl.col("_at"), pl.col("args")
    ext = args.str.slice(len(PREFIX), at - len(PREFIX) - 1).str.to_integer(strict=False)
    ops = ops.with_columns(
        _ext=pl.when(args.str.starts_with(PREFIX)).then(ext),
        _hash=args.str.slice(at).hash(),  # distinct inputs by a 64-bit hash of their text
    )
    firsts = ops.unique("_hash", keep="first", maintain_order=True)
    firsts = firsts.select("_hash", _inputs=args.str.slice(at))
    as_json = pl.concat_str(pl.lit("{"), "_inputs")
    shapes = firsts.with_row_index("shape_id").select(
        "shape_id", "_hash", *(as_json.str.json_path_match(f"$.{k}").alias(k) for k in INPUT_TEXTS)
    )
    ops = ops.select(
        "_ext",
        "_hash",
        _key=_operator(pl.col("pid"), pl.col("_ext")),
        op="name",  # categorical: cheap codes
    ).join(shapes.select("_hash", "shape_id"), on="_hash")
    # a runtime call's args hold its External id alone: read without a regex
    call_ext = pl.col("args").str.strip_prefix(PREFIX).str.strip_suffix("}")
    calls = rows.filter((pl.col("kind") == "api") & pl.col("corr").is_not_null()).select(
        _corr=_ranked(pl.col("corr")),
        _call_ext=call_ext.str.to_integer(strict=False),
        _pid=pl.col("pid").cast(pl.Int64),
    )
    calls = calls.filter(pl.col("_call_ext").is_not_null())
    # a kernel's own External id where the trace writes one (newer Kineto), else its call's
    has_own = wanted["args"].str.starts_with(PREFIX).any()
    own = _external_ids() if has_own else pl.lit(None, pl.Int64)
    keyed = wanted.select("rank", _corr=_ranked(pl.col("corr")), _own=own)
    found = _linked(keyed, calls, ops)
    if found.height != keyed.height:  # ids repeated (processes whose ids collide): first wins
        calls = calls.unique("_corr", keep="first", maintain_order=True)
        found = _linked(keyed, calls, ops.unique("_key", keep="first", maintain_order=True))
    # the operator instance: its process and External id, one integer
    instance = pl.when(pl.col("op").is_not_null()).then("_key")
    return found.select("op", op_key=instance, shape_id="shape_id"), shapes.drop("_hash")


def _operator(pid: pl.Expr, ext: pl.Expr) -> pl.Expr:
    """An operator's key: its rank, process and External id hashed to one integer (External
    ids count per process: two processes of one rank may use the same)."""
    return pl.struct(pl.col("rank").cast(pl.Int64), pid.cast(pl.Int64), ext.cast(pl.Int64)).hash()


def _linked(keyed: pl.DataFrame, calls: pl.DataFrame, ops: pl.DataFrame) -> pl.DataFrame:
    """Each device row's launch call (by correlation id), then the operator of the row's
    own External id or else its call's."""
    return (
        keyed.join(calls, on="_corr", how="left", maintain_order="left")
        .with_columns(_key=_operator(pl.col("_pid"), pl.coalesce("_own", "_call_ext")))
        .join(ops, on="_key", how="left", maintain_order="left")
    )


def launching_op_dims(rows: pl.DataFrame, wanted: pl.DataFrame) -> pl.DataFrame:
    """:func:`launching_ops` with the inputs' texts on every row: ``op``, ``input_dims``,
    ``input_types``, ``concrete_inputs`` and ``op_key``, one row per row of ``wanted``."""
    found, shapes = launching_ops(rows, wanted)
    found = found.join(shapes, on="shape_id", how="left", maintain_order="left")
    return found.select(pl.col("op").cast(pl.String), *INPUT_TEXTS, "op_key")


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
