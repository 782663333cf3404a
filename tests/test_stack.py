"""What the stack detector claims, and what it must not: an engine, framework, mode or library
only with evidence the trace really holds (a false engine puts its options in the advice)."""

from __future__ import annotations

import polars as pl
import pytest

from tracekit.stack import detect


def _stack(rows: list[tuple[str, str]], vendor: str | None, fmt: str = "test") -> set[str]:
    df = pl.DataFrame(rows, schema=["name", "kind"], orient="row").with_columns(
        pl.col("name").cast(pl.Categorical), pl.col("kind").cast(pl.Categorical)
    )
    return set(detect(df, {"format": fmt}, vendor).ids)


@pytest.mark.parametrize(
    ("rows", "vendor", "present", "absent"),
    [
        # Python's own "waiter" / aiter are no AITER
        (
            [("concurrent/futures/_base.py(201): _create_and_install_waiters", "op"),
             ("<built-in function aiter>", "op"), ("Cijk_Alik_Bljk_MT64x32", "kernel")],
            "amd", {"hipblaslt"}, {"aiter"},
        ),
        ([("void aiter::add_rmsnorm_quant_kernel<float>(int)", "kernel")], "amd", {"aiter"}, set()),
        # SGLang on ROCm calls vLLM's _C ops and kernels: SGLang is the engine
        (
            [("_C::silu_and_mul", "op"), ("void vllm::act_and_mul_kernel<float>(int)", "kernel"),
             ("sgl_kernel::moe_align_block_size", "op"), ("aten::mm", "op")],
            "amd", {"sglang", "pytorch"}, {"vllm"},
        ),
        # vLLM's GGUF kernels are copies of llama.cpp's: vLLM's frames decide
        (
            [("vllm/v1/worker/gpu_model_runner.py(3380): execute_model", "op"),
             ("void mul_mat_vec_q<(ggml_type)12>(int)", "kernel")],
            "nvidia", {"vllm"}, {"llama.cpp"},
        ),
        # the same kernels with no engine on the host: llama.cpp's (weak, but alone)
        ([("void mul_mat_vec_q<(ggml_type)12>(int)", "kernel")], "amd", {"llama.cpp"}, set()),
        # vLLM by its kernels alone (no other engine): kept
        ([("void vllm::rms_norm_kernel<float>(int)", "kernel")], "nvidia", {"vllm"}, set()),
        # aclnn is CANN's operator API (MindSpore, ATB and C++ apps call it too)
        ([("aclnnMatmul", "api"), ("MatMul", "kernel")], "ascend", {"aclnn"}, {"torch_npu"}),
        # loose fusion-like names are no JAX
        (
            [("Conv2D_BNInference_fusion", "kernel"), ("jit_compile", "op"),
             ("wrapped_copy", "kernel")],
            "nvidia", set(), {"jax"},
        ),
        ([("XlaModule:#hlo_module=jit_step#", "range"), ("loop_add_fusion", "kernel")],
         "nvidia", {"jax"}, set()),
        # cuDNN's implicit-GEMM convolutions are no cuBLAS; PyTorch's SDPA flash no FlashAttention
        ([("sm80_xmma_fprop_implicit_gemm_f16f16_f32", "kernel")], "nvidia", set(), {"cublas"}),
        ([("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n", "kernel")], "nvidia", {"cublas"}, set()),
        ([("void pytorch_flash::flash_fwd_kernel<Flash_fwd>(Params)", "kernel")], "nvidia",
         set(), {"flash-attn"}),
        ([("void flash::flash_fwd_splitkv_kernel<Kernel_traits>(Params)", "kernel")], "nvidia",
         {"flash-attn"}, set()),
        # ATen kernels of a C++ program (libtorch) say nothing about eager Python
        ([("void at::native::vectorized_elementwise_kernel<4>(int)", "kernel")], "nvidia",
         {"pytorch"}, {"eager"}),
        ([("aten::add", "op"), ("void at::native::elementwise_kernel<4>(int)", "kernel")],
         "nvidia", {"pytorch", "eager"}, set()),
        # Triton-Ascend's Inductor kernels are compiled, not eager
        ([("aten::add", "op"), ("triton_unk_fused_add_0", "kernel")], "ascend",
         {"inductor"}, {"eager"}),
        # TensorRT-LLM kernels ship in FlashInfer and vLLM: no TensorRT-LLM engine from them
        ([("void tensorrt_llm::kernels::quantize_with_block_size<1>(int)", "kernel")], "nvidia",
         set(), {"trtllm"}),
    ],
)  # fmt: skip
def test_claims_need_evidence(
    rows: list[tuple[str, str]], vendor: str, present: set[str], absent: set[str]
) -> None:
    found = _stack(rows, vendor)
    assert present <= found and not absent & found, found


def test_a_vendor_gate_keeps_other_vendors_libraries_out() -> None:
    rows = [("ncclDevKernel_Generic_1(ncclDevKernelArgsStorage)", "kernel")]
    assert _stack(rows, "amd") & {"nccl", "rccl"} == {"rccl"}
    assert _stack(rows, "nvidia") & {"nccl", "rccl"} == {"nccl"}
