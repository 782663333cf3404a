"""Roofline formulas: FLOPs and minimum bytes per operator family, checked against numbers
computed by hand (written out below), on the texts Kineto and torch_npu write."""

from __future__ import annotations

import json

import pytest

from tracekit.metrics.roofline.formulas.attention import causal_pairs
from tracekit.metrics.roofline.formulas.base import Work
from tracekit.metrics.roofline.formulas.inputs import ascend_shapes, torch_shapes
from tracekit.metrics.roofline.formulas.registry import work_of, work_of_strict

BF = "c10::BFloat16"
F8 = "c10::Float8_e4m3fn"


def torch_work(op: str, dims: list, types: list, concrete: list | None = None) -> Work | None:
    """work_of of a Kineto operator given as Python lists (serialised as the trace does)."""
    shapes = torch_shapes(op, json.dumps(dims), json.dumps(types), json.dumps(concrete or []))
    assert shapes is not None
    return work_of_strict(shapes)


def npu_work(op: str, ins: str, in_dt: str, outs: str, out_dt: str) -> Work | None:
    """work_of of a torch_npu kernel_details row (texts quoted as in the CSV)."""
    shapes = ascend_shapes(op, f'"{ins}"', in_dt, f'"{outs}"', out_dt)
    assert shapes is not None
    return work_of_strict(shapes)


def test_bf16_gemm_without_bias() -> None:
    w = torch_work("aten::mm", [[64, 7168], [7168, 2048]], [BF, BF])
    assert w is not None and (w.family, w.dtype, w.matrix, w.exact) == ("gemm", "bf16", True, True)
    assert w.flops == 2 * 64 * 7168 * 2048
    assert w.bytes == (64 * 7168 + 7168 * 2048 + 64 * 2048) * 2
    # aten::matmul folding the leading dims of a 3-D input, as in the Qwen trace
    mm = torch_work("aten::matmul", [[16, 559, 1024], [1024, 2816]], [BF, BF])
    assert mm is not None and mm.flops == 2 * 8944 * 1024 * 2816


def test_bf16_gemm_with_bias_counts_the_bias_add_like_tracelens() -> None:
    # the real addmm of the Qwen1.5 trace: bias [1024], mat1 [8944,1024], mat2 [1024,1024]
    w = torch_work(
        "aten::addmm",
        [[1024], [8944, 1024], [1024, 1024], [], []],
        [BF, BF, BF, "Scalar", "Scalar"],
        ["", "", "", "1", "1"],
    )
    assert w is not None and w.flops == 2 * 8944 * 1024 * 1024 + 8944 * 1024
    assert w.bytes == (1024 + 8944 * 1024 + 1024 * 1024 + 8944 * 1024) * 2
    lin = torch_work("aten::linear", [[16, 559, 1024], [1024, 1024], [1024]], [BF, BF, BF])
    assert lin is not None and (lin.flops, lin.bytes) == (w.flops, w.bytes)
    no_bias = torch_work("aten::linear", [[16, 559, 1024], [1024, 1024], []], [BF, BF, ""])
    assert no_bias is not None and no_bias.flops == 2 * 8944 * 1024 * 1024


def test_ascend_matmul_with_bias_and_transposed_operands() -> None:
    # real aclnnAddmm row: x[32,9216] @ W^T (W stored [4096,9216]) + bias[4096]
    w = npu_work("MatMulV2", "32,9216;4096,9216;4096", "FLOAT;FLOAT;FLOAT", "32,4096", "FLOAT")
    assert w is not None and w.dtype == "fp32"
    assert w.flops == 2 * 32 * 4096 * 9216 + 32 * 4096
    assert w.bytes == (32 * 9216 + 4096 * 9216 + 4096 + 32 * 4096) * 4
    # real aclnnMm row: A stored transposed, [32,4096] -> m = 4096, k = 32
    t = npu_work("MatMulV3", "32,4096;32,9216", "FLOAT;FLOAT", "4096,9216", "FLOAT")
    assert t is not None and t.flops == 2 * 4096 * 9216 * 32
    # bf16 without bias
    b = npu_work("MatMul", "4096,12288;4608,12288", "DT_BF16;DT_BF16", "4096,4608", "DT_BF16")
    assert b is not None and b.flops == 2 * 4096 * 4608 * 12288 and b.dtype == "bf16"
    assert b.bytes == (4096 * 12288 + 4608 * 12288 + 4096 * 4608) * 2
    # real msprof-analyze row whose B has no dim k = 81920: no formula fits, no guess
    assert (
        npu_work("MatMulV3", "81920,1536;8192,4096", "DT_BF16;DT_BF16", "1536,4096", "DT_BF16")
        is None
    )


