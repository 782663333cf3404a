"""Rule ``overlap``: a dispatch left without the shared expert beside it triggers it, one
finding for the dispatch listing the steps where it ran exposed; the clean scenario, where
every dispatch is overlapped, does not. A gradient all-reduce that is never overlapped is
one finding of its own (impact its planted time, its Notify_Wait quarter on Ascend), unless
it runs beside the LM head, holds less than ``min_share`` of the step, or is mc2's pair."""

from __future__ import annotations

from pathlib import Path

import pytest

import tracekit
from fixtures.cluster_scenario import Late, build_cluster
from fixtures.cluster_writers import write_kineto_cluster
from fixtures.scenario import build_scenario
from fixtures.step_truth import step_truth
from tests.rules.scenarios import (
    ASCEND_WRITERS,
    PARTIAL_FORMATS,
    SOME_STEPS,
    WRITERS,
    Analysed,
    analysed,
    ascend_analysed,
    exposed_role_ns,
    of_rule,
    role_ns,
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


# -- never overlapped: a gradient all-reduce at the end of every step with nothing beside it --
GRAD_NS = 40_000  # the planted all-reduce's time, a multiple of 4 (HCCL's four plane tasks)
GRAD = {"grad_all_reduce_ns": GRAD_NS}
HIDDEN = {**GRAD, "grad_all_reduce_overlapped": True}
NEVER_KIND = {"nsys": "exposed_all_reduce", "rocpd": "exposed"}  # RCCL's Generic kernel


@pytest.mark.parametrize("fmt", PARTIAL_FORMATS)
def test_a_never_overlapped_all_reduce_is_one_finding(tmp_path: Path, fmt: str) -> None:
    sc, analysis = analysed(fmt, GRAD, tmp_path)
    spans = sc.truth["grad_all_reduces"]
    assert [end - start for start, end in spans] == [GRAD_NS] * 4  # one per step
    [f] = of_rule(analysis, RULE)
    total = analysis.step_metrics["dur"].sum()
    assert f.impact_ns == 4 * GRAD_NS == exposed_role_ns(sc, "nccl_allreduce")
    assert f.impact_share == 4 * GRAD_NS / total and 0.02 < f.impact_share < 0.1
    assert (f.steps, f.ranks, f.severity) == ([0, 1, 2, 3], [0], "warning")
    assert f.metrics["exposed_ns"] == f.metrics["comm_ns"] == GRAD_NS
    assert (f.metrics["count"], f.metrics["overlap_ratio"]) == (1, 0.0)
    assert f.stats["exposed_ns"] == dict.fromkeys(("median", "p90", "max"), GRAD_NS)
    assert f.metrics["wait_ns"] is None and f.metrics["peer_wait_ns"] is None  # one rank
    assert "does not show how much of that waited for peers" in f.detail
    assert f.title.startswith(f"{f.pattern} never overlapped with compute: 160,000 ns")
    [[first, last]] = f.evidence["ranges"]
    assert last - first == GRAD_NS
    kind = NEVER_KIND[fmt]
    assert f.advice == advice(RULE, kind, vendor_of(analysis.timeline.meta), analysis.stack.ids)


def test_min_share_decides_whether_it_is_reported(tmp_path: Path) -> None:
    sc = build_scenario(steps=4, layers=4, **GRAD)
    timeline = tracekit.load(WRITERS["nsys"](sc, tmp_path))
    share = 4 * GRAD_NS / tracekit.analyze(timeline, ["overlap"]).step_metrics["dur"].sum()
    for min_share, found in ((share * 0.99, 1), (share * 1.01, 0)):
        analysis = tracekit.analyze(timeline, ["overlap"], {"overlap": {"min_share": min_share}})
        assert len(analysis.findings) == found


@pytest.mark.parametrize("fmt", PARTIAL_FORMATS)
def test_an_overlapped_all_reduce_is_no_finding(tmp_path: Path, fmt: str) -> None:
    sc, analysis = analysed(fmt, HIDDEN, tmp_path)
    assert len(sc.truth["grad_all_reduces"]) == 4
    assert exposed_role_ns(sc, "nccl_allreduce") < 0.1 * 4 * GRAD_NS  # the LM head hides it
    assert of_rule(analysis, RULE) == []


def test_a_pair_for_mc2_is_not_counted_again(tmp_path: Path) -> None:
    # the o_proj -> all-reduce pair of every layer is mc2's; the gradient all-reduce of the
    # same kernel name at the end of the step, next to no GEMM, is this rule's alone
    sc, analysis = analysed("nsys", {**GRAD, "unfused_collective": True}, tmp_path)
    [f] = of_rule(analysis, RULE)
    assert f.impact_ns == 4 * GRAD_NS and f.metrics["count"] == 1
    [pair] = [p for p in of_rule(analysis, "mc2") if p.pattern.startswith("unfused: ")]
    assert pair.impact_ns == role_ns(sc, "nccl_allreduce") - 4 * GRAD_NS  # the pairs' time


@pytest.mark.parametrize("writer", list(ASCEND_WRITERS))
def test_never_overlapped_hccl_all_reduce_with_its_notify_wait(tmp_path: Path, writer: str) -> None:
    analysis = ascend_analysed(writer, tmp_path, **GRAD)
    [f] = of_rule(analysis, RULE)
    assert (f.pattern, f.steps, f.impact_ns) == ("hcom_allReduce", [0, 1, 2, 3], 4 * GRAD_NS)
    # its Notify_Wait task tiles the second quarter, beside no copy or reduction of its own
    assert f.metrics["wait_ns"] == GRAD_NS // 4 and f.stats["wait_ns"]["median"] == GRAD_NS // 4
    assert f"{GRAD_NS // 4:,} ns of that only waited on notifies" in f.detail
    assert f.advice == advice(RULE, "exposed_all_reduce", "ascend", analysis.stack.ids)
    assert "HCCL" in f.advice
    hidden = ascend_analysed(writer, tmp_path / "hidden", **HIDDEN)
    assert of_rule(hidden, RULE) == []


def test_peer_waits_are_those_of_its_own_launches(tmp_path: Path) -> None:
    # two ranks, rank 1 late by 30 us in step 2 at the delayed collective: an o_proj
    # all-reduce (mc2's pair), so rank 0's gradient all-reduces, matched across the ranks,
    # waited for nobody and the finding claims none of that step's sync wait
    cluster = build_cluster(2, steps=4, late=[Late(1, 2, 30_000)], **GRAD)
    analysis = tracekit.analyze(tracekit.load(write_kineto_cluster(cluster, tmp_path / "nv")))
    metrics = analysis.step_metrics.select("rank", "step", "sync_wait_ns")
    waits = {(rank, step): ns for rank, step, ns in metrics.iter_rows()}
    assert waits[0, 2] == 30_000 and sum(waits.values()) == 30_000
    [f] = of_rule(analysis, RULE)
    assert (f.impact_ns, f.ranks) == (2 * 4 * GRAD_NS, [0, 1])
    assert f.metrics["peer_wait_ns"] == 0 and f.stats["peer_wait_ns"]["max"] == 0
    assert "0 ns of that waited for the last rank to arrive" in f.detail
