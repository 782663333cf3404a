"""The workload rules on small synthetic timelines, each the shape of a real trace that once
read wrong: a micro-benchmark of a decode attention kernel, an eager decode found by its
period with no decode attention kernel, many repeated range names beside the user's runs, a
kernel whose name only looks like an optimizer's."""

from __future__ import annotations

from typing import Any

import tracekit
from tracekit.timeline import Timeline, build_table

COLUMNS = ("ts", "dur", "kind", "name", "device", "stream", "pid", "tid", "corr")


class Rows:
    """Timeline columns built row by row (one host thread, device 0, stream 7)."""

    def __init__(self) -> None:
        self.columns: dict[str, list[Any]] = {k: [] for k in COLUMNS}

    def add(self, ts: int, dur: int, kind: str, name: str, device: int, corr: int | None) -> None:
        values = (ts, dur, kind, name, device, 7 if device >= 0 else None, 1, 1, corr)
        for key, value in zip(COLUMNS, values):
            self.columns[key].append(value)

    def launch(self, ts: int, name: str, dur: int, corr: int) -> None:
        self.add(ts, 2_000, "api", "cudaLaunchKernel", -1, corr)
        self.add(ts + 1_000, dur, "kernel", name, 0, corr)

    def analysis(self) -> tracekit.Analysis:
        return tracekit.analyze(Timeline(build_table(self.columns), {"format": "nsys-sqlite"}))


def test_a_benchmark_of_a_decode_kernel_is_a_benchmark_not_a_decode() -> None:
    """vLLM's benchmark_paged_attention.py: one decode attention kernel, 100 times."""
    rows = Rows()
    for i in range(100):
        rows.launch(i * 50_000, "void vllm::paged_attention_v1_kernel<bf16>", 20_000, i)
    a = rows.analysis()
    assert (a.workload.kind, a.workload.unit, a.steps.method) == (
        "microbenchmark",
        "repetition",
        "whole",
    )
    assert a.workload.repetitions[0]["count"] == 100
    assert a.workload.repetitions[0]["median_ns"] == 20_000
    assert a.steps.ranges["phase"].to_list() == [None]


def test_an_eager_decode_is_decode_by_its_sampling_once_a_step() -> None:
    """FA2's split-KV kernel says no phase; an argmax sampling kernel closes every step."""
    layer = ["ampere_bf16_s16816gemm_qkv", "void flash::flash_fwd_splitkv_kernel<traits>",
             "ampere_bf16_s16816gemm_o", "rms_norm_kernel", "act_and_mul_kernel"]  # fmt: skip
    tail = ["ampere_bf16_s16816gemm_lmhead", "reduce_kernel<ReduceOp<float, ArgMaxOps<float>>>"]
    rows, t, corr = Rows(), 0, 0
    for _ in range(30):
        for name in ["embedding_kernel", *layer * 8, *tail]:
            rows.launch(t, name, 8_000 if "gemm" in name else 3_000, corr)
            t, corr = t + 9_000, corr + 1
        t += 60_000
    a = rows.analysis()
    assert (a.steps.method, len(a.steps)) == ("period", 30)
    assert a.steps.ranges["phase"].to_list() == ["decode"] * 30
    assert (a.workload.kind, a.workload.unit, a.workload.confidence) == (
        "decode",
        "decode step",
        "medium",
    )
    assert a.steps.phase_method == "sampling"


def test_the_users_runs_win_over_many_other_repeated_names() -> None:
    """20 ``iteration N`` ranges hold the kernels; 70 other names repeat twice each."""
    rows, corr = Rows(), 0
    for s in range(20):
        t0 = s * 1_000_000
        rows.add(t0, 900_000, "range", f"iteration {s}", -1, None)
        for j in range(30):
            rows.launch(t0 + j * 20_000, f"kernel_{j}", 15_000, corr)
            corr += 1
    for g in range(70):
        for r in range(2):
            rows.add(30_000_000 + g * 10_000 + r * 1_000, 500, "range", f"misc_{g:03x}z", -1, None)
    a = rows.analysis()
    assert (a.steps.method, len(a.steps), a.workload.kind, a.workload.unit) == (
        "ranges",
        20,
        "runs",
        "run",
    )
    assert a.steps.ranges["label"].to_list() == [f"iteration {s}" for s in range(20)]


def test_a_name_that_only_looks_like_an_optimizer_is_no_training() -> None:
    """``LoadAMatrix`` holds "adam" in any case; ``lambda`` holds "lamb"."""
    rows = Rows()
    names = ["LoadAMatrix_kernel", "elementwise_kernel<[lambda(int)]>", "gemm_x", "softmax_y"]
    for i in range(40):
        rows.launch(i * 20_000, names[i % 4], 10_000, i)
    assert rows.analysis().workload.kind != "training"