def test_batched_gemm_torch_and_ascend() -> None:
    w = torch_work("aten::bmm", [[12, 1024, 512], [12, 512, 1024]], ["c10::Half", "c10::Half"])
    assert w is not None and w.flops == 12 * 2 * 1024 * 1024 * 512 and w.dtype == "fp16"
    assert w.bytes == (12 * 1024 * 512 * 2 + 12 * 1024 * 1024) * 2
    a = npu_work(
        "BatchMatMul", "12,1024,512;12,512,1024", "FLOAT16;FLOAT16", "12,1024,1024", "FLOAT16"
    )
    assert a is not None and (a.flops, a.bytes) == (w.flops, w.bytes)
    bad = npu_work(
        "BatchMatMul", "12,1024,512;12,500,1024", "FLOAT16;FLOAT16", "12,1024,1024", "FLOAT16"
    )
    assert bad is None


def test_fp8_gemm_with_scales() -> None:
    w = torch_work(
        "aten::_scaled_mm",
        [[64, 7168], [7168, 2048], [64, 1], [1, 2048], [], [], [], []],
        [F8, F8, "float", "float", "", "", "ScalarType", "Scalar"],
        ["", "", "", "", "", "", "15", "False"],
    )
    assert w is not None and w.dtype == "fp8" and w.matrix
    assert w.flops == 2 * 64 * 7168 * 2048
    # fp8 A and B (1 byte), fp32 scales, bf16 output (out_dtype code 15)
    assert w.bytes == 64 * 7168 + 7168 * 2048 + 64 * 4 + 2048 * 4 + 64 * 2048 * 2
    c = torch_work(
        "_C::cutlass_scaled_mm",
        [[64, 2048], [64, 7168], [7168, 2048], [64, 1], [1, 2048], [2048]],
        [BF, F8, F8, "float", "float", BF],
    )
    assert c is not None and c.flops == 2 * 64 * 7168 * 2048 + 64 * 2048
    assert c.bytes == 64 * 2048 * 2 + 64 * 7168 + 7168 * 2048 + 64 * 4 + 2048 * 4 + 2048 * 2
    q = npu_work(
        "QuantBatchMatmulV3", "64,7168;7168,2048;2048", "INT8;INT8;FLOAT", "64,2048", "BF16"
    )
    assert q is not None and q.dtype == "int8" and q.flops == 2 * 64 * 7168 * 2048
    assert q.bytes == 64 * 7168 + 7168 * 2048 + 2048 * 4 + 64 * 2048 * 2
    # weight-only int4: math in bf16, the weight at half a byte per value
    wq = npu_work(
        "WeightQuantBatchMatmulV2", "64,7168;7168,2048;2048", "BF16;INT4;BF16", "64,2048", "BF16"
    )
    assert wq is not None and wq.dtype == "bf16"
    assert wq.bytes == 64 * 7168 * 2 + 7168 * 2048 * 0.5 + 2048 * 2 + 64 * 2048 * 2


