"""Dense GEMM formulas: ``C[m,n] = A[m,k] @ B[k,n]`` costs ``2*m*n*k`` FLOPs (one multiply and
one add per term) and at least ``A + B + C`` bytes (each operand read once, the result written
once). A bias add (``addmm``, ``linear`` with bias, Ascend MatMul with a third input) adds
``m*n`` FLOPs and the bias's bytes: that is TraceLens's convention too (its
``GEMM.flops_func`` = ``2*M*N*K + M*N`` if bias), so the two tools' GEMM FLOPs compare 1:1.

Schemas: PyTorch ``aten/src/ATen/native/native_functions.yaml``; vLLM ``csrc/torch_bindings.cpp``
(``cutlass_scaled_mm``) and ``vllm/model_executor/layers/utils.py``
(``rocm_unquantized_gemm``); CANN aclnn docs (aclnnMatmul, aclnnAddmm, aclnnBatchMatMul,
aclnnQuantMatmulV3/V4, aclnnWeightQuantBatchMatmulV2)."""

from __future__ import annotations

import math

from tracekit.metrics.roofline.dtypes import from_code
from tracekit.metrics.roofline.formulas.base import (
    Shape,
    Shapes,
    Work,
    all_bytes,
    broadcast,
    dtype,
    input_bytes,
    math_dtype,
    nbytes,
    numel,
    scalar,
    shape,
)


def _work(
    s: Shapes,
    m: int,
    n: int,
    k: int,
    batch: int,
    in_bytes: float,
    out: float,
    math: str | None,
    bias: bool = False,
    note: str = "",
) -> Work | None:
    """A GEMM's Work: ``batch * (2mnk (+ mn with a bias))`` FLOPs, the given bytes."""
    if math is None or min(m, n, k, batch) <= 0:
        return None
    flops = batch * (2.0 * m * n * k + (m * n if bias else 0))
    return Work("gemm", flops, in_bytes + out, math, True, True, note)


def mm(s: Shapes) -> Work | None:
    """``aten::mm(self[m,k], mat2[k,n])``; out [m,n] in self's dtype."""
    a, b = shape(s, 0), shape(s, 1)
    if a is None or b is None or len(a) != 2 or len(b) != 2 or a[1] != b[0]:
        return None
    m, k, n = a[0], a[1], b[1]
    out = nbytes((m, n), dtype(s, 0)) or 0.0
    ins = input_bytes(s, 0) + input_bytes(s, 1)
    return _work(s, m, n, k, 1, ins, out, math_dtype(dtype(s, 0), dtype(s, 1)))


def addmm(s: Shapes) -> Work | None:
    """``aten::addmm(self=bias, mat1[m,k], mat2[k,n], beta, alpha)``: ``2mnk + mn`` FLOPs (the
    bias add, as TraceLens counts it; beta/alpha scalings are not counted by either tool);
    bytes = bias (its real shape, [n] or [m,n]) + A + B + out."""
    c, a, b = shape(s, 0), shape(s, 1), shape(s, 2)
    if a is None or b is None or len(a) != 2 or len(b) != 2 or a[1] != b[0]:
        return None
    m, k, n = a[0], a[1], b[1]
    out = nbytes((m, n), dtype(s, 1)) or 0.0
    ins = input_bytes(s, 0) + input_bytes(s, 1) + input_bytes(s, 2)
    math = math_dtype(dtype(s, 1), dtype(s, 2))
    return _work(s, m, n, k, 1, ins, out, math, bias=c is not None)


def bmm(s: Shapes) -> Work | None:
    """``aten::bmm(self[b,m,k], mat2[b,k,n])`` and ``aten::baddbmm(self, batch1, batch2)``
    (bias first; ``+ b*m*n`` FLOPs, as TraceLens)."""
    first = 1 if s.op.startswith("aten::baddbmm") else 0
    a, b = shape(s, first), shape(s, first + 1)
    if a is None or b is None or len(a) != 3 or len(b) != 3 or a[2] != b[1] or a[0] != b[0]:
        return None
    batch, m, k, n = a[0], a[1], a[2], b[2]
    out = nbytes((batch, m, n), dtype(s, first)) or 0.0
    ins = sum(input_bytes(s, i) for i in range(first + 2))
    math = math_dtype(dtype(s, first), dtype(s, first + 1))
    return _work(s, m, n, k, batch, ins, out, math, bias=first == 1 and shape(s, 0) is not None)


