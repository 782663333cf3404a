"""Rule ``overlap``: a dispatch left without the shared expert beside it triggers it, one
finding for the dispatch listing the steps where it ran exposed; the clean scenario, where
every dispatch is overlapped, does not."""

from __future__ import annotations

from pathlib import Path

import pytest

from fixtures.step_truth import step_truth
from tests.rules.scenarios import (
    ASCEND_WRITERS,
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

RULE = "overlap"
MC2_DISPATCH = "aclnnMoeDistributeDispatchV2_MoeDistributeDispatchV2_MoeDistributeDispatchV2"


@pytest.mark.parametrize("fmt", list(WRITERS))
def test_overlap_rule_finds_the_exposed_dispatch(scenario: Analysed, fmt: str) -> None:
    sc, analysis = scenario(fmt, "exposed")
    [(start, end)] = sc.truth["exposed_dispatch"]
    [f] = of_rule(analysis, RULE)
    assert (f.pattern, f.steps, f.ranks) == ("deep_ep::internode_ll::dispatch", [2], [0])
    assert f.impact_ns == f.metrics["exposed_ns"] == end - start
    assert (f.step, f.metrics["count"]) == (2, 1)
    assert f.metrics["exposed_comm_ns"] == step_truth(sc)[2]["exposed_comm_ns"]
    assert f.stats["exposed_ns"] == dict.fromkeys(("median", "p90", "max"), end - start)
    [[first, last]] = f.evidence["ranges"]  # parsers rebase time; durations stay
    assert last - first == end - start
    assert f.advice == advice(
        RULE, "all_to_all", vendor_of(analysis.timeline.meta), analysis.stack.ids
    )
    assert f.severity == "info" and f.impact_share < 0.01  # one dispatch in four steps


@pytest.mark.parametrize("fmt", PARTIAL_FORMATS)
def test_a_dispatch_exposed_in_some_steps_lists_those_steps(scenario: Analysed, fmt: str) -> None:
    sc, analysis = scenario(fmt, "exposed@some")
    spans = sc.truth["exposed_dispatch"]
    [f] = of_rule(analysis, RULE)
    assert f.steps == list(SOME_STEPS) and len(spans) == len(SOME_STEPS)
    assert f.impact_ns == sum(end - start for start, end in spans)
    assert f.metrics["exposed_ns"] == max(end - start for start, end in spans)
    assert f.stats["exposed_ns"]["max"] == f.metrics["exposed_ns"]


@pytest.mark.parametrize("writer", list(ASCEND_WRITERS))
def test_exposed_dispatch_of_the_ascend_scenario(tmp_path: Path, writer: str) -> None:
    # the exposed MoeDistributeDispatchV2 and its Aicpu side are one transfer, counted once
    [(start, end)] = truth(exposed_all_to_all=True)["exposed_dispatch"]
    analysis = ascend_analysed(writer, tmp_path, exposed_all_to_all=True)
    [f] = of_rule(analysis, RULE)
    assert (f.pattern, f.steps, f.impact_ns) == (MC2_DISPATCH, [2], end - start)
    assert f.metrics["count"] == 1 and len(f.evidence["names"]) == 2
    assert (
        f.advice == advice(RULE, "all_to_all", "ascend", analysis.stack.ids) and "MC²" in f.advice
    )


@pytest.mark.parametrize("fmt", list(WRITERS))
def test_clean_scenario_has_no_exposed_communication(scenario: Analysed, fmt: str) -> None:
    _, analysis = scenario(fmt, "clean")
    assert of_rule(analysis, RULE) == []