def test_grouped_moe_gemm() -> None:
    g = torch_work(
        "aten::_grouped_mm", [[256, 7168], [8, 7168, 2048], [8], [], []], [BF, BF, "int", "", ""]
    )
    assert g is not None and g.family == "grouped_gemm" and not g.exact
    assert g.flops == 2 * 256 * 7168 * 2048
    assert g.bytes == (256 * 7168 + 8 * 7168 * 2048 + 256 * 2048) * 2 + 8 * 4
    # vLLM fused MoE: T=4 tokens, top-8 of 64 experts, H=2048, I=768 (w1 gated: 2I)
    f = torch_work(
        "vllm::outplace_fused_experts",
        [[4, 2048], [64, 1536, 2048], [64, 2048, 768], [4, 8], [4, 8]],
        [BF, BF, BF, "float", "int"],
    )
    assert f is not None and f.family == "grouped_gemm" and not f.exact
    assert f.flops == 2 * 32 * 1536 * 2048 + 2 * 32 * 2048 * 768
    # 32 routed rows touch at most 32 of the 64 experts
    weights = 32 * (1536 * 2048 + 2048 * 768) * 2
    assert f.bytes == weights + 4 * 2048 * 2 * 2 + 4 * 8 * 4 + 4 * 8 * 4
    # the real vllm-ascend GroupedMatmul row: x[512,16], weight [8,2048,16] ([E,n,k])
    a = npu_work(
        "GroupedMatmul",
        "512,16;8,2048,16;;;;;;8",
        "DT_BF16;DT_BF16;FLOAT;UINT64;FLOAT;FLOAT16;FLOAT16;INT64",
        "512,2048",
        "DT_BF16",
    )
    assert a is not None and a.family == "grouped_gemm" and not a.exact
    assert a.flops == 2 * 512 * 16 * 2048
    assert a.bytes == 512 * 16 * 2 + 8 * 2048 * 16 * 2 + 8 * 8 + 512 * 2048 * 2


def test_causal_pairs() -> None:
    assert causal_pairs(559, 559, False) == causal_pairs(559, 559, True) == 559 * 560 // 2
    assert causal_pairs(4, 10, True) == 4 * 6 + 4 * 5 // 2  # bottom-right: 7+8+9+10
    assert causal_pairs(4, 10, False) == 1 + 2 + 3 + 4  # top-left
    assert causal_pairs(10, 4, False) == 1 + 2 + 3 + 4 * 7


