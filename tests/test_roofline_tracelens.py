"""Side by side with TraceLens on the trace TraceLens tests itself with (its
``tests/traces/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz``, the same bytes as the real
sample here): for every GEMM both tools model, the FLOPs are equal and the achieved TFLOP/s
agree within 1 %.

The TraceLens numbers are its perf report's ``GEMM.csv`` / ``SDPA_fwd.csv`` for that trace
(AMD-AGI/TraceLens commit 171dd74721ca1ec45709e5805b68ae1f65e27811, ``TraceLens_generate_
perf_report_pytorch``): FLOPs per call, launches, summed kernel time (µs) and the mean of the
per-launch TFLOP/s. TraceLens times an operator by the union of its device events (the cuBLAS
memset included), tracekit by the sum of its device rows' durations: the same here, where the
memset and the GEMM never overlap.
"""

from __future__ import annotations

import polars as pl
import pytest

import tracekit
from tests.conftest import real_root

TRACE = "nvidia/tracelens-h100-hf-qwen1.5-0.5b/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"
# (op, tracekit's shapes text): TraceLens GFLOP per call, launches, summed kernel µs, TFLOP/s
TRACELENS_GEMMS = {
    ("aten::mm", "8944×1024, 1024×2816 bf16"): (51.581550592, 48, 4055.25244140625, 610.6657),
    ("aten::addmm", "1024, 8944×1024, 1024×1024 bf16"): (18.766086144, 72, 2329.0759277, 580.1844),
    ("aten::mm", "8944×2816, 2816×1024 bf16"): (51.581550592, 24, 1835.287109375, 674.5510),
    ("aten::mm", "8944×1024, 1024×1024 bf16"): (18.756927488, 24, 778.14208984375, 578.5261),
    ("aten::bmm", "1×32×1, 1×1×559 fp32"): (3.5776e-05, 1, 3.52001953125, 0.010163580),
}  # fmt: skip


@pytest.fixture(scope="module")
def operators() -> pl.DataFrame:
    root = real_root()
    if root is None or not (root / TRACE).is_file():
        pytest.skip("set TRACEKIT_REAL_TRACES to the real traces")
    return tracekit.analyze(tracekit.load(root / TRACE)).roofline.operators


@pytest.mark.parametrize(("op", "shapes"), list(TRACELENS_GEMMS))
def test_gemm_flops_equal_and_tflops_within_one_percent(
    operators: pl.DataFrame, op: str, shapes: str
) -> None:
    gflop, launches, kernel_us, tflops = TRACELENS_GEMMS[(op, shapes)]
    [row] = operators.filter((pl.col("op") == op) & (pl.col("shapes") == shapes)).to_dicts()
    assert row["family"] == "gemm" and row["launches"] == launches  # calls, not device rows
    assert row["flops"] == pytest.approx(gflop * 1e9 * launches, rel=1e-12)  # equal FLOPs
    assert row["time_ns"] == pytest.approx(kernel_us * 1e3, abs=launches)  # ns-rounded sums
    assert row["tflops"] == pytest.approx(tflops, rel=0.01)


def test_causal_attention_counts_the_unmasked_pairs(operators: pl.DataFrame) -> None:
    """TraceLens halves a causal score matrix (sq * sk / 2 pairs); tracekit counts the
    unmasked pairs, sq * (sq + 1) / 2: 1 + 1/559 times as many at 559 tokens."""
    [row] = operators.filter(pl.col("family") == "attention").to_dicts()
    tracelens_gflop, launches = 10.239377408, 24
    assert row["flops"] == 2 * 16 * 16 * (559 * 560 // 2) * (64 + 64) * launches
    assert row["flops"] / (tracelens_gflop * 1e9 * launches) == pytest.approx(560 / 559)
