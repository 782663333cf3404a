"""Taxonomy: categories and flags from the tables, user patterns, vendors, bad tables."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

import tracekit
from fixtures.scenario import KERNELS
from fixtures.step_truth import ROLE_CATEGORY
from tracekit.errors import TraceError
from tracekit.taxonomy import classify, load_patterns, vendor_of

VLLM = frozenset({"vllm", "pytorch"})
EAGER_MUL = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::BinaryFunctor<float, float,"
    " float, at::native::binary_internal::MulFunctor<float> >, std::array<char*, 3ul> >(int)"
)


def _rows(names: list[str], kind: str = "kernel", engine: str | None = None) -> pl.DataFrame:
    return pl.DataFrame({"name": names, "kind": [kind] * len(names),
                         "engine": [engine] * len(names), "device": [0] * len(names)})  # fmt: skip


def _one(
    name: str, vendor: str | None = "nvidia", stack: frozenset[str] = frozenset(), **kw: str
) -> dict:
    return classify(_rows([name], **kw), vendor, stack=stack).row(0, named=True)


def test_scenario_kernels_get_their_hand_labelled_category_and_flags() -> None:
    # the scenario is a vLLM step: its eager chain is the engine's fallback
    out = classify(_rows([k.name for k in KERNELS.values()]), "nvidia", stack=VLLM)
    got = out.select("category", "is_comm", "is_fused_comm", "is_fallback").rows()
    want = [(ROLE_CATEGORY[r], k.comm, k.fused_comm, k.fallback) for r, k in KERNELS.items()]
    assert got == want


@pytest.mark.parametrize(
    ("name", "category", "comm", "fused"),
    [
        ("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "comm", True, False),
        ("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", "comm", True, False),
        ("nccl_utils::pack_kernel<float>", "other", False, False),  # not by the prefix alone
        ("hcom_allReduce__586_0_1", "comm", True, False),
        ("MoeDistributeDispatchV2", "comm", True, True),
        ("MatmulAllReduce", "comm", True, True),
        ("void vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>(...)", "comm", True, False),
        ("FlashAttentionScore", "attention", False, False),
        ("GroupedMatmul", "moe", False, False),
        # gpt-oss experts: triton_kernels' matmul_ogs (vLLM on MI300X), trtllm-gen's batched
        # GEMM with a dynamic batch per expert (vLLM on B200), one with a fused SwiGLU
        ("_matmul_ogs_NNT_bf16xbf16xmxfp4_128x128x128x1_swiglu", "moe", False, False),
        (
            "bmm_MxE4m3_MxE2m1MxE4m3_Fp32_t128x16x256u2_s3_et128x16_m128x16x32_cga1x1x1_16dp256b"
            "_TN_transOut_schedS_bN_tmaOpt_clmp_swiGlu_dynBatch_sm100f",
            "moe",
            False,
            False,
        ),
        ("bmm_Bfloat16_MxE2m1MxE4m3_Fp32_t128x16x256_dynBatch_sm100f", "moe", False, False),
        ("Cijk_Alik_Bljk_HHS_BH_MT128x128x32", "gemm", False, False),
        ("void deep_gemm::fp8_gemm_kernel<128u>", "gemm", False, False),
        ("triton_poi_fused_add_3", "elementwise", False, False),
        ("AddRmsNorm", "norm", False, False),
        # FBGEMM embedding tables and sparse features: lookups, not GEMMs ("fbgemm") or MoE
        (
            "void split_embedding_codegen_forward_unweighted_kernel<float, float, float, false, "
            "long, 1ul, 16ul>(at::GenericPackedTensorAccessor<float, 1ul> fbgemm_gpu::x)",
            "elementwise",
            False,
            False,
        ),
        ("void fbgemm_gpu::permute_2D_lengths_kernel<int>(int, int)", "elementwise", False, False),
        ("fbgemm::block_bucketize_sparse_features", "elementwise", False, False),
        ("void fbgemm_gpu::f8f8bf16_rowwise_kernel<128>", "gemm", False, False),  # a real GEMM
    ],
)
def test_names(name: str, category: str, comm: bool, fused: bool) -> None:
    row = _one(name)
    assert (row["category"], row["is_comm"], row["is_fused_comm"]) == (category, comm, fused)


def test_fallbacks_by_vendor_engine_and_name() -> None:
    for vendor in ("amd", "nvidia"):  # Inductor's kernels are torch.compile's compiled path
        assert not _one("triton_poi_fused_add_3", vendor, VLLM | {"aiter"})["is_fallback"]
    assert _one("IndexPutV2", "ascend", engine="ai_cpu")["is_fallback"]
    assert _one("DropOutDoMaskAiCpu", "ascend", engine="aic")["is_fallback"]
    assert not _one("MoeDistributeDispatchV2<Fused>Aicpu", "ascend")["is_fallback"]  # MC² phase
    assert not _one("aten::add", "nvidia", kind="op")["is_fallback"]  # host rows: no flags
    assert _one("Memcpy HtoD", kind="memcpy")["category"] == "memory"
    assert _one("HcclTask", "ascend", kind="comm")["is_comm"]


def test_user_patterns_come_first(tmp_path: Path) -> None:
    extra = tmp_path / "mine.toml"
    extra.write_text(
        '[[category]]\nmatch = "^my_fused_ar"\ncategory = "comm"\nfused_comm = true\n'
        '[[fallback]]\nmatch = "slow_path"\n'
    )
    table = load_patterns(extra)
    out = classify(_rows(["my_fused_ar_kernel", "gemm_slow_path"]), "nvidia", table)
    assert out.select("category", "is_fused_comm", "is_comm", "is_fallback").rows() == [
        ("comm", True, True, False),
        ("gemm", False, False, True),
    ]


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("[[category]]\nmatch = '('\n", "bad regular expression"),
        ("[[category]]\nmatch = 'x'\ncategory = 'gemmm'\n", "unknown category 'gemmm'"),
        ("[[category]]\ncategory = 'gemm'\n", "needs match, kinds or engines"),
        ("[[category]]\nmatch = 'x'\ncolour = 'red'\n", "unknown key(s) colour"),
        ("[[kernels]]\nmatch = 'x'\n", "unknown table(s) kernels"),
        ("[[category]\n", "not valid TOML"),
    ],
)
def test_bad_pattern_files_fail_in_one_line(tmp_path: Path, text: str, needle: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(TraceError, match=needle.replace("(", r"\(").replace(")", r"\)")):
        load_patterns(path)


def test_vendor_from_metadata() -> None:
    assert vendor_of({"devices": [{"vendor": "AMD"}]}) == "amd"
    assert vendor_of({"format": "msprof"}) == "ascend"
    assert vendor_of({"format": "nsys"}) == "nvidia"
    assert vendor_of({"format": "kineto", "producer": {"backend": "roctracer"}}) == "amd"
    assert vendor_of({}) is None


@pytest.mark.parametrize(
    ("name", "vendor", "stack", "fallback"),
    [
        # an eager ATen chain is a fallback inside a serving engine's step only
        (EAGER_MUL, "nvidia", VLLM, True),
        (EAGER_MUL, "amd", frozenset({"sglang", "aiter"}), True),
        (EAGER_MUL, "nvidia", frozenset({"pytorch", "eager"}), False),  # eager training
        (EAGER_MUL, "amd", frozenset(), False),  # a benchmark: nothing else known
        # vLLM's Triton fused MoE: its deliberate kernel on NVIDIA, its fallback on ROCm
        # where AITER runs elsewhere (the AITER MoE switch is off)
        ("fused_moe_kernel", "nvidia", VLLM | {"triton"}, False),
        ("fused_moe_kernel", "amd", VLLM | {"triton"}, False),  # no AITER in this trace
        ("fused_moe_kernel", "amd", VLLM | {"aiter"}, True),
        ("fused_moe_kernel_gptq_awq", "amd", frozenset({"sglang", "aiter"}), True),
        ("fused_moe_kernel", "amd", frozenset({"aiter"}), False),  # no engine
        ("_fused_moe_kernel", "amd", VLLM | {"aiter"}, False),  # AITER's own Triton MoE
        # deliberate Triton kernels of the engines: never fallbacks
        ("kernel_unified_attention_2d", "amd", VLLM | {"aiter"}, False),
        ("_matmul_ogs_NNT_bf16xbf16xmxfp4_128x128x128x1_swiglu", "amd", VLLM | {"aiter"}, False),
        ("triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_0", "amd", VLLM | {"aiter"}, False),
    ],
)
def test_a_fallback_depends_on_the_stack(
    name: str, vendor: str, stack: frozenset[str], fallback: bool
) -> None:
    assert _one(name, vendor, stack)["is_fallback"] is fallback


def test_stack_conditions_any_of_and_all_of(tmp_path: Path) -> None:
    extra = tmp_path / "mine.toml"
    extra.write_text(
        '[[fallback]]\nmatch = "^slow_a"\nstacks = ["vllm+aiter", "atom"]\n'
        '[[fallback]]\nmatch = "^slow_b"\nnot_stacks = ["inductor"]\n'
    )
    table = load_patterns(extra)

    def flags(stack: set[str]) -> list[bool]:
        out = classify(_rows(["slow_a", "slow_b"]), "amd", table, frozenset(stack))
        return out["is_fallback"].to_list()

    assert flags({"vllm", "aiter"}) == [True, True]
    assert flags({"vllm"}) == [False, True]
    assert flags({"atom", "inductor"}) == [True, False]


def test_vendor_from_the_runtime_calls_when_no_device_names_one() -> None:
    from tracekit.taxonomy import vendor_of_calls

    def calls(*names: str) -> pl.DataFrame:
        return pl.DataFrame({"name": list(names), "kind": ["api"] * len(names)})

    assert vendor_of_calls(calls("hipLaunchKernel", "hipMemcpyAsync", "cudaFree")) == "amd"
    assert vendor_of_calls(calls("cudaLaunchKernel", "cuLaunchKernel")) == "nvidia"
    assert vendor_of_calls(calls("aclrtMemcpyAsync", "aclnnMatmul")) == "ascend"
    assert vendor_of_calls(calls("hipFree", "cudaFree")) is None  # no majority
    assert vendor_of_calls(calls()) is None
    # the metadata's devices decide first, then the calls, then the producer's text
    assert vendor_of({"devices": [], "api_vendor": "amd", "producer": {"b": "CUPTI"}}) == "amd"
    meta = {"devices": [{"vendor": "NVIDIA"}], "api_vendor": "amd"}
    assert vendor_of(meta) == "nvidia"


def test_a_merged_rocm_kineto_file_that_says_cupti_is_amd() -> None:
    from tests.conftest import real_file

    path = real_file("amd", "kineto_mi300_ddp4rank_rccl_FUSED/merged_all_events.json.gz")
    timeline = tracekit.load(path)
    assert timeline.meta["producer"]["backend"] == "CUPTI" and not timeline.meta["devices"]
    assert timeline.meta["api_vendor"] == "amd" and vendor_of(timeline.meta) == "amd"
