"""Rule ``fallback``: an eager SiLU-and-multiply chain in a vLLM step (or AI CPU tasks on
Ascend) in every step is one finding listing every step, its impact the chain's time over
them; the clean scenario, with the fused kernel, has none. What is a fallback depends on the
stack: the same kernels are the compiled or deliberate path elsewhere (fixtures/
fallback_stacks.py and real traces)."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

import tracekit
from fixtures.fallback_stacks import STACKS, STEPS, write_stack_trace
from fixtures.fallback_stacks import truth as stack_truth
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
from tracekit.timeline import COLUMNS, Timeline, build_table

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
    assert f.advice == advice(RULE, "eager", vendor_of(analysis.timeline.meta), analysis.stack.ids)
    assert "vLLM" in f.advice  # a vLLM step: the advice names the engine's own fused path


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
    assert (
        f.advice == advice(RULE, "ai_cpu_cast", "ascend", analysis.stack.ids)
        and "AI Core" in f.advice
    )
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
    # they run on their own stream beside the AI Core's work: the impact is what no compute
    # on another stream covered, counted here ns by ns over the union of that compute
    compute = analysis.work.filter(
        pl.col("step").is_not_null() & (pl.col("kind") == "kernel") & ~pl.col("is_comm")
    )
    exposed = 0
    for ts, dur, stream in in_steps.select("ts", "dur", "stream").iter_rows():
        others = compute.filter(
            (pl.col("stream") != stream)
            & (pl.col("ts") < ts + dur)
            & (pl.col("ts") + pl.col("dur") > ts)
        )
        busy = set()
        for o_ts, o_dur in others.select("ts", "dur").iter_rows():
            busy.update(range(max(o_ts, ts), min(o_ts + o_dur, ts + dur)))
        exposed += dur - len(busy)
    assert sum(f.impact_ns for f in found) == exposed == 17_930
    assert sum(f.metrics["fallback_ns"] for f in found) <= in_steps["dur"].sum() == 7_785_867
    assert {s for f in found for s in f.steps} == set(in_steps["step"].to_list())
    assert len({f.pattern for f in found}) == len(found) < in_steps.height
    texts = {advice(RULE, kind, "ascend", analysis.stack.ids) for kind in ("ai_cpu", "ai_cpu_cast")}
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


@pytest.mark.parametrize("stack", list(STACKS))
def test_a_fallback_is_a_slow_path_in_its_stack(tmp_path: Path, stack: str) -> None:
    analysis = tracekit.analyze(tracekit.load(write_stack_trace(stack, tmp_path)))
    want = stack_truth(stack)
    assert len(analysis.steps) == STEPS
    flagged = analysis.work.filter("is_fallback")
    assert (flagged.height, flagged["dur"].sum()) == (want["kernels"], want["fallback_ns"])
    found = of_rule(analysis, RULE)
    if not want["fallback_ns"]:  # Inductor, deliberate Triton, eager training: nothing
        assert found == []
        return
    [f] = found
    assert f.steps == list(range(STEPS)) and f.impact_ns == want["fallback_ns"]
    assert f.metrics["kernels"] == want["kernels"] // STEPS


def test_the_engines_triton_moe_is_a_fallback_on_rocm_with_aiter_only(tmp_path: Path) -> None:
    # the same Triton fused_moe_kernel: vLLM's fallback where AITER runs (its MoE switch off),
    # vLLM's own MoE kernel on NVIDIA
    rocm = tracekit.analyze(tracekit.load(write_stack_trace("vllm-rocm-triton-moe", tmp_path)))
    cuda = tracekit.analyze(tracekit.load(write_stack_trace("vllm-cuda-triton-moe", tmp_path)))
    assert {"vllm", "aiter"} <= rocm.stack.ids and "aiter" not in cuda.stack.ids
    [f] = of_rule(rocm, RULE)
    assert f.pattern == "fused_moe_kernel" and f.impact_ns == 4 * (41_000 + 37_000) == 312_000
    assert (f.metrics["chains"], f.metrics["fallback_ns"]) == (2, 78_000)
    assert "Triton fallback" in f.detail
    assert of_rule(cuda, RULE) == []


def test_eager_chain_is_a_fallback_in_an_engine_not_in_training(tmp_path: Path) -> None:
    engine = tracekit.analyze(tracekit.load(write_stack_trace("vllm-rocm-eager-chain", tmp_path)))
    train = tracekit.analyze(tracekit.load(write_stack_trace("eager-training-rocm", tmp_path)))
    [f] = of_rule(engine, RULE)
    assert f.impact_ns == 4 * (5_000 + 4_000) and f.metrics["kernels"] == 2
    assert "at::native chain" in f.detail
    assert of_rule(train, RULE) == [] and not train.work["is_fallback"].any()


def test_torch_compile_trace_has_no_fallback() -> None:
    # hta-triton-a100: torch.compile, 87 Inductor triton_* kernels and their aten neighbours
    path = real_file("nvidia", "hta-triton-a100/triton_example.json.gz")
    analysis = tracekit.analyze(tracekit.load(path))
    assert "inductor" in analysis.stack.ids
    names = analysis.work["name"].cast(pl.String)
    assert names.str.starts_with("triton_").sum() > 0
    assert of_rule(analysis, RULE) == [] and not analysis.work["is_fallback"].any()


def test_vllm_rocm_deliberate_triton_kernels_are_not_fallbacks() -> None:
    # vLLM on ROCm, piecewise-compiled: Inductor fusions, Triton unified attention and the
    # triton_kernels matmul_ogs MoE are its chosen path; only two eager ATen kernels of the
    # input preparation (a positions add and a copy) run on the eager path
    path = real_file("amd", "kineto_rocm_vllm_moe_prefilldecode_piecewise/graph_execution.json.gz")
    analysis = tracekit.analyze(tracekit.load(path))
    assert {"vllm", "inductor"} <= analysis.stack.ids
    work = analysis.work.with_columns(pl.col("name").cast(pl.String))
    triton = work.filter(pl.col("name").str.contains(r"^triton_|unified_attention|matmul_ogs"))
    assert triton.height == 24 * 4 + 23 + 1 and not triton["is_fallback"].any()
    flagged = work.filter("is_fallback")
    assert flagged["name"].str.contains("at::native::", literal=True).all()
    assert (flagged.height, flagged["dur"].sum()) == (2, 3_399 + 1_799)
    assert sum(f.impact_ns for f in of_rule(analysis, RULE)) <= 5_198


@pytest.mark.parametrize(
    ("vendor", "rel"),
    [
        ("amd", "kineto_mi300x_hf_qwen1.5_0.5b_eager/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"),
        ("nvidia", "hta-v100-ddp-allreduce/df_index_resolver.json.gz"),
    ],
)
def test_eager_traces_without_an_engine_have_no_fallback(vendor: str, rel: str) -> None:
    # eager Hugging Face inference and DDP training: at::native chains are ordinary eager code
    analysis = tracekit.analyze(tracekit.load(real_file(vendor, rel)))
    assert "eager" in analysis.stack.ids or "pytorch" in analysis.stack.ids
    assert not analysis.stack.ids & {"vllm", "sglang", "trtllm", "atom", "vllm-ascend", "mindie"}
    native = analysis.work["name"].cast(pl.String).str.contains("at::native::", literal=True)
    assert native.sum() > 1_000
    assert of_rule(analysis, RULE) == [] and not analysis.work["is_fallback"].any()


def _three_steps(kernels: list[tuple[int, int, str, str, int]], meta: dict) -> Timeline:
    """Three 1 ms steps (``Step#N`` ranges of 500 µs), each with the same device ``kernels``:
    (offset into the step, dur, name, engine, stream)."""
    rows: list[dict] = []
    for step in range(3):
        t0 = step * 1_000_000
        rows.append({"ts": t0, "dur": 500_000, "kind": "range", "name": f"Step#{step}",
                     "pid": 1, "tid": 1})  # fmt: skip
        rows += [
            {"ts": t0 + at, "dur": dur, "kind": "kernel", "name": name, "engine": engine,
             "device": 0, "stream": stream}
            for at, dur, name, engine, stream in kernels
        ]  # fmt: skip
    return Timeline(build_table({k: [r.get(k) for r in rows] for k in COLUMNS}), meta)


MSPROF = {"format": "msprof", "producer": {"name": "msprof"}}


def test_a_fallback_beside_compute_on_another_stream_costs_only_its_exposed_part() -> None:
    # a 100 µs AI Core kernel on stream 2; on stream 1 an AI CPU operator of 60 µs that starts
    # 70 µs into it (30 µs hidden beside it, 30 µs exposed) -> impact 30 µs a step
    kernels = [(10_000, 100_000, "MatMulV3", "aic", 2), (80_000, 60_000, "Unique", "ai_cpu", 1)]
    [f] = tracekit.analyze(_three_steps(kernels, MSPROF), [RULE]).findings
    assert f.steps == [0, 1, 2] and f.impact_ns == 3 * 30_000
    assert f.metrics["fallback_ns"] == 60_000 and f.metrics["exposed_ns"] == 30_000
    assert "30,000 ran beside compute on another stream" in f.detail


def test_two_fallbacks_side_by_side_hide_nothing_of_each_other() -> None:
    # two AI CPU operators of 60 µs on streams 1 and 3 at the same time, no other compute:
    # each costs its whole time (a fallback is no work that hides another)
    kernels = [(80_000, 60_000, "Unique", "ai_cpu", 1), (80_000, 60_000, "NonZero", "ai_cpu", 3)]
    found = tracekit.analyze(_three_steps(kernels, MSPROF), [RULE]).findings
    assert sorted(f.impact_ns for f in found) == [3 * 60_000, 3 * 60_000]


def test_copies_and_fills_alone_are_no_fallback_chain() -> None:
    # in a vLLM step: a fill then a copy (buffer writes) is data movement; a cast then SiLU
    # then a multiply is the eager path of a fused op; masked_fill is an operation
    fill = "vectorized_elementwise_kernel|FillFunctor"
    copy = "elementwise_kernel|direct_copy_kernel_cuda"
    silu = "vectorized_elementwise_kernel|silu_kernel"
    mul = "vectorized_elementwise_kernel|MulFunctor"
    chains = [[fill, copy], [copy, silu, mul], ["elementwise_kernel|masked_fill_kernel"]]
    native = "void at::native::{}<4, at::native::{}<float>>(int)"
    fused = "void vllm::act_and_mul_kernel<float>(int)"
    rows: list[dict] = []
    for step in range(3):
        t0 = step * 1_000_000
        rows.append({"ts": t0, "dur": 500_000, "kind": "range", "name": f"Step#{step}",
                     "pid": 1, "tid": 1})  # fmt: skip
        at = t0 + 40_000
        for kernels in chains:
            for kernel in kernels:
                wrapper, op = kernel.split("|")
                rows.append({"ts": at, "dur": 5_000, "kind": "kernel", "device": 0,
                             "name": native.format(wrapper, op), "stream": 7})  # fmt: skip
                at += 6_000
            # a fused kernel between the chains keeps them apart
            rows.append({"ts": at, "dur": 5_000, "kind": "kernel", "device": 0, "name": fused,
                         "stream": 7})  # fmt: skip
            at += 6_000
    table = build_table({k: [r.get(k) for r in rows] for k in COLUMNS})
    found = tracekit.analyze(Timeline(table, {"format": "test"}), [RULE]).findings
    assert sorted((len(f.evidence["names"]), f.impact_ns) for f in found) == [
        (1, 3 * 5_000),  # masked_fill
        (3, 3 * 15_000),  # cast -> SiLU -> multiply
    ]
