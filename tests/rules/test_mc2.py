"""Rule ``mc2``: an all-reduce right after the ``o_proj`` GEMM in every layer is one finding
for the pair, its impact the all-reduces' time; each fused compute-communication operator is
one info finding with its time; the clean scenario has no pair."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

import tracekit
from fixtures.ascend_scenario import build_ascend_scenario
from fixtures.fusion import ascend_case, nvidia_case
from fixtures.scenario import KERNELS, Scenario
from tests.rules.scenarios import (
    ASCEND_CLEAN,
    ASCEND_WRITERS,
    PARTIAL_FORMATS,
    SOME_STEPS,
    WRITERS,
    Analysed,
    exposed_role_ns,
    of_rule,
    role_ns,
)
from tracekit.rules.advice import advice
from tracekit.rules.patterns import FOLDED, label
from tracekit.taxonomy import vendor_of

RULE = "mc2"
ALL_STEPS = [0, 1, 2, 3]
MC2_OPS = {  # the Ascend rendering's MC² operators, by the scenario role whose times they keep
    "dispatch": "fused: aclnnMoeDistributeDispatchV2_MoeDistributeDispatchV2_"
    "MoeDistributeDispatchV2",
    "combine": "fused: aclnnMoeDistributeCombineV2_MoeDistributeCombineV2_MoeDistributeCombineV2",
    "ar_fused": "fused: aclnnMatmulAllReduceAddRmsNorm_MatmulAllReduceAddRmsNorm_"
    "MatmulAllReduceAddRmsNorm",
}


def _unfused(found: list[tracekit.Finding]) -> list[tracekit.Finding]:
    return [f for f in found if f.pattern.startswith("unfused: ")]


def _fused(found: list[tracekit.Finding]) -> dict[str, tracekit.Finding]:
    return {f.pattern: f for f in found if f.pattern.startswith("fused: ")}


@pytest.mark.parametrize("fmt", list(WRITERS))
def test_mc2_rule_finds_the_unfused_pair_once(scenario: Analysed, fmt: str) -> None:
    sc, analysis = scenario(fmt, "unfused")
    found = of_rule(analysis, RULE)
    [f] = _unfused(found)
    assert len(sc.truth["unfused_pairs"]) == 16 and KERNELS["nccl_allreduce"].comm
    nvidia = vendor_of(analysis.timeline.meta) == "nvidia"  # ROCm renders other names
    if nvidia:
        assert f.pattern == f"unfused: {label(KERNELS['o_proj'].name)} → " + label(
            KERNELS["nccl_allreduce"].name
        )
    assert (f.steps, f.ranks) == (ALL_STEPS, [0])
    assert f.impact_ns == role_ns(sc, "nccl_allreduce")  # 16 all-reduces, 4 per step
    per_step = [role_ns(sc, "nccl_allreduce", (s,)) for s in ALL_STEPS]
    assert (f.step, f.metrics) == (
        per_step.index(max(per_step)),
        {"pairs": 4, "collective_ns": max(per_step)},
    )
    assert f.stats["count"] == dict.fromkeys(("median", "p90", "max"), 4)
    assert f.severity == "warning" and 0.01 <= f.impact_share < 0.1
    kind = "unfused_all_reduce" if nvidia else "unfused"  # RCCL's kernel: ncclDevKernel_Generic
    assert f.advice == advice(RULE, kind, vendor_of(analysis.timeline.meta), analysis.stack.ids)
    # the fused all-reduce is gone; DeepEP dispatch and combine stay, with their exposed time
    fused = _fused(found)
    assert set(fused) == {f"fused: {label(KERNELS[r].name)}" for r in ("dispatch", "combine")}
    for role in ("dispatch", "combine"):
        g = fused[f"fused: {label(KERNELS[role].name)}"]
        assert (g.steps, g.impact_ns) == (ALL_STEPS, exposed_role_ns(sc, role))
        assert 0 < g.impact_ns < g.stats["fused_ns"]["max"] * len(ALL_STEPS)
        assert g.severity == "info"  # nothing left to fuse
        assert g.advice == advice(
            RULE, "fused_moe", vendor_of(analysis.timeline.meta), analysis.stack.ids
        )


@pytest.mark.parametrize("fmt", PARTIAL_FORMATS)
def test_a_pair_in_some_steps_lists_those_steps(scenario: Analysed, fmt: str) -> None:
    sc, analysis = scenario(fmt, "unfused@some")
    [f] = _unfused(of_rule(analysis, RULE))
    assert f.steps == list(SOME_STEPS)
    assert f.impact_ns == role_ns(sc, "nccl_allreduce") == role_ns(sc, "nccl_allreduce", SOME_STEPS)
    # the fused all-reduce runs in the other steps: its finding lists them
    [ar] = [g for g in _fused(of_rule(analysis, RULE)).values() if "allreduce" in g.pattern]
    assert ar.steps == [s for s in ALL_STEPS if s not in SOME_STEPS]
    assert ar.impact_ns == exposed_role_ns(sc, "ar_fused")


@pytest.mark.parametrize("writer", list(ASCEND_WRITERS))
def test_unfused_pairs_of_the_ascend_scenario(tmp_path: Path, writer: str) -> None:
    # hcom_allReduce next to the o_proj MatMul; the MC² operators with their own time. The
    # MatMul has 64 rows (a decode batch): one MC² tile, so the pair is info, not a hint
    # (fixtures.fusion's "sequence" case has the hint, with 1,024 rows)
    sc = build_ascend_scenario(steps=4, layers=4, **{**ASCEND_CLEAN, "unfused_collective": True})
    analysis = tracekit.analyze(tracekit.load(ASCEND_WRITERS[writer](sc.events, tmp_path)))
    found = of_rule(analysis, RULE)
    assert {f.rule for f in analysis.findings} == {RULE}
    [f] = _unfused(found)
    assert f.pattern == (
        "unfused: aclnnMatmul_MatMulV3Common_MatMulV3 → hcom_allReduce (small shapes)"
    )
    assert (f.steps, f.impact_ns, f.metrics["pairs"]) == (
        ALL_STEPS,
        role_ns(sc, "nccl_allreduce"),
        4,
    )
    assert f.severity == "info"
    assert f.advice == advice(RULE, "unfused_small", "ascend", analysis.stack.ids)
    fused = _fused(found)
    assert set(fused) == {MC2_OPS["dispatch"], MC2_OPS["combine"]}
    for role in ("dispatch", "combine"):  # the AI CPU communication side is not counted again
        assert fused[MC2_OPS[role]].impact_ns == exposed_role_ns(sc, role)


@pytest.mark.parametrize("writer", list(ASCEND_WRITERS))
def test_clean_ascend_scenario_lists_its_mc2_operators(tmp_path: Path, writer: str) -> None:
    sc = build_ascend_scenario(steps=4, layers=4, **ASCEND_CLEAN)
    analysis = tracekit.analyze(tracekit.load(ASCEND_WRITERS[writer](sc.events, tmp_path)))
    found = of_rule(analysis, RULE)
    assert _unfused(found) == [] and len(found) == len(analysis.findings) == 3
    for role, pattern in MC2_OPS.items():
        f = _fused(found)[pattern]
        assert (f.steps, f.impact_ns) == (ALL_STEPS, exposed_role_ns(sc, role))
        kind = "fused" if role == "ar_fused" else "fused_moe"
        assert f.advice == advice(RULE, kind, "ascend", analysis.stack.ids)


@pytest.mark.parametrize("fmt", list(WRITERS))
def test_clean_scenario_has_no_unfused_pair(scenario: Analysed, fmt: str) -> None:
    sc, analysis = scenario(fmt, "clean")
    found = of_rule(analysis, RULE)
    assert _unfused(found) == [] and {f.severity for f in found} == {"info"}
    roles = ("ar_fused", "dispatch", "combine")
    # a fused operator costs the time it runs with no compute beside it
    assert sorted(f.impact_ns for f in found) == sorted(exposed_role_ns(sc, r) for r in roles)
    exposed = analysis.step_metrics["exposed_comm_ns"].sum()
    assert sum(f.impact_ns for f in found) == exposed  # every comm row here is fused
    if vendor_of(analysis.timeline.meta) == "nvidia":  # ROCm renders the all-reduce as AITER's
        want = {f"fused: {label(KERNELS[r].name)}": exposed_role_ns(sc, r) for r in roles}
        assert {f.pattern: f.impact_ns for f in found} == want


def test_fused_option_and_max_patterns(scenario: Analysed) -> None:
    _, analysis = scenario("nsys", "unfused")
    timeline = analysis.timeline
    [pair] = tracekit.analyze(timeline, [RULE], {RULE: {"fused": False}}).findings
    assert pair.pattern.startswith("unfused: ")
    # three patterns, two listed: the largest, then the other two folded with their sum
    top, folded = tracekit.analyze(timeline, [RULE], {RULE: {"max_patterns": 2}}).findings
    # the folded finding comes last, whatever its summed impact (see test_patterns)
    everything = of_rule(analysis, RULE)
    assert top.pattern == everything[0].pattern and folded.pattern == FOLDED
    assert folded.impact_ns == sum(f.impact_ns for f in everything[1:])
    assert folded.title.startswith("2 more patterns folded") and folded.steps == ALL_STEPS
    assert "max_patterns" in folded.detail and folded.advice


# -- fusion hints only where fusion applies (fixtures.fusion) ---------------------------------
FUSION_WRITERS = {
    "torch_npu": lambda sc, tmp: ASCEND_WRITERS["torch_npu"](sc.events, tmp),
    "kineto": lambda sc, tmp: WRITERS["kineto"](sc, tmp),
}


def _fusion(
    case: str, fmt: str, tmp: Path
) -> tuple[Scenario, list[tracekit.Finding], Callable[[str], str]]:
    """The case's scenario, its unfused-pair findings, and the advice of a kind for its
    vendor and stack."""
    sc = (ascend_case if fmt == "torch_npu" else nvidia_case)(case)
    analysis = tracekit.analyze(tracekit.load(FUSION_WRITERS[fmt](sc, tmp)), [RULE])
    vendor = vendor_of(analysis.timeline.meta)
    assert vendor == ("ascend" if fmt == "torch_npu" else "nvidia")
    return (
        sc,
        _unfused(of_rule(analysis, RULE)),
        lambda kind: advice(RULE, kind, vendor, analysis.stack.ids),
    )


def _a2a_ns(sc: Scenario, role: str, ascend: bool) -> int:
    """The summed time of the ``role`` all-to-alls: every layer's, or on Ascend the first
    layer's of each step (the layer that runs them as HCCL operators)."""
    rows = [(step, start, end - start) for start, end, _, step, r in sc.truth["a2a"] if r == role]
    if not ascend:
        return sum(d for _, _, d in rows)
    first = {step: min((s, d) for st, s, d in rows if st == step) for step, _, _ in rows}
    return sum(d for _, d in first.values())


