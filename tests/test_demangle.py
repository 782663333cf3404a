# ruff: noqa: E501  (real mangled names are one token each)
"""Names a person can read: mangled HIP/CUDA kernel names demangled at load (raw name kept in
args), short display names that take the function and not its return type, and diff keys
that match a demangled name however the demangler printed it."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

import tracekit
from tests.conftest import real_file
from tracekit.export import save
from tracekit.names import drop_return_type, kernel_key, short_name
from tracekit.parsers.demangle import demangle, demangle_events
from tracekit.timeline import build_table

SILU = "_ZN4vllm18act_and_mul_kernelIN3c108BFloat16EXadL_ZNS_11silu_kernelIS2_EET_RKS4_EELb1EEEvPS4_PS5_i"
SILU_TEXT = (
    "void vllm::act_and_mul_kernel<c10::BFloat16, &c10::BFloat16 vllm::silu_kernel<c10::BFloat16>"
    "(c10::BFloat16 const&), true>(c10::BFloat16*, c10::BFloat16 const*, int)"
)
# Real names of the public SGLang Qwen3-8B MI300X PyTorch-profiler trace (shared/traces/amd)
AITER = "_ZN5aiter24add_rmsnorm_quant_kernelIDF16bDF16bLi256ELi16ELb1ELb0ELb1ELi1EEEvPT0_PT_PfS4_S4_S4_diiiiiiib"
SGL = "_ZN7sgl_hip10activation18act_and_mul_kernelI14__hip_bfloat16TnPFT_RKS3_EXadL_Z4siluIS2_ES3_S5_EEEEvPS3_PS4_i"
ENABLE_IF = (
    "std::enable_if<(((8)>(0)))&&vllm::_typeConvert<c10::BFloat16>::exists, void>::type"
    " vllm::fused_add_rms_norm_kernel<c10::BFloat16, 8>(c10::BFloat16*, c10::BFloat16*,"
    " c10::BFloat16 const*, float, int, int)"
)


@pytest.mark.parametrize(
    ("raw", "text"),
    [
        (SILU, SILU_TEXT),
        (SILU + ".kd", SILU_TEXT),  # the AMD kernel-descriptor symbol
        ("_Z3fooi.constprop.0.isra.0", "foo(int)"),  # GCC clone suffixes
        ("_ZN7ck_tileL11flush_cacheEv.kd", "ck_tile::flush_cache()"),
        ("__amd_rocclr_fillBufferAligned.kd", None),  # not mangled: left alone
        ("Cijk_Ailk_Bljk_S_B_MT64x64x64.kd", None),
        ("void at::native::foo<float>(float*)", None),
        ("_Z", None),
        ("_Zfoo", None),
        ("main", None),
    ],
)
def test_demangle(raw: str, text: str | None) -> None:
    assert demangle(raw) == text


def test_names_are_demangled_once_per_distinct_name_and_the_raw_name_kept_in_args() -> None:
    table = build_table({"ts": [0, 10, 20, 30], "dur": [5] * 4,
                         "name": [SILU, "main", SILU + ".kd", SILU],
                         "args": [None, '{"a": 1}', "{}", '{"grid": [1, 1, 1]}']})  # fmt: skip
    out = demangle_events(table)
    assert out.column("name").to_pylist() == [SILU_TEXT, "main", SILU_TEXT, SILU_TEXT]
    assert out.column("name").chunk(0).dictionary.to_pylist() == [SILU_TEXT, "main"]
    args = [json.loads(a) for a in out.column("args").to_pylist()]
    assert args == [
        {"mangled_name": SILU},
        {"a": 1},
        {"mangled_name": SILU + ".kd"},
        {"mangled_name": SILU, "grid": [1, 1, 1]},
    ]
    plain = build_table({"ts": [0], "dur": [1], "name": ["main"]})
    assert demangle_events(plain) is plain


def test_a_real_rocm_trace_loads_with_readable_names() -> None:
    path = real_file("amd", "kineto_mi300x_sglang_qwen3_8b_decode/sglang_Qwen3-8B_decode.json.gz")
    df = tracekit.load(path).df.with_columns(pl.col("name").cast(pl.String))
    assert df.filter(pl.col("name").str.starts_with("_Z")).height == 0
    kept = df.filter(pl.col("args").str.contains('"mangled_name"'))
    assert kept.height == 181
    raw = kept["args"].map_elements(lambda a: json.loads(a)["mangled_name"], pl.String)
    assert set(raw) >= {AITER, SGL}
    aiter = kept.filter(raw == AITER)["name"].unique().to_list()
    assert aiter == [
        "void aiter::add_rmsnorm_quant_kernel<std::bfloat16_t, std::bfloat16_t, 256, 16, true,"
        " false, true, 1>(std::bfloat16_t*, std::bfloat16_t*, float*, std::bfloat16_t*,"
        " std::bfloat16_t*, std::bfloat16_t*, double, int, int, int, int, int, int, int, bool)"
    ]
    assert short_name(aiter[0]) == "aiter::add_rmsnorm_quant_kernel"
    assert short_name(demangle(SGL)) == "sgl_hip::activation::act_and_mul_kernel"


@pytest.mark.parametrize(
    ("name", "short"),
    [
        (ENABLE_IF, "vllm::fused_add_rms_norm_kernel"),
        (
            "std::enable_if<T2>(int)0&&vllm::_typeConvert<T1>::exists, void>::type"
            " vllm::fused_add_rms_norm_kernel<c10::BFloat16, (int)8>(T1 *, T1 *, const T1 *, float,"
            " int, int)",
            "vllm::fused_add_rms_norm_kernel",
        ),  # as Nsight Systems prints it
        (
            "std::enable_if<(((8)>(0)))&&(vllm::_typeConvert<float>::exists), void>::type"
            " vllm::f<float, 8>(float*)",
            "vllm::f",
        ),
        ("void ck_tile::kentry<2, Foo>(Bar)", "ck_tile::kentry<Foo>"),
        (SILU_TEXT, "vllm::act_and_mul_kernel"),
        (
            "void (anonymous namespace)::one_shot_all_reduce_kernel<float, 16, 8>(float**)",
            "one_shot_all_reduce_kernel",
        ),
        ("unsigned int cub::detail::count<int>(int*)", "cub::detail::count"),
        ("Memcpy HtoD (Pinned -> Device)", "Memcpy HtoD"),
        (
            "void ck_tile::kentry<2, ck_tile::FmhaFwdKernel<ck_tile::BlockFmhaPipelineQRKSVS<"
            "ck_tile::Problem> > >(ck_tile::FmhaFwdKernel<ck_tile::Problem>::Kargs)",
            "ck_tile::kentry<FmhaFwdKernel>",
        ),
        (
            "ncclDevKernel_Generic_4(ncclDevComm*, channelMasks, ncclWork*)",
            "ncclDevKernel_Generic_4",
        ),
    ],
)
def test_short_names_take_the_function_not_its_return_type(name: str, short: str) -> None:
    assert short_name(name).rstrip() == short


def test_drop_return_type_leaves_names_that_are_not_signatures() -> None:
    assert drop_return_type(ENABLE_IF).startswith("vllm::fused_add_rms_norm_kernel<")
    for text in ("Memcpy HtoD (Pinned -> Device)", "foo<T>", "aclnnAdd_AddAiCore_Add"):
        assert drop_return_type(text) == text


def test_diff_keys_match_however_the_demangler_printed_the_name() -> None:
    llvm = demangle(AITER)
    gnu = llvm.replace("void ", "std::enable_if<true, void>::type ", 1)  # another return type
    assert (
        kernel_key(llvm)
        == kernel_key(gnu)
        == (
            "aiter::add_rmsnorm_quant_kernel<std::bfloat16_t, std::bfloat16_t, 256, 16, true, false,"
            " true, 1>"
        )
    )
    assert kernel_key("void f<a<b<int> > >(int)") == kernel_key("void f<a<b<int>>>(int)")


def test_diff_of_a_mangled_trace_against_a_demangled_one_matches_every_kernel(
    tmp_path: Path,
) -> None:
    from tracekit.diff import compare

    names = [SILU, AITER, SGL]
    runs = []
    for mangled in (True, False):
        rows = [n if mangled else demangle(n) for n in names] * 4
        table = build_table({"ts": [i * 1_000 for i in range(12)], "dur": [500] * 12,
                             "kind": ["kernel"] * 12, "name": rows, "device": [0] * 12,
                             "stream": [7] * 12, "rank": [0] * 12})  # fmt: skip
        path = tmp_path / f"run_{mangled}.parquet"
        save(tracekit.Timeline(table, {"format": "fixture"}), path)
        runs.append(tracekit.analyze(tracekit.load(path)))
    result = compare([runs[0]], [runs[1]], allow_low_confidence=True)
    kernels = result.to_dict()["kernels"]
    assert [k["status"] for k in kernels] == ["unchanged"] * 3  # none new, none gone


def test_without_a_demangler_the_timeline_says_names_stay_mangled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Python 3.10 has no pycxxfilt wheel: names stay as recorded, and the load says so."""
    import importlib

    monkeypatch.setattr(importlib.import_module("tracekit.parsers.demangle"), "pycxxfilt", None)
    demangle.cache_clear()
    table = build_table({"ts": [0, 10], "dur": [5, 5], "kind": ["kernel"] * 2,
                         "name": [SILU, "main"], "device": [0, 0]})  # fmt: skip
    path = save(tracekit.Timeline(table, {"format": "fixture"}), tmp_path / "m.parquet")
    timeline = tracekit.load(path)
    assert timeline.df["name"].cast(pl.String).to_list() == [SILU, "main"]
    assert timeline.meta["warnings"][-1].startswith("1 kernel name(s) are mangled (_Z…)")
    demangle.cache_clear()
