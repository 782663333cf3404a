"""Grouped (MoE) GEMM formulas. T token rows split over G experts: ``2*T*k*n`` FLOPs
whatever the split (every row meets exactly one expert's [k,n] weight). Bytes: the tokens,
every expert's weight and the output; an expert that got no tokens need not be read, so the
weight bytes are an upper bound and ``exact`` is False.

Schemas: PyTorch ``native_functions.yaml`` (``_grouped_mm(Tensor self, Tensor mat2, Tensor?
offs, Tensor? bias, ScalarType? out_dtype)``, ``_scaled_grouped_mm(self, mat2, scale_a,
scale_b, offs?, bias?, scale_result?, out_dtype?, use_fast_accum)``, default out dtype bf16);
vLLM / SGLang ``fused_moe.py`` (``inplace_fused_experts`` / ``outplace_fused_experts`` /
``fused_experts(hidden_states[T,H], w1[E,N,H], w2[E,H,I], topk_weights[T,K],
topk_ids[T,K], …)``); CANN aclnnGroupedMatmul (V1–V5: x, weight, bias, scale, offset,
antiquant_scale, antiquant_offset, group_list)."""

from __future__ import annotations

from tracekit.metrics.roofline.dtypes import from_code
from tracekit.metrics.roofline.formulas.base import (
    Shapes,
    Work,
    all_bytes,
    dtype,
    input_bytes,
    math_dtype,
    nbytes,
    numel,
    scalar,
    shape,
)

_UPPER = "weights of all experts counted: experts without tokens need not be read"


def grouped_mm(s: Shapes) -> Work | None:
    """``aten::_grouped_mm`` / ``aten::_scaled_grouped_mm``. ``mat_a[T,k] @ mat_b[G,k,n]``
    (tokens grouped by ``offs``): ``2*T*k*n`` FLOPs, bytes = A + all G weights + out (+ scales,
    offs), ``exact`` False. ``[G,m,k] @ [G,k,n]`` is a plain batched GEMM (exact); ``[m,K] @
    [K,n]`` with offs (the weight-gradient form) writes [G,m,n]. Other forms: None."""
    scaled = s.op.startswith("aten::_scaled_grouped_mm")
    a, b = shape(s, 0), shape(s, 1)
    if a is None or b is None:
        return None
    out_dt = from_code(scalar(s, 7 if scaled else 4)) or ("bf16" if scaled else dtype(s, 0))
    math = math_dtype(dtype(s, 0), dtype(s, 1))
    ins = sum(input_bytes(s, i) for i in range(6 if scaled else 4))
    exact, note = True, ""
    if len(a) == 2 and len(b) == 3 and a[1] == b[1]:
        flops, out, exact, note = 2.0 * a[0] * a[1] * b[2], (a[0], b[2]), False, _UPPER
    elif len(a) == 3 and len(b) == 3 and a[0] == b[0] and a[2] == b[1]:
        flops, out = 2.0 * a[0] * a[1] * a[2] * b[2], (a[0], a[1], b[2])
    elif len(a) == 2 and len(b) == 2 and a[1] == b[0] and shape(s, 4 if scaled else 2):
        groups = numel(shape(s, 4 if scaled else 2) or ())
        flops, out = 2.0 * a[0] * a[1] * b[1], (groups, a[0], b[1])
    else:
        return None
    if math is None or out_dt is None:
        return None
    total = ins + (nbytes(out, out_dt) or 0.0)
    return Work("grouped_gemm", flops, total, math, True, exact, note)


def fused_experts(s: Shapes) -> Work | None:
    """vLLM / SGLang fused MoE (``*::inplace_fused_experts``, ``outplace_fused_experts``,
    ``fused_experts``): hidden[T,H], w1[E,N,H] (N = 2I gated, I otherwise), w2[E,H,I],
    topk_weights/topk_ids[T,K]. Two grouped GEMMs over the T*K routed rows:
    ``2*T*K*N*H + 2*T*K*H*I`` FLOPs. Bytes: hidden + top-k tensors + output [T,H] + the
    weights of at most ``min(E, T*K)`` experts (an upper bound: ``exact`` False); the
    intermediate [T*K,N] activations are not counted (a fused kernel may keep them on chip).
    Math dtype: fp8 weights mean W8A8 (activations quantised inside); int8/int4 weights are
    counted in the activations' dtype (weight-only quantisation). Packed weights whose dims do
    not match H: None."""
    x, w1, w2, _tw, ti = (shape(s, i) for i in range(5))
    if x is None or w1 is None or w2 is None or ti is None or len(x) != 2 or len(ti) != 2:
        return None
    if len(w1) != 3 or len(w2) != 3 or w1[0] != w2[0] or w1[2] != x[1] or w2[1] != x[1]:
        return None
    t, h = x
    e, n, i = w1[0], w1[1], w2[2]
    if n not in (i, 2 * i) or ti[0] != t:
        return None
    routed = t * ti[1]
    flops = 2.0 * routed * n * h + 2.0 * routed * h * i
    wdt, xdt = dtype(s, 1), dtype(s, 0)
    math = "fp8" if wdt == "fp8" else xdt
    if math is None or wdt is None:
        return None
    experts = min(e, routed)
    weights = experts * ((nbytes(w1[1:], wdt) or 0.0) + (nbytes(w2[1:], wdt) or 0.0))
    io = input_bytes(s, 0) * 2 + input_bytes(s, 3) + input_bytes(s, 4)
    return Work("grouped_gemm", flops, io + weights, math, True, False, _UPPER)


def ascend_grouped_matmul(s: Shapes) -> Work | None:
    """Ascend ``GroupedMatmul`` (aclnnGroupedMatmul V1–V5): x[T,k], weight[E,k,n] or [E,n,k]
    (``"512,16;8,2048,16;;;;;;8"`` -> ``"512,2048"``), optional bias/scales, group_list[E];
    output [T,n]. ``2*T*k*n`` FLOPs; bytes = every input (all E weights) + output, an upper
    bound (``exact`` False). Split-tensor forms (several x / weight tensors): None."""
    x, w = shape(s, 0), shape(s, 1)
    out = s.outputs[0] if s.outputs else None
    if x is None or w is None or not out or len(x) != 2 or len(w) != 3 or len(out) != 2:
        return None
    t, k = x
    n = out[1]
    if out[0] != t or (w[1], w[2]) not in ((k, n), (n, k)):
        return None
    math = math_dtype(dtype(s, 0), dtype(s, 1))
    if math is None:
        return None
    return Work("grouped_gemm", 2.0 * t * k * n, all_bytes(s), math, True, False, _UPPER)
