"""Rule ``efficiency`` on the one-operator-per-family Kineto fixture (an H200): a bf16 decode
GEMM at 42 % of its memory roof triggers one finding with its exact headroom; the same GEMM
at 91 % does not; a trace without shapes gets none."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

import tracekit
from fixtures.kineto_writer import write_kineto_json
from fixtures.shaped_ops import TORCH_OPS, TORCH_TRUTH, torch_events
from tracekit.rules.advice import advice

H200_GBPS = 4800  # HBM3e, devices.toml h200-sxm
PATTERN = "gemm: aten::mm"


def _analysed(tmp: Path, mm_ns: int) -> tracekit.Analysis:
    """The fixture with the ``aten::mm`` kernel lasting ``mm_ns``."""
    _, kernel = TORCH_OPS["mm"]
    events = torch_events()
    mm = (pl.col("kind") == "kernel") & (pl.col("name") == kernel)
    first = events.filter(mm)["corr"].min()
    events = events.with_columns(
        dur=pl.when(mm & (pl.col("corr") == first)).then(mm_ns).otherwise("dur")
    )
    return tracekit.analyze(tracekit.load(write_kineto_json(events, tmp / "t.json")))


def test_a_slow_decode_gemm_triggers_with_its_headroom(tmp_path: Path) -> None:
    analysis = _analysed(tmp_path, 15_000)
    [finding] = [f for f in analysis.findings if f.pattern == PATTERN]
    bound = TORCH_TRUTH["mm"]["bytes"] / H200_GBPS  # memory-bound: 6,362.5 ns
    assert finding.rule == "efficiency"
    assert finding.impact_ns == round(15_000 - bound) == 8_638
    assert finding.metrics["efficiency"] == pytest.approx(bound / 15_000)
    assert finding.evidence["limit"] == "memory-bound"
    assert finding.evidence["shapes"][0]["shapes"] == "64×7168, 7168×2048 bf16"
    # vLLM's custom operators (_C::silu_and_mul, _C::paged_attention_v1) name the engine
    assert "vllm" in analysis.stack.ids and "--max-num-seqs" in finding.advice
    assert finding.severity == "warning"  # 8.6 µs of a step of about 0.4 ms


def test_a_gemm_near_its_roof_is_clean(tmp_path: Path) -> None:
    analysis = _analysed(tmp_path, 7_000)
    assert not [f for f in analysis.findings if f.pattern == PATTERN]
    [row] = analysis.roofline.operators.filter(pl.col("op") == "aten::mm").to_dicts()
    assert row["efficiency"] == pytest.approx(TORCH_TRUTH["mm"]["bytes"] / H200_GBPS / 7_000)


def test_no_shapes_no_finding(tmp_path: Path) -> None:
    events = torch_events().with_columns(args=pl.lit(None, pl.String))
    analysis = tracekit.analyze(tracekit.load(write_kineto_json(events, tmp_path / "t.json")))
    assert analysis.roofline.rows.height == 0
    assert not [f for f in analysis.findings if f.rule == "efficiency"]


def test_a_launch_whose_bound_is_under_a_microsecond_is_latency_bound(tmp_path: Path) -> None:
    """_C::rms_norm [64, 7168] moves 1.85 MB: 385 ns at 4.8 TB/s, less than a kernel's launch
    and start-up cost; the decode GEMM's 6.4 µs are bandwidth."""
    ops = _analysed(tmp_path, 15_000).roofline.operators
    limits = dict(ops.select("op", "limit").iter_rows())
    assert (
        TORCH_TRUTH["rms_norm"]["bytes"] / H200_GBPS
        < 1_000
        < TORCH_TRUTH["mm"]["bytes"] / H200_GBPS
    )
    assert limits["_C::rms_norm"] == "latency" and limits["aten::mm"] == "memory"


def test_ascend_serving_gets_ascend_advice_not_the_gpu_engine_flags() -> None:
    """vLLM on a 910B (vllm-ascend): the GPU builds' flags (--quantization fp8, FP8 KV cache,
    the fused-MoE tuning script) do not apply; the CANN operators do."""
    stack = frozenset({"vllm", "vllm-ascend", "torch_npu", "pytorch"})
    gemm = advice("efficiency", "gemm_memory", "ascend", stack)
    attention = advice("efficiency", "attention_memory", "ascend", stack)
    assert "WeightQuantBatchMatmulV2" in gemm and "--quantization" not in gemm
    assert "FusedInferAttentionScore" in attention and "fp8" not in attention
    assert "--max-num-seqs" in advice("efficiency", "gemm_memory", "nvidia", stack)