@pytest.mark.parametrize("fmt", list(FUSION_WRITERS))
def test_a_gemm_then_its_collective_in_sequence_gets_the_fused_operator(
    tmp_path: Path, fmt: str
) -> None:
    sc, found, hint = _fusion("sequence", fmt, tmp_path)
    [f] = found
    assert len(sc.truth["pairs"]) == 16 and f.metrics["pairs"] == 4
    assert (f.steps, f.impact_ns) == (ALL_STEPS, role_ns(sc, "nccl_allreduce"))
    assert f.severity == "warning" and f.advice == hint("unfused_all_reduce")
    if fmt == "torch_npu":  # 1,024 rows: enough for MatmulAllReduce to pipeline
        assert "MatmulAllReduce" in f.advice and f.impact_ns == 397_676


@pytest.mark.parametrize("fmt", list(FUSION_WRITERS))
def test_a_gemm_running_beside_the_collective_is_no_pair(tmp_path: Path, fmt: str) -> None:
    # the all-reduce starts 1 µs before the GEMM, on a stream of its own: they run together
    _, found, _ = _fusion("concurrent", fmt, tmp_path)
    assert found == []


@pytest.mark.parametrize("fmt", list(FUSION_WRITERS))
def test_all_to_all_between_gemms_names_the_fused_moe_operator(tmp_path: Path, fmt: str) -> None:
    # dispatch before the grouped w13 GEMM, combine after the grouped w2 GEMM; on Ascend the
    # HCCL operators' Notify / Memcpy tasks sit next to them and are looked past
    sc, found, hint = _fusion("moe", fmt, tmp_path)
    ascend = fmt == "torch_npu"
    by_kind = {f.advice: f for f in found}
    dispatch = by_kind[hint("unfused_moe_dispatch")]
    combine = by_kind[hint("unfused_moe_combine")]
    assert len(found) == 2 and dispatch.steps == combine.steps == ALL_STEPS
    assert dispatch.impact_ns == _a2a_ns(sc, "dispatch", ascend)
    assert combine.impact_ns == _a2a_ns(sc, "combine", ascend)
    assert (dispatch.metrics["pairs"], combine.metrics["pairs"]) == ((1, 1) if ascend else (4, 4))
    if ascend:
        assert "AlltoAllvGroupedMatMul" in dispatch.advice
        assert "GroupedMatMulAlltoAllv" in combine.advice
        assert (dispatch.impact_ns, combine.impact_ns) == (134_628, 138_510)
        assert dispatch.pattern.startswith("unfused: hcom_alltoAllV → aclnnGroupedMatmul")
    else:
        assert (dispatch.impact_ns, combine.impact_ns) == (527_082, 571_478)


@pytest.mark.parametrize("fmt", list(FUSION_WRITERS))
def test_tiny_shapes_are_info_with_no_fusion_advice(tmp_path: Path, fmt: str) -> None:
    # the o_proj GEMM has 64 rows: one 128-row tile, nothing to overlap (Ascend: the
    # MatMul's Input Shapes; Kineto: aten::mm's Input Dims, reached by its External id)
    sc, found, hint = _fusion("small", fmt, tmp_path)
    [f] = found
    assert f.severity == "info" and f.pattern.endswith("(small shapes)")
    assert (f.impact_ns, f.metrics["pairs"]) == (role_ns(sc, "nccl_allreduce"), 4)
    assert f.advice == hint("unfused_small") and "fused" not in f.advice.split(":")[1]
    assert "MatmulAllReduce" not in f.advice and "64 rows" in f.detail and "256" in f.detail
    source = "CANN MC² tiling" if fmt == "torch_npu" else "torch.distributed._symmetric_memory"
    assert source in f.detail
