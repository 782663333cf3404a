"""Kernel-name normalisation for diffs: volatile suffixes go, distinguishing parts stay."""

from __future__ import annotations

import pytest

from fixtures.scenario import KERNELS
from tracekit.names import distinct_short_names, kernel_family, kernel_key

CUTLASS = (
    "void cutlass::Kernel<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_128x64_64x3_tn_align8>"
    "(cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_128x64_64x3_tn_align8::Params)"
)
CIJK = (
    "Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT256x48x64_MI16x16x1_SN_LDSB1_AFC1_AFEM1_"
    "GRVWA8_GRVWB4_GSUAMB_GLS0_ISA942_IU1_K1_LBSPPA512_LBSPPB128_WG64_4_1"
)


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("triton_poi_fused_add_3", "triton_poi_fused_add"),
        ("triton_red_fused__to_copy_mean_7", "triton_red_fused__to_copy_mean"),
        ("triton_poi_fused_0", "triton_poi_fused"),
        ("triton_per_fused_native_layer_norm_12", "triton_per_fused_native_layer_norm"),
        ("hcom_allReduce__586_0_1", "hcom_allReduce"),
        ("hcom_allGather__868_3_1", "hcom_allGather"),
        ("trans_TransData_26", "trans_TransData"),
        (
            "Default/network-WithLossCell/_backbone-AlexNet/Cast-op271",
            "Default/network-WithLossCell/_backbone-AlexNet/Cast",
        ),
        ("Default/AllReduce-op534_0", "Default/AllReduce"),
        ("loop_add_fusion_3", "loop_add_fusion"),
        ("fusion.12", "fusion"),
        ("fused_moe_kernel_0x1a2b3c", "fused_moe_kernel"),
        ("gemm_0x7F3A2B_tn", "gemm_tn"),
        ("kernel_abc123def456", "kernel"),
        ("attn_fwd_1f8e2a9c7b3d4e5f60718293a4b5c6d7", "attn_fwd"),
        ("graph_3f2a1b4c-5d6e-4f70-8a9b-0c1d2e3f4a5b_kernel", "graph_kernel"),
        # signatures and the "void " return type are not part of the identity
        (
            "void vllm::rms_norm_kernel<c10::BFloat16, (int)8>(T1 *, const T1 *, int)",
            "vllm::rms_norm_kernel<c10::BFloat16, (int)8>",
        ),
        (CUTLASS, CUTLASS[5 : CUTLASS.index("(")]),
        # nothing volatile: kept as they are
        ("nvjet_hsh_128x32_64x8_2x1_v_bz_coopB_TNT", "nvjet_hsh_128x32_64x8_2x1_v_bz_coopB_TNT"),
        (KERNELS["o_proj"].name, KERNELS["o_proj"].name),
        (CIJK, CIJK),
        ("Memcpy HtoD (Pinned -> Device)", "Memcpy HtoD (Pinned -> Device)"),
        ("kernel_deadbeef", "kernel_deadbeef"),
        ("Conv2D1", "Conv2D1"),
        ("aclnnMm_MatMulV3Common_MatMulV3", "aclnnMm_MatMulV3Common_MatMulV3"),
        ("_ZN7ck_tile6kentryILi1ENS_12Rmsnorm2dFwdE", "_ZN7ck_tile6kentryILi1ENS_12Rmsnorm2dFwdE"),
    ],
)
def test_kernel_key(name: str, key: str) -> None:
    assert kernel_key(name) == key


@pytest.mark.parametrize(
    ("a", "b"),
    [
        # tile shapes, data types and templates tell GEMMs apart
        ("nvjet_hsh_128x32_64x8_2x1_v_bz_coopB_TNT", "nvjet_hsh_64x32_64x16_4x1_v_bz_splitK_TNT"),
        ("nvjet_hsh_128x32_64x8_2x1_v_bz_coopB_TNT", "nvjet_hsh_128x32_64x8_2x1_v_bz_coopA_TNT"),
        (
            "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x64x64_warpgroupsize1x1x1",
            "sm90_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize128x64x64_warpgroupsize1x1x1",
        ),
        (CUTLASS, CUTLASS.replace("128x64_64x3", "256x128_64x3")),
        (KERNELS["w13"].name, KERNELS["w2"].name),
        (CIJK, CIJK.replace("MT256x48x64", "MT160x256x64")),
        ("hcom_allReduce__586_0_1", "hcom_allGather__586_0_1"),
        ("triton_poi_fused_add_3", "triton_poi_fused_mul_3"),
        ("Memcpy HtoD (Pinned -> Device)", "Memcpy DtoH (Device -> Pinned)"),
        ("Conv2D1", "Conv2D5"),
    ],
)
def test_different_kernels_keep_different_keys(a: str, b: str) -> None:
    assert kernel_key(a) != kernel_key(b)


def test_family_drops_templates_and_trailing_numbers() -> None:
    assert kernel_family("Conv2D1") == kernel_family("Conv2D5") == "Conv2D"
    assert kernel_family(kernel_key(KERNELS["w13"].name)) == "cutlass::device_kernel<>"
    assert kernel_family(kernel_key(KERNELS["w2"].name)) == "cutlass::device_kernel<>"
    assert kernel_family("MatMulV2") == "MatMulV"
    assert kernel_family("nvjet_hsh_64x8_2x1_v_bz_TNT") == "nvjet_hsh_64x8_2x1_v_bz_TNT"


def test_labels_tell_kernels_apart() -> None:
    names = [KERNELS[r].name for r in ("fallback_silu", "fallback_mul", "w13", "w2", "rmsnorm")]
    assert distinct_short_names(names) == [
        "at::native::vectorized_elementwise_kernel [silu_kernel]",
        "at::native::vectorized_elementwise_kernel [BinaryFunctor]",
        "cutlass::device_kernel<GemmUniversal> #1",
        "cutlass::device_kernel<GemmUniversal> #2",
        "vllm::fused_add_rms_norm_kernel",
    ]
