"""What the rules share to report patterns: the key of a kernel name, the grouping of per-step
observations into patterns, severity from the share, and the advice table."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

import tracekit
from fixtures.scenario import KERNELS, build_scenario
from tests.rules.scenarios import WRITERS, analysed
from tracekit.rules import bubbles, fallback
from tracekit.rules.advice import ANY, DEFAULT, advice, parse_key, table
from tracekit.rules.patterns import (
    COLLECTIVES,
    PATTERN_OPTIONS,
    chain_key,
    collective,
    label,
    severity,
    summarise,
)


def test_label_keeps_what_tells_kernels_apart() -> None:
    assert label(KERNELS["fallback_silu"].name) == "vectorized_elementwise_kernel<silu_kernel>"
    assert label(KERNELS["fallback_mul"].name) == "vectorized_elementwise_kernel<MulFunctor>"
    copy = "unrolled_elementwise_kernel<direct_copy_kernel_cuda>"
    assert label(KERNELS["fallback_copy"].name) == copy
    assert label(KERNELS["dispatch"].name) == "deep_ep::internode_ll::dispatch"
    # ids and counters that differ between runs are dropped
    assert label("hcom_allReduce__586_0_1") == label("hcom_allReduce__100_7_1") == "hcom_allReduce"
    assert label("triton_poi_fused_add_mul_3") == "triton_poi_fused_add_mul"
    assert label(None) == "?"


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        (
            "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
            "all_reduce",
        ),
        ("void vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>(...)", "all_reduce"),
        ("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "all_gather"),
        ("hcom_reduceScatter__123_0_1", "reduce_scatter"),
        ("void deep_ep::internode_ll::dispatch<...>(...)", "all_to_all"),
        ("ncclDevKernel_Generic(ncclDevKernelArgsStorage<4096ul>)", None),
    ],
)
def test_collective_kind_from_the_name(name: str, kind: str | None) -> None:
    assert collective(name) == kind


def test_chain_key_lists_the_first_members() -> None:
    keys = pl.DataFrame({"l": [["a", "b"], [str(i) for i in range(11)]]})
    got = keys.select(chain_key(pl.col("l")))["l"].to_list()
    assert got == ["a → b", "0 → 1 → 2 → 3 → 4 → 5 → 6 → 7 → … (+3)"]


def test_summarise_groups_observations_by_pattern() -> None:
    obs = pl.DataFrame(
        {
            "pattern": ["p", "p", "p", "p", "q"],
            "rank": [0, 1, 0, 1, 0],
            "device": [0, 1, 0, 1, 0],
            "step": [3, 3, 5, 7, 4],
            "impact_ns": [40, 10, 40, 30, 500],
            "x": [1, 2, 3, 4, 9],
            "evidence": ["a", "b", "c", "d", "e"],
        }
    )
    got = summarise(obs, ["x"], total_ns=1_000).to_dicts()
    assert [r["pattern"] for r in got] == ["q", "p"]  # largest impact first
    p = got[1]
    assert (p["steps"], p["ranks"], p["occurrences"]) == ([3, 5, 7], [0, 1], 4)
    assert (p["impact_ns"], p["impact_share"]) == (120, pytest.approx(0.12))
    assert (p["x_median"], p["x_p90"], p["x_max"]) == (2.5, pytest.approx(3.7), 4.0)
    # the worst row: the largest impact, the earliest step on a tie
    assert (p["step"], p["rank"], p["worst_ns"], p["evidence"]) == (3, 0, 40, "a")


def test_severity_from_the_share() -> None:
    opts = dict(PATTERN_OPTIONS)
    assert [severity(s, opts) for s in (None, 0.005, 0.01, 0.05, 0.1)] == [
        "info",
        "info",
        "warning",
        "warning",
        "error",
    ]


def test_advice_table_has_a_text_for_every_kind() -> None:
    texts = table()
    for rule, kinds in texts.items():
        for kind, entry in kinds.items():
            assert entry.get(DEFAULT, "").strip(), f"[{rule}.{kind}] has no default"
            assert all(parse_key(key) for key in entry), (rule, kind)  # raises when unknown
            assert all(text.strip() and len(text) < 700 for text in entry.values())
    used = {
        "fallback": set(fallback.KINDS),
        "overlap": {kind for kind, _ in COLLECTIVES},
        "bubbles": set(bubbles.KINDS.values()),
        "mc2": {"fused", "fused_moe", "unfused", "unfused_all_reduce", "unfused_all_gather",
                "unfused_reduce_scatter", "unfused_all_to_all", "unfused_moe_dispatch",
                "unfused_moe_combine", "unfused_small"},
    }  # fmt: skip
    for rule, kinds in used.items():
        assert DEFAULT in texts[rule]
        missing = {k for k in kinds if k not in texts[rule]} - {"other"}  # other: the default
        assert missing == set(), rule
    # vendor, else the kind's default, else the rule's, else any rule's
    assert advice("bubbles", "host_launch", "amd") == texts["bubbles"]["host_launch"]["amd"]
    assert advice("bubbles", "unknown", "amd") == texts["bubbles"]["unknown"][DEFAULT]
    assert advice("bubbles", "new-kind", None) == texts["bubbles"][DEFAULT][DEFAULT]
    assert advice("a-plugin", "x", "nvidia") == texts[ANY][DEFAULT][DEFAULT]


@pytest.mark.parametrize(("fault_steps", "warm"), [((0,), True), ((1,), True), ((2,), False)])
def test_a_pattern_only_in_the_first_steps_is_warm_up(
    tmp_path: Path, fault_steps: tuple[int, ...], warm: bool
) -> None:
    knobs = {"idle_bubble_ns": 150_000, "fallback_kernel": True, "fault_steps": fault_steps}
    sc = build_scenario(steps=6, layers=4, **knobs)  # four steps after the first two
    analysis = tracekit.analyze(tracekit.load(WRITERS["nsys"](sc, tmp_path)))
    [bubble] = [f for f in analysis.findings if f.rule == "bubbles"]
    assert bubble.steps == list(fault_steps) and bubble.impact_ns == 150_000
    assert bubble.warm_up is warm and bubble.title.startswith("warm-up only: ") is warm
    assert (bubble.severity == "info") if warm else bubble.severity in ("warning", "error")
    steady = [f for f in analysis.findings if not f.warm_up]
    assert steady and all(f.rule != "bubbles" for f in steady) is warm
    if warm:  # after every steady-state finding, however large it is
        assert analysis.findings.index(bubble) >= len(steady)


def test_no_warm_up_without_four_steady_steps_after(tmp_path: Path) -> None:
    # the same stall in step 0 of a four-step capture: nothing says the steps after it are
    # the steady state, so it is an ordinary finding
    knobs = {"idle_bubble_ns": 150_000, "fault_steps": (0,)}
    _, analysis = analysed("nsys", knobs, tmp_path)
    [bubble] = [f for f in analysis.findings if f.rule == "bubbles"]
    assert bubble.steps == [0] and not bubble.warm_up and bubble.severity != "info"
