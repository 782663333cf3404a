"""Elementwise, memory, embedding and sampling formulas: bytes-bound work.

- Elementwise (``aten::add/sub/mul/div/pow/neg/exp/…``, Ascend Add/Mul/Muls/RealDiv/…):
  bytes = every tensor input once + the output of the broadcast shape in the promoted dtype
  (bool for comparisons); in-place forms (``add_``) write ``self``. 1 FLOP per output element.
- Memory (``copy_``, ``to``, ``_to_copy``, ``clone``, ``fill_``, ``cat``, Ascend Cast,
  TensorMove, TransData …): bytes = read + write, each at its own dtype (a cast reads the
  input's itemsize and writes the output's); 0 FLOPs.
- Embedding (``aten::embedding(weight[V,H], indices)``, ``index_select``, Ascend GatherV2):
  bytes = the gathered rows + indices + output; 0 FLOPs.
- Sampling (``argmax``, ``topk``, ``sort``, ``softmax``, ``log_softmax``, ``multinomial``;
  Ascend ArgMaxV2, TopKV2, SoftmaxV2 …): bytes = input + outputs; FLOPs about 5 per element for
  softmax (max, subtract, exp, sum, divide), 1 compare per element for argmax/topk,
  ``log2(n)`` per element for a sort.

Schemas: PyTorch ``native_functions.yaml``; CANN operator list (aclnnAdd, aclnnMul, aclnnCast,
aclnnEmbedding/GatherV2, aclnnArgMax, aclnnTopk, aclnnSoftmax)."""

from __future__ import annotations

import math

from tracekit.metrics.roofline.dtypes import from_code
from tracekit.metrics.roofline.formulas.base import (
    Shapes,
    Work,
    all_bytes,
    broadcast,
    dtype,
    input_bytes,
    nbytes,
    numel,
    promote,
    scalar_int,
    shape,
    tensors,
)

COMPARE = {"eq", "ne", "lt", "gt", "le", "ge", "logical_not", "logical_and", "logical_or",
           "isnan", "isinf"}  # fmt: skip
ELEMENTWISE = {
    "add", "sub", "rsub", "mul", "div", "pow", "neg", "exp", "log", "sqrt", "rsqrt", "sin",
    "cos", "tanh", "sigmoid", "abs", "reciprocal", "clamp", "clamp_min", "clamp_max", "where",
    "maximum", "minimum", "relu", "masked_fill", "bitwise_and", "bitwise_or", "bitwise_not",
    "square", "erf", "exp2", "log1p", "sign", "floor", "ceil", "round", "mean", "sum", "amax",
    "amin", "max", "min", "cumsum", "addcmul", "addcdiv", "lerp", *COMPARE,
}  # fmt: skip
REDUCE = {"mean", "sum", "amax", "amin", "max", "min"}


def _base(op: str) -> tuple[str, bool]:
    """(``add`` of ``aten::add_``, in place?)."""
    name = op.split("::", 1)[-1]
    return (name[:-1], True) if name.endswith("_") and not name.endswith("__") else (name, False)


def elementwise(s: Shapes) -> Work | None:
    """A PyTorch elementwise or reduction op (see the module doc). Reductions (``mean``,
    ``sum`` …) write a small output: its bytes are bounded by the input's and counted as the
    rows left (input numel / last dim when a dim is given, else 1)."""
    name, inplace = _base(s.op)
    idx = [i for i in tensors(s)]
    if not idx:
        return None
    shapes = [shape(s, i) for i in idx]
    dts = [dtype(s, i) for i in idx]
    if any(d is None for d in dts):
        return None
    ins = sum(input_bytes(s, i) for i in idx)
    if name in REDUCE:
        x = shapes[0]
        assert x is not None
        rows = numel(x) // x[-1] if x and x[-1] and len(s.scalars) > 1 and s.scalars[1] else 1
        out_dt = dts[0]
        return Work("elementwise", float(numel(x)), ins + (nbytes((rows,), out_dt) or 0), out_dt
                    or "", False)  # fmt: skip
    out = broadcast(*[x for x in shapes if x is not None])
    if out is None:
        return None
    # dimensioned tensors decide the result dtype over 0-d ones (PyTorch's promotion rule)
    ranked = [d for x, d in zip(shapes, dts) if x and d] or [d for d in dts if d]
    out_dt = "bool" if name in COMPARE else promote(ranked)
    if inplace:
        out, out_dt = shapes[0], dts[0]
    assert out is not None and out_dt is not None
    total = ins + (nbytes(out, out_dt) or 0.0)
    math_dt = promote(ranked) or out_dt
    return Work("elementwise", float(numel(out)), total, math_dt, False)


