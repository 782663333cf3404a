"""Rule ``overlap``: a dispatch left without the shared expert beside it in one step triggers
it; the clean scenario, where every dispatch is overlapped, does not."""

from __future__ import annotations

from pathlib import Path

import pytest

from fixtures.step_truth import step_truth
from tests.rules.scenarios import ASCEND_WRITERS, WRITERS, Analysed, ascend_analysed, truth

RULE = "overlap"


@pytest.mark.parametrize("fmt", list(WRITERS))
def test_overlap_rule_finds_the_exposed_dispatch(scenario: Analysed, fmt: str) -> None:
    sc, analysis = scenario(fmt, "exposed")
    [(start, end)] = sc.truth["exposed_dispatch"]
    [finding] = analysis.findings
    assert (finding.rule, finding.step) == (RULE, 2)
    assert finding.metrics["exposed_ns"] == end - start
    assert finding.metrics["count"] == 1
    assert finding.metrics["exposed_comm_ns"] == step_truth(sc)[2]["exposed_comm_ns"]


@pytest.mark.parametrize("writer", list(ASCEND_WRITERS))
def test_exposed_dispatch_of_the_ascend_scenario(tmp_path: Path, writer: str) -> None:
    # the exposed MoeDistributeDispatchV2 (and its Aicpu side) count once
    [(start, end)] = truth(exposed_all_to_all=True)["exposed_dispatch"]
    [f] = ascend_analysed(writer, tmp_path, exposed_all_to_all=True).findings
    assert (f.rule, f.step, f.metrics["exposed_ns"]) == (RULE, 2, end - start)


@pytest.mark.parametrize("fmt", list(WRITERS))
def test_clean_scenario_has_no_exposed_communication(scenario: Analysed, fmt: str) -> None:
    _, analysis = scenario(fmt, "clean")
    assert [f for f in analysis.findings if f.rule == RULE] == []
