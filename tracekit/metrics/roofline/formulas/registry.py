"""Which formula applies to which operator: exact names first, then regular expressions, per
source ("torch": Kineto operator names; "ascend": op types). :func:`work_of` is the one entry:
None where no formula applies or the shapes do not fit it (never a guess)."""

from __future__ import annotations

import re
from collections.abc import Callable

from tracekit.metrics.roofline.formulas import attention, elementwise, gemm, moe, norms
from tracekit.metrics.roofline.formulas.base import Shapes, Work

Formula = Callable[[Shapes], "Work | None"]

TORCH: dict[str, Formula] = {
    "aten::mm": gemm.mm,
    "aten::addmm": gemm.addmm,
    "aten::bmm": gemm.bmm,
    "aten::baddbmm": gemm.bmm,
    "aten::linear": gemm.linear,
    "aten::matmul": gemm.matmul,
    "aten::_scaled_mm": gemm.scaled_mm,
    "_C::cutlass_scaled_mm": gemm.cutlass_scaled_mm,
    "vllm::rocm_unquantized_gemm": gemm.linear,
    "vllm::rocm_unquantized_gemm_impl": gemm.linear,
    "aten::_grouped_mm": moe.grouped_mm,
    "aten::_scaled_grouped_mm": moe.grouped_mm,
    **{op: attention.sdpa for op in attention._DENSE},
    "flash_attn::_flash_attn_varlen_forward": attention.varlen,
    "_vllm_fa2_C::varlen_fwd": attention.varlen,
    "_vllm_fa3_C::fwd": attention.varlen,
    "_C::paged_attention_v1": attention.paged_attention,
    "_C::paged_attention_v2": attention.paged_attention,
    "_flashmla_C::fwd_kvcache_mla": attention.flashmla,
    "aten::layer_norm": norms.layer_norm,
    "aten::native_layer_norm": norms.layer_norm,
    "aten::silu": norms.unary_activation,
    "aten::silu_": norms.unary_activation,
    "aten::gelu": norms.unary_activation,
    "aten::gelu_": norms.unary_activation,
    "aten::embedding": elementwise.embedding,
    "aten::index_select": elementwise.embedding,
    "aten::cat": elementwise.cat,
}
TORCH_PATTERNS: list[tuple[re.Pattern[str], Formula]] = [
    (re.compile(r"^(vllm|sglang)::(inplace_|outplace_)?fused_experts(_impl)?$"),
     moe.fused_experts),
    (re.compile(r"::(silu_and_mul|swiglu)$"), norms.silu_and_mul),
    (re.compile(r"::gelu(_tanh)?_and_mul$"), norms.gelu_and_mul),
    (re.compile(r"^aten::(_fused_)?rms_norm$|^[\w.]+::(\w*_)?rms_?norm(2d)?(_fwd)?(_with_add)?"
                r"(_static_fp8_quant|_dynamic_per_token_quant)?$"), norms.rms_norm),
    (re.compile(r"^aten::(copy|fill|zero|clone|contiguous|to|_to_copy)_?$"), elementwise.copy),
    (re.compile(r"^aten::_?(argmax|topk|sort|softmax|log_softmax|multinomial)$"),
     elementwise.sampling),
    (re.compile(r"^aten::(" + "|".join(sorted(elementwise.ELEMENTWISE)) + r")_?$"),
     elementwise.elementwise),
]  # fmt: skip

ASCEND: dict[str, Formula] = {
    **{op: norms.ascend_norm for op in norms._ASCEND_NORM},
    **{op: norms.ascend_activation for op in norms._ASCEND_ACT},
    **{op: attention.ascend_attention for op in (
        "FlashAttentionScore", "PromptFlashAttention", "IncreFlashAttention",
        "FusedInferAttentionScore")},
    **{op: elementwise.ascend_generic for op in (
        elementwise.ASCEND_MEMORY | elementwise.ASCEND_ELEMENTWISE | elementwise.ASCEND_SAMPLING)},
    "GatherV2": elementwise.ascend_gather,
    "Gather": elementwise.ascend_gather,
    "Embedding": elementwise.ascend_gather,
}  # fmt: skip
ASCEND_PATTERNS: list[tuple[re.Pattern[str], Formula]] = [
    (re.compile(r"^(Batch)?MatMul(V\d)?$"), gemm.ascend_matmul),
    (re.compile(r"^(QuantBatchMatmul|WeightQuantBatchMatmul)(V\d)?$"), gemm.ascend_quant_matmul),
    (re.compile(r"^GroupedMatmul(V\d)?$"), moe.ascend_grouped_matmul),
]


def formula_for(shapes: Shapes) -> Formula | None:
    """The formula that applies to ``shapes``' operator; None when there is none."""
    table, patterns = (ASCEND, ASCEND_PATTERNS) if shapes.source == "ascend" else (
        TORCH, TORCH_PATTERNS)  # fmt: skip
    found = table.get(shapes.op)
    if found is not None:
        return found
    for pattern, formula in patterns:
        if pattern.search(shapes.op):
            return formula
    return None


def work_of_strict(shapes: Shapes) -> Work | None:
    """As :func:`work_of`, but a formula's error on odd shapes propagates (for tests)."""
    formula = formula_for(shapes)
    return formula(shapes) if formula is not None else None


def work_of(shapes: Shapes) -> Work | None:
    """The :class:`Work` of one operator from its shapes; None where no formula applies or the
    shapes do not fit it (odd ranks, an unknown dtype, a missing tensor): never a guess."""
    try:
        return work_of_strict(shapes)
    except (IndexError, ValueError, TypeError, KeyError, ZeroDivisionError, AssertionError):
        return None
