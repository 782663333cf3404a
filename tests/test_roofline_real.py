"""The roofline on real samples: on the 2-rank 910B torch_npu export the MatMul FLOPs equal a
hand computation from its own kernel_details.csv, row by row; every real sample whose trace
records shapes gets a roofline whose operators all run within what their device allows."""

from __future__ import annotations

import csv

import polars as pl
import pytest

import tracekit
from tests.conftest import real_root
from tracekit.reports.html import payload

NPU = "ascend/msinsight_torchnpu_910B_2rank/text/level1/rank0_ascend_pt"
SHAPED = [
    "nvidia/tracelens-h100-hf-qwen1.5-0.5b/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz",
    "amd/kineto_mi300x_hf_qwen1.5_0.5b_eager/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz",
    "amd/kineto_mi300x_sglang_qwen3_8b_prefill/sglang_Qwen3-8B_prefilldecode.json.gz",
    "amd/kineto_rocm_vllm_moe_prefilldecode_piecewise/graph_execution.json.gz",
    "ascend/msinsight_torchnpu_910B_2rank/db/level1/rank0_ascend_pt",
]


def _path(relative: str):
    root = real_root()
    if root is None or not (root / relative).exists():
        pytest.skip("set TRACEKIT_REAL_TRACES to the real traces")
    return root / relative


def _dims(text: str) -> list[list[int]]:
    return [[int(d) for d in part.split(",")] for part in text.strip('"').split(";") if part]


def test_matmul_flops_are_the_hand_computation_from_kernel_details() -> None:
    folder = _path(NPU)
    analysis = tracekit.analyze(tracekit.load(folder), device="910b3")
    rows = analysis.roofline.rows.filter(pl.col("op") == "MatMulV2")
    table = folder / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    want = []
    for row in csv.DictReader(table.open()):
        if row["Type"] != "MatMulV2":
            continue
        inputs, [out] = _dims(row["Input Shapes"]), _dims(row["Output Shapes"])
        m, n = out  # the weight may be stored [n, k]: k is the input's dimension that is not m
        a = inputs[0]
        k = a[1] if a[0] == m else a[0]
        bias = len(inputs) > 2
        want.append(2 * m * n * k + (m * n if bias else 0))
    assert len(want) == 8
    assert sorted(rows["flops"].to_list()) == sorted(float(f) for f in want)


@pytest.mark.parametrize("relative", SHAPED)
def test_every_shaped_real_sample_runs_within_its_roofline_or_says_so(relative: str) -> None:
    """On the GPUs every operator runs within its HBM roofline; on the 910B, fp32 ResNet
    operators whose data stays in its on-chip L2 run faster than HBM allows: the check says
    so, and names the generic device name too."""
    analysis = tracekit.analyze(tracekit.load(_path(relative)))
    ops = analysis.roofline.operators.filter(pl.col("efficiency").is_not_null())
    assert ops.height > 0
    [check] = [c for c in analysis.checks if c.name == "roofline.devices"]
    fast = ops.filter((pl.col("efficiency") > 1.1) & (pl.col("time_ns") >= 10_000))
    if relative.startswith("ascend"):
        assert fast.height == 11 and check.status == "warn"
        assert "names no variant" in check.detail and "ran faster than" in check.detail
    else:
        assert ops["efficiency"].max() <= 1.0 and check.status == "pass"
    # copies to or from the host cross a link, not HBM: never bounded by it
    copies = analysis.roofline.rows.filter(pl.col("name").cast(pl.String).str.contains("Memcpy"))
    assert copies.filter(~pl.col("name").cast(pl.String).str.contains("DtoD")).height == 0


def test_the_chart_draws_the_roofs_of_the_one_model_a_trace_names() -> None:
    """The MI300X Qwen trace lists device 0 in deviceProperties and runs its kernels on
    device 2: the chart still draws the MI300X's roofs for them."""
    analysis = tracekit.analyze(tracekit.load(_path(SHAPED[1])))
    [part] = payload([analysis])["traces"][0]["roofline"]["parts"]
    assert part["hbm_gbps"] == 5300 and part["devices"] == [2] and part["roofs"]
