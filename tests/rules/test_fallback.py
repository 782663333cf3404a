"""Rule ``fallback``: an eager SiLU-and-multiply chain (or AI CPU tasks on Ascend) triggers
it in every step; the clean scenario, with the fused kernel, does not."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

import tracekit
from fixtures.step_truth import step_truth
from tests.conftest import real_file
from tests.rules.scenarios import (
    ASCEND_WRITERS,
    KERNEL_ROLES,
    WRITERS,
    Analysed,
    ascend_analysed,
    truth,
)

RULE = "fallback"


@pytest.mark.parametrize("fmt", list(WRITERS))
def test_fallback_rule_reports_each_step_with_its_time(scenario: Analysed, fmt: str) -> None:
    sc, analysis = scenario(fmt, "fallback")
    want_steps = step_truth(sc, kernel_roles=KERNEL_ROLES.get(fmt, ()))
    found = [f for f in analysis.findings if f.rule == RULE]
    assert [f.step for f in found] == [0, 1, 2, 3] and len(analysis.findings) == 4
    for f, want in zip(found, want_steps):
        assert f.metrics["fallback_ns"] == want["fallback_ns"] > 0
        assert f.metrics["fallback_count"] == 3
        assert f.metrics["fallback_share"] == pytest.approx(want["fallback_share"], abs=1e-12)
    assert sum(f.metrics["fallback_ns"] for f in found) == sc.truth["fallback_ns"]


@pytest.mark.parametrize("writer", list(ASCEND_WRITERS))
def test_ai_cpu_tasks_of_the_ascend_scenario(tmp_path: Path, writer: str) -> None:
    # AI CPU tasks replace the eager chain at the same times
    found = ascend_analysed(writer, tmp_path, fallback_kernel=True).findings
    assert {f.rule for f in found} == {RULE} and len(found) == 4
    assert (
        sum(f.metrics["fallback_ns"] for f in found) == truth(fallback_kernel=True)["fallback_ns"]
    )


def test_ai_cpu_tasks_are_fallbacks() -> None:
    run = next(real_file("ascend", "mindinsight_msprof_PROF_2dev").glob("PROF_*"))
    analysis = tracekit.analyze(tracekit.load(run))
    ai_cpu = analysis.work.filter(pl.col("engine").cast(pl.String) == "ai_cpu")
    assert ai_cpu.height == 20 and ai_cpu["is_fallback"].all()
    assert "device ranges" in analysis.steps.detail and len(analysis.steps) == 10
    found = [f for f in analysis.findings if f.rule == RULE]
    in_steps = ai_cpu.filter(pl.col("step").is_not_null())
    assert sum(f.metrics["fallback_count"] for f in found) == in_steps.height
    assert sum(f.metrics["fallback_ns"] for f in found) == in_steps["dur"].sum()


@pytest.mark.parametrize("fmt", list(WRITERS))
def test_clean_scenario_has_no_fallback(scenario: Analysed, fmt: str) -> None:
    _, analysis = scenario(fmt, "clean")
    assert [f for f in analysis.findings if f.rule == RULE] == []
