"""Rule ``fallback``: an eager SiLU-and-multiply chain (or AI CPU tasks on Ascend) in every
step is one finding listing every step, its impact the chain's time over them; the clean
scenario, with the fused kernel, has none."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

import tracekit
from fixtures.scenario import build_scenario
from fixtures.step_truth import step_truth
from tests.conftest import real_file
from tests.rules.scenarios import (
    ASCEND_WRITERS,
    KERNEL_ROLES,
    PARTIAL_FORMATS,
    SOME_STEPS,
    WRITERS,
    Analysed,
    ascend_analysed,
    of_rule,
    truth,
)
from tracekit.rules.advice import advice
from tracekit.taxonomy import vendor_of

RULE = "fallback"
EAGER_CHAIN = (
    "unrolled_elementwise_kernel<direct_copy_kernel_cuda> → "
    "vectorized_elementwise_kernel<silu_kernel> → vectorized_elementwise_kernel<MulFunctor>"
)
AI_CPU_CHAIN = "trans_Cast → aclnnSilu_SiluAiCpu_Silu → aclnnMul_MulAiCpu_Mul"


@pytest.mark.parametrize("fmt", list(WRITERS))
def test_one_chain_is_one_finding_over_every_step(scenario: Analysed, fmt: str) -> None:
    sc, analysis = scenario(fmt, "fallback")
    want = step_truth(sc, kernel_roles=KERNEL_ROLES.get(fmt, ()))
    per_step = [w["fallback_ns"] for w in want]
    [f] = of_rule(analysis, RULE)
    assert (f.steps, f.ranks) == ([0, 1, 2, 3], [0])
    assert f.impact_ns == sum(per_step) == sc.truth["fallback_ns"] > 0
    worst = max(range(4), key=per_step.__getitem__)
    assert (f.step, f.rank, f.device) == (worst, 0, 0)
    assert f.metrics["fallback_ns"] == per_step[worst]
    assert (f.metrics["chains"], f.metrics["kernels"]) == (1, 3)
    assert f.metrics["step_share"] == pytest.approx(per_step[worst] / want[worst]["dur"])
    _, mid1, mid2, high = sorted(per_step)
    assert f.stats["fallback_ns"] == {
        "median": (mid1 + mid2) / 2,
        "p90": pytest.approx(mid2 + 0.7 * (high - mid2)),  # linear, at 0.9 * (4 - 1)
        "max": high,
    }
    assert len(f.evidence["ranges"]) == 1 and len(f.evidence["names"]) == 3
    if fmt in ("nsys", "kineto"):  # rocprofiler renders the chain with ROCm's kernel names
        assert f.pattern == EAGER_CHAIN
    assert f.severity == "warning" and 0.01 <= f.impact_share < 0.1
    assert f.advice == advice(RULE, "eager", vendor_of(analysis.timeline.meta))
    assert "torch.compile" in f.advice


@pytest.mark.parametrize("fmt", PARTIAL_FORMATS)
def test_a_chain_in_some_steps_lists_those_steps(scenario: Analysed, fmt: str) -> None:
    sc, analysis = scenario(fmt, "fallback@some")
    per_step = [w["fallback_ns"] for w in step_truth(sc, kernel_roles=KERNEL_ROLES.get(fmt, ()))]
    [f] = of_rule(analysis, RULE)
    assert f.steps == list(SOME_STEPS) == [s for s, ns in enumerate(per_step) if ns]
    assert f.impact_ns == sum(per_step) == sc.truth["fallback_ns"]
    assert f.step in SOME_STEPS and f.metrics["fallback_ns"] == max(per_step)


@pytest.mark.parametrize("writer", list(ASCEND_WRITERS))
def test_ai_cpu_chain_of_the_ascend_scenario(tmp_path: Path, writer: str) -> None:
    # AI CPU tasks replace the eager chain at the same times
    analysis = ascend_analysed(writer, tmp_path, fallback_kernel=True)
    [f] = of_rule(analysis, RULE)
    assert f.pattern == AI_CPU_CHAIN and f.steps == [0, 1, 2, 3]
    assert f.impact_ns == truth(fallback_kernel=True)["fallback_ns"]
    assert f.advice == advice(RULE, "ai_cpu_cast", "ascend") and "AI Core" in f.advice
    others = [g for g in analysis.findings if g.rule != RULE]
    assert {(g.rule, g.severity) for g in others} == {("mc2", "info")}  # fused operators


def test_ai_cpu_tasks_are_fallbacks() -> None:
    run = next(real_file("ascend", "mindinsight_msprof_PROF_2dev").glob("PROF_*"))
    analysis = tracekit.analyze(tracekit.load(run))
    ai_cpu = analysis.work.filter(pl.col("engine").cast(pl.String) == "ai_cpu")
    assert ai_cpu.height == 20 and ai_cpu["is_fallback"].all()
    assert "device ranges" in analysis.steps.detail and len(analysis.steps) == 10
    found = of_rule(analysis, RULE)
    in_steps = ai_cpu.filter(pl.col("step").is_not_null())
    assert sum(f.impact_ns for f in found) == in_steps["dur"].sum()
    assert {s for f in found for s in f.steps} == set(in_steps["step"].to_list())
    assert len({f.pattern for f in found}) == len(found) < in_steps.height
    texts = {advice(RULE, kind, "ascend") for kind in ("ai_cpu", "ai_cpu_cast")}
    assert {f.advice for f in found} <= texts


@pytest.mark.parametrize("fmt", list(WRITERS))
def test_clean_scenario_has_no_fallback(scenario: Analysed, fmt: str) -> None:
    _, analysis = scenario(fmt, "clean")
    assert of_rule(analysis, RULE) == []


def test_min_share_silences_small_chains(tmp_path: Path) -> None:
    sc = build_scenario(steps=4, layers=4, fallback_kernel=True)
    timeline = tracekit.load(WRITERS["nsys"](sc, tmp_path))
    [f] = tracekit.analyze(timeline, [RULE]).findings
    assert tracekit.analyze(timeline, [RULE], {RULE: {"min_share": f.impact_share}}).findings == []
