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
# share of device time inside steps, workload kind, step unit)
EXPECTED: dict[str, tuple[str, str, int, dict[str, int], float | None, str, str]] = {
    # HTA toy training loop, MI250, ProfilerStep#N
    "amd/kineto_mi250_hta_minitoy/mi250_minitoy_train_ROCm6_2_kineto.json.gz": (
        "marker",
        "high",
        2,
        {"unknown": 2},
        1.0,
        "training",
        "iteration",
    ),
    # 4-rank ResNet DDP training merged by TraceFusion: 3 ProfilerSteps per rank
    "amd/kineto_mi300_ddp4rank_rccl_FUSED/merged_all_events.json.gz": (
        "marker",
        "high",
        12,
        {"unknown": 12},
        1.0,
        "training",
        "iteration",
    ),
    # only the RCCL kernels of that run: one collective kernel repeated -> repetitions, one window
    "amd/kineto_mi300_ddp4rank_rccl_FUSED/merged_nccl_only.json.gz": (
        "whole",
        "high",
        4,
        {"unknown": 4},
        1.0,
        "microbenchmark",
        "repetition",
    ),
    # HF Qwen1.5-0.5B eager forward, one ProfilerStep#6; a few kernels run before the step
    "amd/kineto_mi300x_hf_qwen1.5_0.5b_eager/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz": (
        "marker",
        "high",
        1,
        {"unknown": 1},
        0.9938,
        "unknown",
        "step",
    ),
    # SGLang Qwen3-8B, one decode step of 32 requests (TraceLens' vLLM-style annotation)
    "amd/kineto_mi300x_sglang_qwen3_8b_decode/sglang_Qwen3-8B_decode.json.gz": (
        "marker",
        "high",
        1,
        {"decode": 1},
        1.0,
        "decode",
        "decode step",
    ),
    # SGLang Qwen3-8B, one EXTEND step of 15 prompts, 15360 tokens
    "amd/kineto_mi300x_sglang_qwen3_8b_prefill/sglang_Qwen3-8B_prefilldecode.json.gz": (
        "marker",
        "high",
        1,
        {"prefill": 1},
        1.0,
        "serving",
        "step",
    ),
    # toy model on the rocprofiler-sdk Kineto backend, 2 ProfilerSteps
    "amd/kineto_mi350x_rocprofsdk_backend_aorta/smci350-zts-gtu-c6-25_200691.1758927066581847260.pt.trace.json": (
        "marker",
        "high",
        2,
        {"unknown": 2},
        1.0,
        "training",
        "iteration",
    ),
    # vLLM V1 MoE, one mixed step of 8192 tokens replayed as 25 piecewise HIP graphs
    "amd/kineto_rocm_vllm_moe_prefilldecode_piecewise/graph_execution.json.gz": (
        "marker",
        "high",
        1,
        {"mixed": 1},
        1.0,
        "serving",
        "step",
    ),
    # CK batched-GEMM microbenchmark: 2 kernels run 150 times -> repetitions, one window
    "amd/rocpd_db_mi300x_ck_batched_gemm_hiptrace/28_results.db": (
        "whole",
        "high",
        1,
        {"unknown": 1},
        1.0,
        "microbenchmark",
        "repetition",
    ),
    # HIP vector add: 1 kernel, 3 copies -> a single pass
    "amd/rocprof_v1_hiptrace_hip_vecadd_small/results.db": (
        "whole",
        "medium",
        1,
        {"unknown": 1},
        1.0,
        "single",
        "whole window",
    ),
    # the same run as JSON
    "amd/rocprof_v1_hiptrace_hip_vecadd_small/results.json": (
        "whole",
        "medium",
        1,
        {"unknown": 1},
        1.0,
        "single",
        "whole window",
    ),
    # torch.add on 3 elements: 1 kernel, 6 copies -> a single pass
    "amd/rocprof_v1_hiptrace_rocmblogs_pytorch_vecadd/results.db": (
        "whole",
        "medium",
        1,
        {"unknown": 1},
        1.0,
        "single",
        "whole window",
    ),
    # the same run as JSON
    "amd/rocprof_v1_hiptrace_rocmblogs_pytorch_vecadd/results.json": (
        "whole",
        "medium",
        1,
        {"unknown": 1},
        1.0,
        "single",
        "whole window",
    ),
    # llama.cpp decode trimmed to 24 dispatches after each of 6 token boundaries; the first block opens differently: a window before the first period
    "amd/rocprofv3_csv_gfx1151_llamacpp_TRIMMED/decode_kernel_trace.csv": (
        "period",
        "medium",
        6,
        {"decode": 5, "unknown": 1},
        1.0,
        "decode",
        "decode step",
    ),
    # llama.cpp prefill of one hipGraphLaunch (API rows thinned to every 20th): the launches and the kernels' period disagree, low
    "amd/rocprofv3_csv_gfx1151_llamacpp_TRIMMED/prefill_kernel_trace.csv": (
        "graph",
        "low",
        3,
        {"unknown": 3},
        1.0,
        "unknown",
        "step",
    ),
    # FSDP training, 50 iterations: the kernels' period, each period runs an optimizer step
    "amd/rocprofv3_json_mi350x_fsdp_train_tracelens/908_results.json.gz": (
        "period",
        "medium",
        51,
        {"unknown": 51},
        1.0,
        "training",
        "iteration",
    ),
    # MindSpore on 2 devices, msprof Step Trace: 10 iterations
    "ascend/mindinsight_msprof_PROF_2dev/PROF_000001_20230818142704322_COJGGGCANRMICFBC": (
        "marker",
        "high",
        10,
        {"unknown": 10},
        1.0,
        "training",
        "iteration",
    ),
    # msprof db sample without steps: bursts of every size are no steps -> one window
    "ascend/msinsight_server_testdata/full_db/msprof_0.db": (
        "whole",
        "none",
        1,
        {"unknown": 1},
        1.0,
        "unknown",
        "whole window",
    ),
    # GPT-3 training excerpt, kernel_details only: Step Id 2
    "ascend/msinsight_server_testdata/test_rank_0": (
        "marker",
        "high",
        1,
        {"unknown": 1},
        1.0,
        "unknown",
        "step",
    ),
    # the same, rank 1
    "ascend/msinsight_server_testdata/test_rank_1": (
        "marker",
        "high",
        1,
        {"unknown": 1},
        1.0,
        "unknown",
        "step",
    ),
    # torch_npu 910B, one ProfilerStep#50 per rank and level
    "ascend/msinsight_torchnpu_910B_2rank/db/level0/rank0_ascend_pt": (
        "marker",
        "high",
        1,
        {"unknown": 1},
        1.0,
        "training",
        "iteration",
    ),
    # torch_npu 910B, one ProfilerStep#50 per rank and level
    "ascend/msinsight_torchnpu_910B_2rank/db/level0/rank1_ascend_pt": (
        "marker",
        "high",
        1,
        {"unknown": 1},
        1.0,
        "training",
        "iteration",
    ),
    # torch_npu 910B, one ProfilerStep#50 per rank and level
    "ascend/msinsight_torchnpu_910B_2rank/db/level1/rank0_ascend_pt": (
        "marker",
        "high",
        1,
        {"unknown": 1},
        1.0,
        "training",
        "iteration",
    ),
    # torch_npu 910B, one ProfilerStep#50 per rank and level
    "ascend/msinsight_torchnpu_910B_2rank/db/level1/rank1_ascend_pt": (
        "marker",
        "high",
        1,
        {"unknown": 1},
        1.0,
        "training",
        "iteration",
    ),
    # torch_npu 910B, one ProfilerStep#50 per rank and level
    "ascend/msinsight_torchnpu_910B_2rank/db/level2/rank0_ascend_pt": (
        "marker",
        "high",
        1,
        {"unknown": 1},
        1.0,
        "training",
        "iteration",
    ),
    # torch_npu 910B, one ProfilerStep#50 per rank and level
    "ascend/msinsight_torchnpu_910B_2rank/db/level2/rank1_ascend_pt": (
        "marker",
        "high",
        1,
        {"unknown": 1},
        1.0,
        "training",
        "iteration",
    ),
    # torch_npu 910B, one ProfilerStep#50 per rank and level
    "ascend/msinsight_torchnpu_910B_2rank/text/level0/rank0_ascend_pt": (
        "marker",
        "high",
        1,
        {"unknown": 1},
        1.0,
        "training",
        "iteration",
    ),
    # torch_npu 910B, one ProfilerStep#50 per rank and level
    "ascend/msinsight_torchnpu_910B_2rank/text/level0/rank1_ascend_pt": (
        "marker",
        "high",
        1,
        {"unknown": 1},
        1.0,
        "training",
        "iteration",
    ),
    # torch_npu 910B, one ProfilerStep#50 per rank and level
    "ascend/msinsight_torchnpu_910B_2rank/text/level1/rank0_ascend_pt": (
        "marker",
        "high",
        1,
        {"unknown": 1},
        1.0,
        "training",
        "iteration",
    ),
    # torch_npu 910B, one ProfilerStep#50 per rank and level
    "ascend/msinsight_torchnpu_910B_2rank/text/level1/rank1_ascend_pt": (
        "marker",
        "high",
        1,
        {"unknown": 1},
        1.0,
        "training",
        "iteration",
    ),
    # torch_npu 910B, one ProfilerStep#50 per rank and level
    "ascend/msinsight_torchnpu_910B_2rank/text/level2/rank0_ascend_pt": (
        "marker",
        "high",
        1,
        {"unknown": 1},
        1.0,
        "training",
        "iteration",
    ),
    # torch_npu 910B, one ProfilerStep#50 per rank and level
    "ascend/msinsight_torchnpu_910B_2rank/text/level2/rank1_ascend_pt": (
        "marker",
        "high",
        1,
        {"unknown": 1},
        1.0,
        "training",
        "iteration",
    ),
    # 8 rows, no Step Id, each kernel once -> a single pass
    "ascend/msprof_analyze_advisor_testdata/test/resource/test.csv": (
        "whole",
        "medium",
        1,
        {"unknown": 1},
        1.0,
        "single",
        "whole window",
    ),
    # kernel_details of one step (Step Id 1)
    "ascend/msprof_analyze_advisor_testdata/test/ut/advisor/advisor_backend/compute_advice/kernel_details.csv": (
        "marker",
        "high",
        1,
        {"unknown": 1},
        1.0,
        "training",
        "iteration",
    ),
    # kernel_details of Step Id 19
    "ascend/msprof_analyze_advisor_testdata/test/ut/advisor/compute_advice/data/kernel_details.csv": (
        "marker",
        "high",
        1,
        {"unknown": 1},
        1.0,
        "unknown",
        "step",
    ),
    # one TileLang kernel run 3 times -> a micro-benchmark
    "ascend/neopan_tilelang_msprof_app_cann85/PROF_000001_20260605161708478_FRJKORBPFMHQMGLA": (
        "whole",
        "high",
        1,
        {"unknown": 1},
        1.0,
        "microbenchmark",
        "repetition",
    ),
    # one GroupedMatmul run 3 times among other kernels -> one window
    "ascend/vllm_ascend_tmp_msprof_groupedmatmul_910B/PROF_000001_20260823165413436_00626258NIRJNPIC": (
        "whole",
        "none",
        1,
        {"unknown": 1},
        1.0,
        "unknown",
        "whole window",
    ),
    # training with NCCL all-to-all on 6 streams, 5 ProfilerSteps
    "nvidia/hta-a100-80gb-world16-multistream/rank0.json.gz": (
        "marker",
        "high",
        5,
        {"unknown": 5},
        1.0,
        "training",
        "iteration",
    ),
    # PARAM AlexNet benchmark without step markers: gaps of every size are no steps -> one window
    "nvidia/hta-alexnet-a100/benchmark_result_2869224_1695835535_trace.json.gz": (
        "whole",
        "none",
        1,
        {"unknown": 1},
        1.0,
        "unknown",
        "whole window",
    ),
    # CUPTI range profiling: no kernel rows
    "nvidia/hta-cupti-profiler-range/benchmark_result_924719_1679055439_trace.json.gz": (
        "whole",
        "none",
        1,
        {"unknown": 1},
        None,
        "unknown",
        "whole window",
    ),
    # 6 kernels on 2 streams with event syncs: one sgemm repeated -> a micro-benchmark
    "nvidia/hta-event-sync-multistream/event_sync_trace.json.gz": (
        "whole",
        "high",
        1,
        {"unknown": 1},
        1.0,
        "microbenchmark",
        "repetition",
    ),
    # SGD training: 4 iterations of 28 kernels (each with its optimizer step) after a warm-up window
    "nvidia/hta-gp100-gpu-user-annotation/step_based_trace_2543932.json.gz": (
        "period",
        "medium",
        5,
        {"unknown": 5},
        1.0,
        "training",
        "iteration",
    ),
    # 4 kernels, 2022 categories, each run once -> a single pass
    "nvidia/hta-legacy-inference-cats/inference_rank_1.json.gz": (
        "whole",
        "medium",
        1,
        {"unknown": 1},
        1.0,
        "single",
        "whole window",
    ),
    # DDP training with NCCL, ProfilerStep#4-6
    "nvidia/hta-nccl-parser-a100-2rank/nccl_data.json.gz": (
        "marker",
        "high",
        3,
        {"unknown": 3},
        1.0,
        "training",
        "iteration",
    ),
    # sampled training, 2 ProfilerSteps
    "nvidia/hta-sampled-world128-multistream/sampled_rank-0.json.gz": (
        "marker",
        "high",
        2,
        {"unknown": 2},
        1.0,
        "training",
        "iteration",
    ),
    # the same, rank 1
    "nvidia/hta-sampled-world128-multistream/sampled_rank-1.json.gz": (
        "marker",
        "high",
        2,
        {"unknown": 2},
        1.0,
        "training",
        "iteration",
    ),
    # training, 6 ProfilerSteps
    "nvidia/hta-trace-diff-a100-world8/control.json.gz": (
        "marker",
        "high",
        6,
        {"unknown": 6},
        1.0,
        "training",
        "iteration",
    ),
    # one Triton kernel in one ProfilerStep
    "nvidia/hta-triton-a100/triton_example.json.gz": (
        "marker",
        "high",
        1,
        {"unknown": 1},
        1.0,
        "unknown",
        "step",
    ),
    # DDP all-reduce training, 5 ProfilerSteps
    "nvidia/hta-v100-ddp-allreduce/df_index_resolver.json.gz": (
        "marker",
        "high",
        5,
        {"unknown": 5},
        1.0,
        "training",
        "iteration",
    ),
    # training, 5 ProfilerSteps
    "nvidia/hta-v100-ns-resolution/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz": (
        "marker",
        "high",
        5,
        {"unknown": 5},
        1.0,
        "training",
        "iteration",
    ),
    # ResNet-50 training (2021 schema), ProfilerStep#5-10
    "nvidia/kineto-tbplugin-resnet50-v100-legacy/worker0.1623143089861.pt.trace.json.gz": (
        "marker",
        "high",
        6,
        {"unknown": 6},
        1.0,
        "training",
        "iteration",
    ),
    # weight-streaming simulation: the user's NVTX ranges layer_N_forward hold 99% of the work
    "nvidia/llama3-inference-nsys-sqlite-rtx4060ti/demo.sqlite": (
        "ranges",
        "high",
        8,
        {"unknown": 8},
        0.9925,
        "runs",
        "run",
    ),
    # simulated per-layer inference: the user's NVTX ranges token_N_processing, 64 of them
    "nvidia/llama3-inference-nsys-sqlite-rtx4060ti/real_inference_simulation.sqlite": (
        "ranges",
        "high",
        64,
        {"unknown": 64},
        1.0,
        "runs",
        "run",
    ),
    # nvFuser microbenchmark: 21 kernels in bursts of every size -> one window
    "nvidia/nvfuser-nsys-sqlite-h100-eos/report1.sqlite": (
        "whole",
        "none",
        1,
        {"unknown": 1},
        1.0,
        "unknown",
        "whole window",
    ),
    # the same on an H200
    "nvidia/nvfuser-nsys-sqlite-h200/report1.sqlite": (
        "whole",
        "none",
        1,
        {"unknown": 1},
        1.0,
        "unknown",
        "whole window",
    ),
    # MPI saxpy: one kernel run 5 times -> a micro-benchmark
    "nvidia/pipit-saxpy-mpi-cuda-nsys/saxpy-mpi-cuda_nsys_perlmutter0.sqlite": (
        "whole",
        "high",
        1,
        {"unknown": 1},
        1.0,
        "microbenchmark",
        "repetition",
    ),
    # HF Qwen1.5-0.5B eager forward on an H100, one ProfilerStep#6
    "nvidia/tracelens-h100-hf-qwen1.5-0.5b/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz": (
        "marker",
        "high",
        1,
        {"unknown": 1},
        0.9934,
        "unknown",
        "step",
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
    method, confidence, count, phases, share, kind, unit = EXPECTED[rel]
    a = tracekit.analyze(tracekit.load(path))
    assert (a.steps.method, a.steps.confidence, len(a.steps)) == (method, confidence, count)
    assert (a.workload.kind, a.workload.unit) == (kind, unit)
    if kind not in ("decode", "serving"):  # no decode step outside LLM serving
        assert "decode" not in phases
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
