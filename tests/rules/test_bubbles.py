"""Rule ``bubbles``: a 150 µs host stall before a layer triggers it, one finding for the
stall (cause, kernel before, kernel after) listing the steps where it happens; the clean
scenario, launched back to back, does not."""

from __future__ import annotations

from pathlib import Path

import pytest

import tracekit
from fixtures.step_truth import step_truth
from tests.rules.scenarios import (
    PARTIAL_FORMATS,
    SOME_STEPS,
    WRITERS,
    Analysed,
    ascend_analysed,
    of_rule,
    truth,
)
from tests.test_steps import _api, _df, _kernel, _range
from tracekit.metrics.bubbles import attributed_bubbles
from tracekit.rules.advice import advice
from tracekit.taxonomy import vendor_of
from tracekit.timeline import COLUMNS, Timeline, build_table

RULE = "bubbles"
GRAPHS = {"nvidia": "CUDA graphs", "amd": "HIP graphs", "ascend": "ACL graphs"}


@pytest.mark.parametrize("fmt", list(WRITERS))
def test_bubbles_rule_finds_the_host_stall(scenario: Analysed, fmt: str) -> None:
    sc, analysis = scenario(fmt, "bubble")
    [(drained, resume)] = sc.truth["bubbles"]
    [f] = of_rule(analysis, RULE)
    assert (f.steps, f.step, f.ranks) == ([2], 2, [0])
    assert f.impact_ns == f.metrics["largest_bubble_ns"] == resume - drained == 150_000
    assert f.pattern.startswith("host-bound: launch: deep_ep::internode_ll::combine → ")
    assert f.metrics["bubble_count"] == 1 and f.evidence["causes"] == ["host-bound: launch"]
    assert f.metrics["bubble_share"] == pytest.approx(150_000 / step_truth(sc)[2]["dur"])
    vendor = vendor_of(analysis.timeline.meta)
    assert (
        f.advice == advice(RULE, "host_launch", vendor, analysis.stack.ids)
        and GRAPHS[vendor] in f.advice
    )


@pytest.mark.parametrize("fmt", PARTIAL_FORMATS)
def test_a_stall_in_some_steps_lists_those_steps(scenario: Analysed, fmt: str) -> None:
    # the same stall in two of four steps: one finding, impact exactly twice the stall
    sc, analysis = scenario(fmt, "bubble@some")
    stalls = [resume - drained for drained, resume in sc.truth["bubbles"]]
    [f] = of_rule(analysis, RULE)
    assert f.steps == list(SOME_STEPS) and stalls == [150_000] * len(SOME_STEPS)
    assert f.impact_ns == len(SOME_STEPS) * 150_000
    assert f.stats["bubble_ns"] == dict.fromkeys(("median", "p90", "max"), 150_000)


def test_bubble_on_torch_npu_output(tmp_path: Path) -> None:
    [(drained, resume)] = truth(idle_bubble_ns=150_000)["bubbles"]
    analysis = ascend_analysed("torch_npu", tmp_path, idle_bubble_ns=150_000)
    [f] = of_rule(analysis, RULE)
    assert (f.steps, f.impact_ns, f.metrics["largest_bubble_ns"]) == ([2], *[resume - drained] * 2)
    assert (
        f.advice == advice(RULE, "host_launch", "ascend", analysis.stack.ids)
        and GRAPHS["ascend"] in f.advice
    )


def test_bubble_causes() -> None:
    nccl = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
    rows = [
        _range(0, 400_000, "ProfilerStep#1"),
        _api(1_000, 1), _api(2_000, 2), _api(3_000, 3), _api(4_000, 4),
        (5_000, 53_000, "api", "cudaStreamSynchronize", -1, None, 0, 99),
        _api(150_000, 5),  # launched after the device went idle: host-bound
        _kernel(10_000, 10_000, 1), _kernel(60_000, 10_000, 2),  # gap 20-60 us: in a sync
        (100_000, 10_000, "kernel", nccl, 0, 7, 0, 3), _kernel(130_000, 5_000, 4),  # after nccl
        _kernel(200_000, 5_000, 5),
        _api(4_500, 6), _kernel(240_000, 5_000, 6),  # launched long before, no sync: unknown
    ]  # fmt: skip
    df = _df(rows)
    tl = Timeline(build_table({c: df[c] for c in df.columns}), {"format": "test"})
    a = tracekit.analyze(tl)
    found = attributed_bubbles(a.in_windows, a.rows, 2_000).select("start", "end", "cause").rows()
    assert found == [
        (20_000, 60_000, "host-bound: sync"),
        (70_000, 100_000, "communication"),  # the next row is a collective
        (110_000, 130_000, "communication"),  # the previous row is a collective
        (135_000, 200_000, "host-bound: launch"),
        (205_000, 240_000, "unknown"),
    ]