def test_prefill_attention() -> None:
    # the real SDPA of the Qwen1.5 trace: q/k/v [16,16,559,64] bf16, is_causal True
    dims = [[16, 16, 559, 64]] * 3 + [[], [], [], [], []]
    types = [BF, BF, BF, "", "Scalar", "Scalar", "Scalar", "Scalar"]
    w = torch_work(
        "aten::scaled_dot_product_attention",
        dims,
        types,
        ["", "", "", "", "0.", "True", "0.125", "False"],
    )
    assert w is not None and w.family == "attention" and w.exact
    assert w.flops == 2 * 16 * 16 * (559 * 560 // 2) * (64 + 64)
    assert w.bytes == 4 * 16 * 16 * 559 * 64 * 2
    full = torch_work(
        "aten::scaled_dot_product_attention", dims, types, ["", "", "", "", "0.", "False", "", ""]
    )
    assert full is not None and full.flops == 4 * 16 * 16 * 559 * 559 * 64
    fa = torch_work(
        "aten::_flash_attention_forward",
        [[16, 559, 16, 64]] * 3 + [[]] * 12,
        [BF, BF, BF, "", "", "Scalar", "Scalar", "Scalar", "Scalar", "Scalar", "Scalar"] + [""] * 4,
        ["", "", "", "", "", "559", "559", "0.", "True", "False", "0.125", "", "", "", ""],
    )
    assert fa is not None and (fa.flops, fa.bytes) == (w.flops, w.bytes)
    # real FlashAttentionScore row (SBH: S=8192, B=2, H=640; mask [1,1,8192,8192])
    a = npu_work(
        "FlashAttentionScore",
        "8192,2,640;8192,2,640;8192,2,640;;83886112;;1,1,8192,8192",
        "DT_BF16;DT_BF16;DT_BF16;FLOAT;UINT8;FLOAT;DT_BF16",
        "655360;655360;;10485760",
        "FLOAT;FLOAT;DT_BF16;DT_BF16",
    )
    assert a is not None and a.flops == 4 * 2 * 8192 * 8192 * 640 and not a.exact
    qkv = 3 * 8192 * 2 * 640 * 2
    assert a.bytes == qkv + 83886112 + 8192 * 8192 * 2 + 2 * 655360 * 4 + 10485760 * 2


def test_decode_attention_with_a_paged_kv_cache() -> None:
    # vLLM paged_attention_v1: 8 sequences, 32 query heads, 8 KV heads, d=128, block 16,
    # block table [8,64] (capacity 1024 tokens), max_seq_len 1000
    dims = [[8, 32, 128], [8, 32, 128], [1000, 8, 16, 16, 8], [1000, 8, 128, 16], [], [],
            [8, 64], [8], [], [], []]  # fmt: skip
    types = [BF, BF, BF, BF, "Scalar", "Scalar", "int", "int", "Scalar", "Scalar", ""]
    concrete = ["", "", "", "", "8", "0.088", "", "", "16", "1000", ""]
    w = torch_work("_C::paged_attention_v1", dims, types, concrete)
    assert w is not None and w.family == "attention" and not w.exact
    assert w.flops == 4 * 8 * 32 * 1000 * 128
    block = 8 * 16 * 16 * 8 * 2  # one block of K (or V): 32,768 bytes
    blocks = 8 * 63  # ceil(1000 / 16) = 63 blocks per sequence at most
    assert w.bytes == 2 * 8 * 32 * 128 * 2 + 2 * blocks * block + 8 * 64 * 4 + 8 * 4
    # Ascend IncreFlashAttention, BSH q [8,1,4096], cache [1000 blocks,128,1024], table [8,32]
    a = npu_work(
        "IncreFlashAttention",
        "8,1,4096;1000,128,1024;1000,128,1024;;;;;;;;;;;8,32",
        "DT_BF16;DT_BF16;DT_BF16" + ";FLOAT" * 10 + ";INT32",
        "8,1,4096",
        "DT_BF16",
    )
    assert a is not None and not a.exact
    assert a.flops == 4 * 8 * 4096 * (32 * 128)
    kv = 2 * (8 * 32) * 128 * 1024 * 2
    assert a.bytes == 8 * 4096 * 2 + 8 * 32 * 4 + 8 * 4096 * 2 + kv


def test_rms_norm() -> None:
    w = torch_work("_C::rms_norm", [[64, 7168], [64, 7168], [7168], []], [BF, BF, BF, "double"])
    assert w is not None and w.family == "norm" and not w.matrix
    assert (w.flops, w.bytes) == (4 * 64 * 7168, 2 * 64 * 7168 * 2 + 7168 * 2)
    f = torch_work(
        "_C::fused_add_rms_norm", [[64, 7168], [64, 7168], [7168], []], [BF, BF, BF, "double"]
    )
    assert f is not None and (f.flops, f.bytes) == (5 * 64 * 7168, 4 * 64 * 7168 * 2 + 7168 * 2)
    t = torch_work("aten::rms_norm", [[64, 7168], [], [7168], []], [BF, "ScalarList", BF, ""])
    assert t is not None and (t.flops, t.bytes) == (w.flops, w.bytes)
    a = npu_work("RmsNorm", "64,7168;7168", "DT_BF16;DT_BF16", "64,7168;64,1", "DT_BF16;FLOAT")
    assert a is not None and a.flops == 4 * 64 * 7168
    assert a.bytes == 64 * 7168 * 2 + 7168 * 2 + 64 * 7168 * 2 + 64 * 4


def test_silu_and_mul() -> None:
    w = torch_work("_C::silu_and_mul", [[64, 2048], [64, 4096]], [BF, BF])
    assert w is not None and w.family == "activation"
    assert (w.flops, w.bytes) == (5 * 64 * 2048, (64 * 4096 + 64 * 2048) * 2)
    a = npu_work("SwiGlu", "64,4096", "DT_BF16", "64,2048", "DT_BF16")
    assert a is not None and (a.flops, a.bytes) == (w.flops, w.bytes)
    s = torch_work("aten::silu", [[16, 559, 2816]], [BF])
    assert s is not None and s.bytes == 2 * 16 * 559 * 2816 * 2


def test_elementwise_memory_embedding_sampling() -> None:
    add = torch_work("aten::add", [[16, 559, 1024], [16, 559, 1024], []], [BF, BF, "Scalar"])
    assert add is not None and add.bytes == 3 * 16 * 559 * 1024 * 2 and add.flops == 16 * 559 * 1024
    # the number argument ("double", dims []) is no tensor: fp32 stays fp32
    mul = torch_work("aten::mul", [[1, 559, 64], []], ["float", "double"])
    assert mul is not None and mul.dtype == "fp32" and mul.bytes == 2 * 559 * 64 * 4
    bcast = torch_work("aten::mul", [[1024], [16, 559, 1024]], [BF, BF])
    assert bcast is not None and bcast.bytes == (1024 + 2 * 16 * 559 * 1024) * 2
    cast = torch_work(
        "aten::copy_", [[16, 559, 1024], [16, 559, 1024], []], ["float", BF, "Scalar"]
    )
    assert cast is not None and cast.family == "memory" and cast.bytes == 16 * 559 * 1024 * (4 + 2)
    types = [BF, "Scalar", "Scalar", "Scalar", ""]
    to = torch_work("aten::to", [[16, 559, 1024], [], [], [], []], types, ["", "6", "", "", ""])
    assert to is not None and to.bytes == 16 * 559 * 1024 * (2 + 4)
    emb = torch_work("aten::embedding", [[151936, 1024], [16, 559], [], [], []],
                     [BF, "long int", "Scalar", "Scalar", "Scalar"])  # fmt: skip
    assert emb is not None and emb.family == "embedding"
    assert emb.bytes == 2 * 8944 * 1024 * 2 + 8944 * 8
    g = npu_work("GatherV2", "6400,5120;2,8192;1", "DT_BF16;INT32;INT64", "2,8192,5120", "DT_BF16")
    assert g is not None and g.bytes == 2 * 16384 * 5120 * 2 + 16384 * 4
    am = torch_work(
        "aten::argmax", [[32, 151936], [], []], [BF, "Scalar", "Scalar"], ["", "-1", "False"]
    )
    assert am is not None and am.family == "sampling" and am.bytes == 32 * 151936 * 2 + 32 * 8
    top = npu_work("TopKV2", "32,1000;", "FLOAT;INT32", "32,5;32,5", "FLOAT;INT32")
    assert top is not None and top.bytes == 32 * 1000 * 4 + 2 * 32 * 5 * 4
    sm = torch_work(
        "aten::_softmax", [[32, 151936], [], []], ["float", "Scalar", "Scalar"], ["", "-1", "False"]
    )
    assert sm is not None and sm.bytes == 2 * 32 * 151936 * 4 and sm.flops == 5 * 32 * 151936


@pytest.mark.parametrize(
    ("op", "dims", "types"),
    [
        ("aten::mm", [[64, 7168], [2048, 7168]], [BF, BF]),  # inner dims differ
        ("aten::mm", [[64, 7168], [7168, 2048]], ["c10::qint8", BF]),  # unknown dtype
        ("aten::mm", [[64, 7168]], [BF]),  # one operand
        ("aten::conv2d", [[1, 3, 224, 224], [64, 3, 7, 7]], [BF, BF]),  # no formula
        ("aten::scaled_dot_product_attention", [[16, 16, 559, 64]] * 3, [BF] * 3),  # no causal
    ],
)
def test_no_formula_or_misfit_gives_none(op: str, dims: list, types: list) -> None:
    shapes = torch_shapes(op, json.dumps(dims), json.dumps(types), None)
    assert shapes is not None and work_of(shapes) is None


def test_fp4_scaled_mm_unpacks_k_from_its_packed_operands() -> None:
    """NVFP4 ``_scaled_mm``: A [64, 7168/2] and mat2 [7168/2, 2048] hold two fp4 values per
    byte along K; e8m0 block scales (one per 16 values); bf16 out (ScalarType 15)."""
    s = torch_shapes(
        "aten::_scaled_mm",
        "[[64,3584],[3584,2048],[64,448],[2048,448],[],[],[],[]]",
        '["c10::Float4_e2m1fn_x2","c10::Float4_e2m1fn_x2","c10::Float8_e8m0fnu",'
        '"c10::Float8_e8m0fnu","","","Scalar","Scalar"]',
        '["","","","","","","15","False"]',
    )
    work = work_of_strict(s)
    assert work is not None and (work.family, work.dtype) == ("gemm", "fp4")
    assert work.flops == 2 * 64 * 7168 * 2048
    assert work.bytes == 64 * 7168 / 2 + 7168 * 2048 / 2 + 64 * 448 + 2048 * 448 + 64 * 2048 * 2