def copy(s: Shapes) -> Work | None:
    """``aten::copy_(self, src, non_blocking)``: reads src, writes self (each at its dtype);
    ``aten::clone(self)`` / ``contiguous``: read + write; ``aten::to`` / ``_to_copy(self,
    dtype, …)``: reads self, writes it in ``dtype`` (the ScalarType code in Concrete Inputs;
    absent: self's dtype); ``fill_`` / ``zero_``: writes self."""
    name, _ = _base(s.op)
    x, dt = shape(s, 0), dtype(s, 0)
    if x is None or dt is None:
        return None
    if name == "copy":
        src = shape(s, 1)
        if src is None:
            return None
        total = input_bytes(s, 0) + input_bytes(s, 1)
    elif name in ("fill", "zero"):
        total = input_bytes(s, 0)
    elif name in ("to", "_to_copy"):
        out_dt = from_code(s.scalars[1] if len(s.scalars) > 1 else "") or dt
        total = input_bytes(s, 0) + (nbytes(x, out_dt) or 0.0)
    else:
        total = 2 * input_bytes(s, 0)
    return Work("memory", 0.0, total, dt, False)


def cat(s: Shapes) -> Work | None:
    """``aten::cat(tensors, dim)``: reads every listed tensor and writes them once more; the
    list's dtype is not in the trace ("TensorList"): the output dtype must come from a tensor
    input, else None."""
    listed = s.lists[0] if s.lists else None
    dt = next((d for d in s.dtypes if d), None)
    if not listed or dt is None:
        return None
    size = sum(numel(x) for x in listed)
    return Work("memory", 0.0, 2 * (nbytes((size,), dt) or 0.0), dt, False)


def embedding(s: Shapes) -> Work | None:
    """``aten::embedding(weight[V,H], indices[...], …)``: rows gathered = indices numel,
    bytes = rows*H (read) + indices + output [..., H] (write); ``aten::index_select(self, dim,
    index)`` along dim 0 of a 2-D table the same."""
    if s.op == "aten::index_select":
        w, idx_at = shape(s, 0), 2
        if scalar_int(s, 1) != 0:
            return None
    else:
        w, idx_at = shape(s, 0), 1
    ids, dt = shape(s, idx_at), dtype(s, 0)
    if w is None or ids is None or dt is None or len(w) != 2:
        return None
    rows = nbytes((numel(ids), w[1]), dt) or 0.0
    return Work("embedding", 0.0, 2 * rows + input_bytes(s, idx_at), dt, False)


def sampling(s: Shapes) -> Work | None:
    """``aten::argmax(self, dim?, keepdim)``, ``topk(self, k, dim, …)``, ``sort(self, …)``,
    ``softmax`` / ``_softmax`` / ``log_softmax`` / ``_log_softmax``, ``multinomial(self,
    num_samples, …)``: read self; write the outputs (argmax: int64 per row when a dim is
    given; topk: k values + int64 indices per row; sort: values + int64 indices; softmax:
    self's size in self's dtype, fp32 when half_to_float; multinomial: int64 per sample)."""
    name = s.op.split("::", 1)[-1].lstrip("_")
    x, dt = shape(s, 0), dtype(s, 0)
    if not x or dt is None:
        return None
    n, width = numel(x), x[-1]
    rows = n // max(width, 1)
    read = input_bytes(s, 0)
    if name == "argmax":
        dim = scalar_int(s, 1)
        out, flops = (8.0 * (rows if dim is not None else 1)), float(n)
    elif name == "topk":
        k = scalar_int(s, 1)
        if k is None:
            return None
        out, flops = rows * k * ((nbytes((1,), dt) or 0.0) + 8.0), float(n)
    elif name == "sort":
        out, flops = (nbytes(x, dt) or 0.0) + 8.0 * n, n * math.log2(max(width, 2))
    elif name in ("softmax", "log_softmax"):
        half = s.scalars[2].strip() == "True" if len(s.scalars) > 2 else False
        out, flops = nbytes(x, "fp32" if half else dt) or 0.0, 5.0 * n
    elif name == "multinomial":
        k = scalar_int(s, 1)
        if k is None:
            return None
        out, flops = 8.0 * rows * k, float(n)
    else:
        return None
    return Work("sampling", flops, read + out, dt, False)


