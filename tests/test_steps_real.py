# ruff: noqa: E501 - the table keys are the samples' paths
"""Steps on every real sample in ../shared/traces that has device work: how they were found,
their confidence, how many, their phases and the share of device time inside steps. Each
entry says what the trace is; the numbers were checked by hand against the traces (markers,
graph launches, iteration counts in the MANIFESTs)."""

from __future__ import annotations

import polars as pl
import pytest

import tracekit
from tests.conftest import real_root

# trace (below $TRACEKIT_REAL_TRACES) -> (method, confidence, steps, steps per phase,
# share of device time inside steps)
EXPECTED: dict[str, tuple[str, str, int, dict[str, int], float | None]] = {
    # HTA toy training loop, MI250, ProfilerStep#N
    "amd/kineto_mi250_hta_minitoy/mi250_minitoy_train_ROCm6_2_kineto.json.gz": (
        "marker",
        "high",
        2,
        {"unknown": 2},
        1.0,
    ),
    # 4-rank ResNet DDP training merged by TraceFusion: 3 ProfilerSteps per rank
    "amd/kineto_mi300_ddp4rank_rccl_FUSED/merged_all_events.json.gz": (
        "marker",
        "high",
        12,
        {"unknown": 12},
        1.0,
    ),
    # only the RCCL kernels of that run: no markers, isolated collectives -> idle gaps, low
    "amd/kineto_mi300_ddp4rank_rccl_FUSED/merged_nccl_only.json.gz": (
        "gaps",
        "low",
        50,
        {"unknown": 50},
        1.0,
    ),
    # HF Qwen1.5-0.5B eager forward, one ProfilerStep#6; a few kernels run before the step
    "amd/kineto_mi300x_hf_qwen1.5_0.5b_eager/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz": (
        "marker",
        "high",
        1,
        {"unknown": 1},
        0.9938,
    ),
    # SGLang Qwen3-8B, one decode step of 32 requests (TraceLens' vLLM-style annotation)
    "amd/kineto_mi300x_sglang_qwen3_8b_decode/sglang_Qwen3-8B_decode.json.gz": (
        "marker",
        "high",
        1,
        {"decode": 1},
        1.0,
    ),
    # SGLang Qwen3-8B, one EXTEND step of 15 prompts, 15360 tokens
    "amd/kineto_mi300x_sglang_qwen3_8b_prefill/sglang_Qwen3-8B_prefilldecode.json.gz": (
        "marker",
        "high",
        1,
        {"prefill": 1},
        1.0,
    ),
    # toy model on the rocprofiler-sdk Kineto backend, 2 ProfilerSteps
    "amd/kineto_mi350x_rocprofsdk_backend_aorta/smci350-zts-gtu-c6-25_200691.1758927066581847260.pt.trace.json": (
        "marker",
        "high",
        2,
        {"unknown": 2},
        1.0,
    ),
    # vLLM V1 MoE, one mixed step of 8192 tokens replayed as 25 piecewise HIP graphs
    "amd/kineto_rocm_vllm_moe_prefilldecode_piecewise/graph_execution.json.gz": (
        "marker",
        "high",
        1,
        {"mixed": 1},
        1.0,
    ),
    # CK batched-GEMM microbenchmark: bursts between idle gaps, not LLM
    "amd/rocpd_db_mi300x_ck_batched_gemm_hiptrace/28_results.db": (
        "gaps",
        "low",
        3,
        {"unknown": 3},
        1.0,
    ),
    # HIP vector add: 1 kernel, 3 copies
    "amd/rocprof_v1_hiptrace_hip_vecadd_small/results.db": ("gaps", "low", 3, {"unknown": 3}, 1.0),
    # the same run as JSON
    "amd/rocprof_v1_hiptrace_hip_vecadd_small/results.json": (
        "gaps",
        "low",
        3,
        {"unknown": 3},
        1.0,
    ),
    # torch.add on 3 elements: 1 kernel, 6 copies
    "amd/rocprof_v1_hiptrace_rocmblogs_pytorch_vecadd/results.db": (
        "gaps",
        "low",
        2,
        {"unknown": 2},
        1.0,
    ),
    # the same run as JSON
    "amd/rocprof_v1_hiptrace_rocmblogs_pytorch_vecadd/results.json": (
        "gaps",
        "low",
        2,
        {"unknown": 2},
        1.0,
    ),
    # llama.cpp decode trimmed to 24 dispatches after each of 6 token boundaries; the first block opens differently: a window before the first period
    "amd/rocprofv3_csv_gfx1151_llamacpp_TRIMMED/decode_kernel_trace.csv": (
        "period",
        "medium",
        6,
        {"unknown": 1, "decode": 5},
        1.0,
    ),
    # llama.cpp prefill of one hipGraphLaunch (API rows thinned to every 20th): the launches and the kernels' period disagree, low
    "amd/rocprofv3_csv_gfx1151_llamacpp_TRIMMED/prefill_kernel_trace.csv": (
        "graph",
        "low",
        3,
        {"unknown": 3},
        1.0,
    ),
    # FSDP training, 50 iterations: a 746-kernel period (backward kernels: no decode phase)
    "amd/rocprofv3_json_mi350x_fsdp_train_tracelens/908_results.json.gz": (
        "period",
        "medium",
        51,
        {"unknown": 51},
        1.0,
    ),
    # MindSpore on 2 devices, msprof Step Trace: 10 iterations
    "ascend/mindinsight_msprof_PROF_2dev/PROF_000001_20230818142704322_COJGGGCANRMICFBC": (
        "marker",
        "high",
        10,
        {"unknown": 10},
        1.0,
    ),
    # msprof db sample without steps: 3 bursts
    "ascend/msinsight_server_testdata/full_db/msprof_0.db": ("gaps", "low", 3, {"unknown": 3}, 1.0),
    # GPT-3 training excerpt, kernel_details only: Step Id 2
    "ascend/msinsight_server_testdata/test_rank_0": ("marker", "high", 1, {"unknown": 1}, 1.0),
    # the same, rank 1
    "ascend/msinsight_server_testdata/test_rank_1": ("marker", "high", 1, {"unknown": 1}, 1.0),
    # torch_npu 910B, one ProfilerStep#50 per rank and level
    "ascend/msinsight_torchnpu_910B_2rank/db/level0/rank0_ascend_pt": (
        "marker",
        "high",
        1,
        {"unknown": 1},
        1.0,
    ),
    # torch_npu 910B, one ProfilerStep#50 per rank and level
    "ascend/msinsight_torchnpu_910B_2rank/db/level0/rank1_ascend_pt": (
        "marker",
        "high",
        1,
        {"unknown": 1},
        1.0,
    ),
    # torch_npu 910B, one ProfilerStep#50 per rank and level
    "ascend/msinsight_torchnpu_910B_2rank/db/level1/rank0_ascend_pt": (
        "marker",
        "high",
        1,
        {"unknown": 1},
        1.0,
    ),
    # torch_npu 910B, one ProfilerStep#50 per rank and level
    "ascend/msinsight_torchnpu_910B_2rank/db/level1/rank1_ascend_pt": (
        "marker",
        "high",
        1,
        {"unknown": 1},
        1.0,
    ),
    # torch_npu 910B, one ProfilerStep#50 per rank and level
    "ascend/msinsight_torchnpu_910B_2rank/db/level2/rank0_ascend_pt": (
        "marker",
        "high",
        1,
        {"unknown": 1},
        1.0,
    ),
    # torch_npu 910B, one ProfilerStep#50 per rank and level
    "ascend/msinsight_torchnpu_910B_2rank/db/level2/rank1_ascend_pt": (
        "marker",
        "high",
        1,
        {"unknown": 1},
        1.0,
    ),
    # torch_npu 910B, one ProfilerStep#50 per rank and level
    "ascend/msinsight_torchnpu_910B_2rank/text/level0/rank0_ascend_pt": (
        "marker",
        "high",
        1,
        {"unknown": 1},
        1.0,
    ),
    # torch_npu 910B, one ProfilerStep#50 per rank and level
    "ascend/msinsight_torchnpu_910B_2rank/text/level0/rank1_ascend_pt": (
        "marker",
        "high",
        1,
        {"unknown": 1},
        1.0,
    ),
    # torch_npu 910B, one ProfilerStep#50 per rank and level
    "ascend/msinsight_torchnpu_910B_2rank/text/level1/rank0_ascend_pt": (
        "marker",
        "high",
        1,
        {"unknown": 1},
        1.0,
    ),
    # torch_npu 910B, one ProfilerStep#50 per rank and level
    "ascend/msinsight_torchnpu_910B_2rank/text/level1/rank1_ascend_pt": (
        "marker",
        "high",
        1,
        {"unknown": 1},
        1.0,
    ),
    # torch_npu 910B, one ProfilerStep#50 per rank and level
    "ascend/msinsight_torchnpu_910B_2rank/text/level2/rank0_ascend_pt": (
        "marker",
        "high",
        1,
        {"unknown": 1},
        1.0,
    ),
    # torch_npu 910B, one ProfilerStep#50 per rank and level
    "ascend/msinsight_torchnpu_910B_2rank/text/level2/rank1_ascend_pt": (
        "marker",
        "high",
        1,
        {"unknown": 1},
        1.0,
    ),
    # 8 rows, no Step Id: bursts
    "ascend/msprof_analyze_advisor_testdata/test/resource/test.csv": (
        "gaps",
        "low",
        4,
        {"unknown": 4},
        1.0,
    ),
    # kernel_details of one step (Step Id 1)
    "ascend/msprof_analyze_advisor_testdata/test/ut/advisor/advisor_backend/compute_advice/kernel_details.csv": (
        "marker",
        "high",
        1,
        {"unknown": 1},
        1.0,
    ),
    # kernel_details of Step Id 19
    "ascend/msprof_analyze_advisor_testdata/test/ut/advisor/compute_advice/data/kernel_details.csv": (
        "marker",
        "high",
        1,
        {"unknown": 1},
        1.0,
    ),
    # one TileLang kernel run 3 times
    "ascend/neopan_tilelang_msprof_app_cann85/PROF_000001_20260605161708478_FRJKORBPFMHQMGLA": (
        "gaps",
        "low",
        3,
        {"unknown": 3},
        1.0,
    ),
    # one GroupedMatmul run 3 times
    "ascend/vllm_ascend_tmp_msprof_groupedmatmul_910B/PROF_000001_20260823165413436_00626258NIRJNPIC": (
        "gaps",
        "low",
        3,
        {"unknown": 3},
        1.0,
    ),
    # training with NCCL all-to-all on 6 streams, 5 ProfilerSteps
    "nvidia/hta-a100-80gb-world16-multistream/rank0.json.gz": (
        "marker",
        "high",
        5,
        {"unknown": 5},
        1.0,
    ),
    # PARAM AlexNet benchmark without step markers: idle gaps, one holds 84%
    "nvidia/hta-alexnet-a100/benchmark_result_2869224_1695835535_trace.json.gz": (
        "gaps",
        "low",
        6,
        {"unknown": 6},
        1.0,
    ),
    # CUPTI range profiling: no kernel rows
    "nvidia/hta-cupti-profiler-range/benchmark_result_924719_1679055439_trace.json.gz": (
        "whole",
        "none",
        1,
        {"unknown": 1},
        None,
    ),
    # 6 kernels on 2 streams with event syncs
    "nvidia/hta-event-sync-multistream/event_sync_trace.json.gz": (
        "gaps",
        "low",
        2,
        {"unknown": 2},
        1.0,
    ),
    # SGD training: 4 iterations of 28 kernels after a warm-up window
    "nvidia/hta-gp100-gpu-user-annotation/step_based_trace_2543932.json.gz": (
        "period",
        "medium",
        5,
        {"unknown": 5},
        1.0,
    ),
    # 4 kernels, 2022 categories
    "nvidia/hta-legacy-inference-cats/inference_rank_1.json.gz": (
        "gaps",
        "low",
        3,
        {"unknown": 3},
        1.0,
    ),
    # DDP training with NCCL, ProfilerStep#4-6
    "nvidia/hta-nccl-parser-a100-2rank/nccl_data.json.gz": (
        "marker",
        "high",
        3,
        {"unknown": 3},
        1.0,
    ),
    # sampled training, 2 ProfilerSteps
    "nvidia/hta-sampled-world128-multistream/sampled_rank-0.json.gz": (
        "marker",
        "high",
        2,
        {"unknown": 2},
        1.0,
    ),
    # the same, rank 1
    "nvidia/hta-sampled-world128-multistream/sampled_rank-1.json.gz": (
        "marker",
        "high",
        2,
        {"unknown": 2},
        1.0,
    ),
    # training, 6 ProfilerSteps
    "nvidia/hta-trace-diff-a100-world8/control.json.gz": ("marker", "high", 6, {"unknown": 6}, 1.0),
    # one Triton kernel in one ProfilerStep
    "nvidia/hta-triton-a100/triton_example.json.gz": ("marker", "high", 1, {"unknown": 1}, 1.0),
    # DDP all-reduce training, 5 ProfilerSteps
    "nvidia/hta-v100-ddp-allreduce/df_index_resolver.json.gz": (
        "marker",
        "high",
        5,
        {"unknown": 5},
        1.0,
    ),
    # training, 5 ProfilerSteps
    "nvidia/hta-v100-ns-resolution/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz": (
        "marker",
        "high",
        5,
        {"unknown": 5},
        1.0,
    ),
    # ResNet-50 training (2021 schema), ProfilerStep#5-10
    "nvidia/kineto-tbplugin-resnet50-v100-legacy/worker0.1623143089861.pt.trace.json.gz": (
        "marker",
        "high",
        6,
        {"unknown": 6},
        1.0,
    ),
    # weight-streaming simulation: copies and GEMMs in bursts
    "nvidia/llama3-inference-nsys-sqlite-rtx4060ti/demo.sqlite": (
        "gaps",
        "low",
        10,
        {"unknown": 10},
        1.0,
    ),
    # simulated per-layer inference: 512 periods of 4 kernels (no LM head, no attention)
    "nvidia/llama3-inference-nsys-sqlite-rtx4060ti/real_inference_simulation.sqlite": (
        "period",
        "medium",
        512,
        {"unknown": 512},
        1.0,
    ),
    # nvFuser microbenchmark: 21 kernels in bursts
    "nvidia/nvfuser-nsys-sqlite-h100-eos/report1.sqlite": ("gaps", "low", 10, {"unknown": 10}, 1.0),
    # the same on an H200
    "nvidia/nvfuser-nsys-sqlite-h200/report1.sqlite": ("gaps", "low", 10, {"unknown": 10}, 1.0),
    # MPI saxpy: 5 iterations of 4 kernels
    "nvidia/pipit-saxpy-mpi-cuda-nsys/saxpy-mpi-cuda_nsys_perlmutter0.sqlite": (
        "period",
        "medium",
        5,
        {"unknown": 5},
        1.0,
    ),
    # HF Qwen1.5-0.5B eager forward on an H100, one ProfilerStep#6
    "nvidia/tracelens-h100-hf-qwen1.5-0.5b/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz": (
        "marker",
        "high",
        1,
        {"unknown": 1},
        0.9934,
    ),
}