@pytest.mark.parametrize("fmt", list(WRITERS))
def test_clean_scenario_has_no_bubble(scenario: Analysed, fmt: str) -> None:
    _, analysis = scenario(fmt, "clean")
    assert of_rule(analysis, RULE) == []


def _eager_step(
    steps: int, layers: int, gap: int = 30_000, step_ns: int = 5_000_000, stall: int = 0
) -> Timeline:
    """Steps of ``layers`` distinct kernels of 10 µs, each launched by a call that ends 1 µs
    before it starts and ``gap`` after the kernel before it ended: host-bound bubbles of
    ``gap`` between ``layers - 1`` different kernel pairs in every step (the last one
    ``stall`` longer), in step ranges of ``step_ns``."""
    rows: list[dict] = []
    corr = 0
    for step in range(steps):
        t0 = step * 10_000_000
        rows.append({"ts": t0, "dur": step_ns, "kind": "range", "name": f"Step#{step}",
                     "pid": 1, "tid": 1})  # fmt: skip
        start = t0 + 90_000 - gap  # the first kernel 100 µs into the step
        for layer in range(layers):
            corr += 1
            start += 10_000 + gap + (stall if layer == layers - 1 else 0)
            rows.append({"ts": start - 25_000, "dur": 24_000, "kind": "api", "corr": corr,
                         "name": "cudaLaunchKernel", "pid": 1, "tid": 1})  # fmt: skip
            rows.append({"ts": start, "dur": 10_000, "kind": "kernel", "corr": corr,
                         "name": f"layer_{chr(97 + layer)}_kernel", "device": 0,
                         "stream": 7})  # fmt: skip
    table = build_table({k: [r.get(k) for r in rows] for k in COLUMNS})
    return Timeline(table, {"format": "test"})


@pytest.mark.parametrize(("layers", "folded"), [(12, True), (10, True), (9, False)])
def test_a_cause_stalling_everywhere_is_one_finding(layers: int, folded: bool) -> None:
    timeline = _eager_step(steps=3, layers=layers)
    found = tracekit.analyze(timeline, [RULE]).findings
    pairs = layers - 1  # 30 µs before every kernel but the first
    assert sum(f.impact_ns for f in found) == 3 * pairs * 30_000
    assert all(f.evidence["causes"][0] == "host-bound: launch" for f in found)
    if folded:  # more than max_places (8) pairs: one finding for the cause
        [f] = found
        assert f.pattern == f"host-bound: launch: across {pairs} kernel pairs"
        assert f.metrics["bubble_count"] == pairs and f.steps == [0, 1, 2]
        assert f"between {pairs} different kernel pairs" in f.detail
    else:
        assert len(found) == pairs and all(" → " in f.pattern for f in found)
    # the option moves the bound
    wide = tracekit.analyze(timeline, [RULE], {RULE: {"max_places": 100}}).findings
    assert len(wide) == pairs


def test_many_small_stalls_of_one_cause_fold_into_a_finding_that_reports() -> None:
    # 8 µs before each of 11 kernels: no bubble reaches report_ns (20 µs) and no pair 5 % of a
    # step, but together they are 88 µs, 42 % of the last step's 208 µs window: one finding
    timeline = _eager_step(steps=3, layers=12, gap=8_000, step_ns=1_000_000)
    [f] = tracekit.analyze(timeline, [RULE]).findings
    assert f.pattern == "host-bound: launch: across 11 kernel pairs"
    assert f.impact_ns == 3 * 11 * 8_000
    assert f.stats["bubble_share"]["max"] == pytest.approx(88_000 / 208_000)
    wide = tracekit.analyze(timeline, [RULE], {RULE: {"max_places": 100}}).findings
    assert wide == []  # one finding per pair: each below both thresholds


def test_one_large_stall_among_small_ones_keeps_its_own_finding() -> None:
    # 10 places of 8 µs and, before the last kernel, 8 + 400 µs: that pair holds most of the
    # cause's idle time, so nothing is folded and the stall is its own finding
    timeline = _eager_step(steps=3, layers=12, gap=8_000, step_ns=2_000_000, stall=400_000)
    found = tracekit.analyze(timeline, [RULE]).findings
    [stall] = [f for f in found if f.impact_ns == 3 * 408_000]
    assert stall.pattern == "host-bound: launch: layer_k_kernel → layer_l_kernel"
    assert all("across" not in f.pattern for f in found)