def linear(s: Shapes) -> Work | None:
    """``aten::linear(input[...,k], weight[n,k], bias[n]?)`` and vLLM's
    ``vllm::rocm_unquantized_gemm(x[...,k], weight[n,k], bias?)``: ``m = prod(input[:-1])``;
    with a bias ``+ m*n`` FLOPs (as ``addmm``, which linear calls)."""
    x, w = shape(s, 0), shape(s, 1)
    if x is None or w is None or len(x) < 1 or len(w) != 2 or x[-1] != w[1]:
        return None
    m, k, n = numel(x[:-1]), x[-1], w[0]
    out = nbytes((m, n), dtype(s, 0)) or 0.0
    bias = shape(s, 2) is not None
    ins = input_bytes(s, 0) + input_bytes(s, 1) + input_bytes(s, 2)
    return _work(s, m, n, k, 1, ins, out, math_dtype(dtype(s, 0), dtype(s, 1)), bias=bias)


def matmul(s: Shapes) -> Work | None:
    """``aten::matmul(a, b)`` with NumPy semantics: 1-D operands are a row / a column, 2-D
    ``b`` folds ``a``'s leading dims into m, N-D x N-D broadcasts the batch dims."""
    a, b = shape(s, 0), shape(s, 1)
    if not a or not b:
        return None
    a2: Shape = (1, a[0]) if len(a) == 1 else a
    b2: Shape = (b[0], 1) if len(b) == 1 else b
    if a2[-1] != b2[-2]:
        return None
    k, n = a2[-1], b2[-1]
    if len(b2) == 2:
        batch, m = 1, numel(a2[:-1])
    else:
        dims = broadcast(a2[:-2], b2[:-2])
        if dims is None:
            return None
        batch, m = numel(dims), a2[-2]
    out = nbytes((batch, m, n), dtype(s, 0)) or 0.0
    ins = input_bytes(s, 0) + input_bytes(s, 1)
    return _work(s, m, n, k, batch, ins, out, math_dtype(dtype(s, 0), dtype(s, 1)))