@pytest.mark.parametrize("rel", list(EXPECTED))
def test_steps_of_real_traces(rel: str) -> None:
    root = real_root()
    if root is None:
        pytest.skip("TRACEKIT_REAL_TRACES not set")
    path = root / rel
    if not path.exists():
        pytest.skip(f"{path} missing")
    method, confidence, count, phases, share = EXPECTED[rel]
    a = tracekit.analyze(tracekit.load(path))
    assert (a.steps.method, a.steps.confidence, len(a.steps)) == (method, confidence, count)
    got = a.steps.ranges["phase"].fill_null("unknown").value_counts()
    assert dict(got.iter_rows()) == phases
    total = a.work["dur"].sum()
    inside = a.work.filter(pl.col("step").is_not_null())["dur"].sum()
    assert (round(inside / total, 4) if total else None) == share
    if confidence in ("low", "none"):
        assert a.low_confidence is not None and a.to_dict()["low_confidence"]
    else:
        assert a.low_confidence is None


def test_every_real_kineto_and_prof_sample_is_listed() -> None:
    """A new Kineto trace or msprof PROF_ folder in the samples gets its entry here."""
    root = real_root()
    if root is None:
        pytest.skip("TRACEKIT_REAL_TRACES not set")
    found = {*root.glob("[an]*/*/*.json.gz"), *root.glob("ascend/*/PROF_*")}
    missing = sorted(str(p.relative_to(root)) for p in found)
    missing = [m for m in missing if m not in EXPECTED]
    assert not missing, missing