ASCEND_MEMORY = {
    "Cast", "TensorMove", "TransData", "Fill", "ZerosLike", "OnesLike", "BroadcastTo",
    "Transpose", "Slice", "StridedSlice", "StridedSliceD", "ConcatD", "Concat", "ConcatV2",
    "AsStrided", "Identity", "ViewCopy", "Tile", "ExpandD", "Expand", "MemSet",
}  # fmt: skip
ASCEND_ELEMENTWISE = {
    "Add", "AddV2", "Adds", "Sub", "Mul", "Muls", "RealDiv", "Div", "Divs", "Neg", "Exp",
    "Log", "Sqrt", "Rsqrt", "Square", "Pow", "Maximum", "Minimum", "Relu", "Sigmoid", "Tanh",
    "Equal", "NotEqual", "Less", "LessEqual", "Greater", "GreaterEqual", "LogicalNot",
    "LogicalAnd", "LogicalOr", "Abs", "Reciprocal", "Sin", "Cos", "SelectV2", "Select",
    "ReduceSum", "ReduceSumD", "ReduceMean", "ReduceMeanD", "ReduceMax", "ReduceMaxD",
    "MaskedFill", "ClipByValue", "Tril", "Triu", "Axpy", "AxpyV2",
}  # fmt: skip
ASCEND_SAMPLING = {"ArgMaxV2", "ArgMaxWithValue", "ArgMaxD", "TopKV2", "TopK", "TopKD",
                   "SoftmaxV2", "LogSoftmaxV2", "Sort", "SortV2", "Multinomial"}  # fmt: skip


def ascend_generic(s: Shapes) -> Work | None:
    """Ascend elementwise / memory / sampling ops: bytes = every input and output tensor
    once (an empty "" entry = absent); FLOPs: 1 per element of the largest output for
    elementwise (of the input for reductions), 0 for memory, 5 per input element for
    softmax, 1 for the others (compares)."""
    sizes = [numel(o) for o in s.outputs if o is not None]
    x = shape(s, 0)
    dt = dtype(s, 0) or next((d for d in s.out_dtypes if d), None)
    if dt is None or (x is None and not sizes):
        return None
    total = all_bytes(s)
    n_in = numel(x) if x else 0
    if s.op in ASCEND_MEMORY:
        return Work("memory", 0.0, total, dt, False)
    if s.op in ASCEND_SAMPLING:
        per = 5.0 if "Softmax" in s.op else 1.0
        return Work("sampling", per * n_in, total, dt, False)
    n = max([*sizes, n_in if s.op.startswith("Reduce") else 0, 0])
    return Work("elementwise", float(n), total, dt, False)


def ascend_gather(s: Shapes) -> Work | None:
    """Ascend ``GatherV2(x[V,H], indices, axis)`` / ``Gather`` / ``Embedding``: the output
    [..., H] is the rows read; bytes = output (read) + indices + output (write)."""
    x, ids = shape(s, 0), shape(s, 1)
    out = s.outputs[0] if s.outputs else None
    dt = dtype(s, 0)
    if not x or ids is None or not out or dt is None:
        return None
    rows = nbytes(out, (s.out_dtypes[0] if s.out_dtypes else None) or dt) or 0.0
    return Work("embedding", 0.0, 2 * rows + input_bytes(s, 1), dt, False)