def scaled_mm(s: Shapes) -> Work | None:
    """``aten::_scaled_mm(self[m,k], mat2[k,n], scale_a, scale_b, bias?, scale_result?,
    out_dtype?, use_fast_accum)`` (FP8/FP4): ``2mnk`` (+ ``mn`` with a bias) FLOPs in the
    operands' dtype; bytes = A + B + both scales + bias + out. The output dtype is
    ``out_dtype`` from Concrete Inputs (a ScalarType code); absent, PyTorch's default is
    ``self``'s dtype (``out_dtype.value_or(mat1.scalar_type())``), which this follows rather
    than TraceLens's fp16 assumption."""
    a, b = shape(s, 0), shape(s, 1)
    if b is not None and len(b) == 2 and dtype(s, 1) == "fp4" and a and b[0] * 2 == a[-1]:
        # two fp4 values per byte are packed along K, mat2's first dimension; the parser
        # unpacked its last one (N) instead
        b = (b[0] * 2, b[1] // 2)
    if a is None or b is None or len(a) != 2 or len(b) != 2 or a[1] != b[0]:
        return None
    m, k, n = a[0], a[1], b[1]
    out_dt = from_code(scalar(s, 6)) or dtype(s, 0)
    out = nbytes((m, n), out_dt) or 0.0
    ins = sum(input_bytes(s, i) for i in range(6))
    bias = shape(s, 4) is not None
    math = math_dtype(dtype(s, 0), dtype(s, 1))
    return _work(s, m, n, k, 1, ins, out, math, bias=bias, note="scaled GEMM, scales counted")


def cutlass_scaled_mm(s: Shapes) -> Work | None:
    """vLLM ``_C::cutlass_scaled_mm(out[m,n]!, a[m,k], b[k,n], a_scales, b_scales, bias?)``
    (W8A8 FP8/INT8): ``2mnk`` (+ ``mn`` with a bias); bytes = a + b + scales + bias + out."""
    o, a, b = shape(s, 0), shape(s, 1), shape(s, 2)
    if o is None or a is None or b is None or len(a) != 2 or len(b) != 2:
        return None
    if a[1] != b[0] or o != (a[0], b[1]):
        return None
    m, k, n = a[0], a[1], b[1]
    ins = sum(input_bytes(s, i) for i in range(6))
    math = math_dtype(dtype(s, 1), dtype(s, 2))
    bias = shape(s, 5) is not None
    return _work(s, m, n, k, 1, ins, 0.0, math, bias=bias, note="scaled GEMM, scales counted")


def _ascend_k(a: Shape, m: int, n: int, b: Shape) -> int | None:
    """k of an Ascend GEMM whose output is [.., m, n]: the dim of A's last two that is not m
    (A may be transposed), checked against B's last two dims (B may be transposed too)."""
    if len(a) < 2 or len(b) < 2:
        return None
    if a[-2] == m:
        k = a[-1]
    elif a[-1] == m:
        k = a[-2]
    else:
        return None
    return k if (b[-2], b[-1]) in ((k, n), (n, k)) else None


def ascend_matmul(s: Shapes) -> Work | None:
    """Ascend ``MatMul``/``MatMulV2``/``MatMulV3``/``BatchMatMul``(``V2``/``V3``)
    (aclnnMm, aclnnMatmul, aclnnAddmm, aclnnBatchMatMul): inputs x1, x2, bias?; either operand
    may be stored transposed (``"32,9216;4096,9216;4096"`` -> ``"32,4096"`` is
    ``x[32,9216] @ W^T``), so m, n come from the OUTPUT shape and k is A's other dim, checked
    against B. batch = prod(out[:-2]). A bias (third input with dims) adds ``m*n`` per batch."""
    found = _ascend_mnk(s)
    if found is None:
        return None
    m, n, k, batch = found
    bias = bool(shape(s, 2))
    return _work(
        s, m, n, k, batch, all_bytes(s), 0.0, math_dtype(dtype(s, 0), dtype(s, 1)), bias=bias
    )


def _ascend_mnk(s: Shapes) -> tuple[int, int, int, int] | None:
    """(m, n, k, batch) of an Ascend matmul: m, n and the batch from its output, k the
    dimension of its first input that is not m, checked against the second input."""
    a, b = shape(s, 0), shape(s, 1)
    out = s.outputs[0] if s.outputs else None
    if a is None or b is None or not out or len(out) < 2:
        return None
    m, n = out[-2], out[-1]
    k = _ascend_k(a, m, n, b)
    return None if k is None else (m, n, k, numel(out[:-2]))


def ascend_quant_matmul(s: Shapes) -> Work | None:
    """Ascend ``QuantBatchMatmulV3/V4`` (x1 int8/fp8/fp4, x2, scale, offset?, bias?,
    pertoken_scale? …) and ``WeightQuantBatchMatmulV2`` (x bf16/fp16, weight int8/int4,
    antiquant_scale, antiquant_offset?, quant_scale?, quant_offset?, bias?): ``2mnk`` FLOPs
    (m, n from the output, k as for MatMul); bytes = every input (scales included, the weight
    at its own itemsize, int4 = 0.5) + the output. Math dtype: the wider operand (bf16 for
    weight-only quantisation, int8/fp8 for W8A8). A bias add is not counted (its position
    varies by version). An int4 weight packed as INT32 does not fit the check: None."""
    found = _ascend_mnk(s)
    if found is None:
        return None
    m, n, k, batch = found
    math = math_dtype(dtype(s, 0), dtype(s, 1))
    return _work(s, m, n, k, batch, all_bytes(s), 0.0, math, note="quantised GEMM")


def gemm_flops(m: int, n: int, k: int) -> float:
    """``2*m*n*k``: the FLOPs of one GEMM (exposed for tests and the grouped formulas)."""
    return 2.0 * math.prod((m, n, k))
