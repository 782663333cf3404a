"""The step methods one by one on hand-built rows with known answers: period finding, graph
launches grouped per step, placement by launch / device window / export / host time, and
the second look that lowers the confidence."""

from __future__ import annotations

import random

import numpy as np
import polars as pl
import pytest

from tracekit.steps import assign, find_steps, review, windows
from tracekit.steps.period import POST_LABEL, PRE_LABEL, best_period, candidates, find_period

COLS = ("ts", "dur", "kind", "name", "device", "stream", "rank", "corr", "category")
TYPES = (
    pl.Int64,
    pl.Int64,
    pl.String,
    pl.String,
    pl.Int32,
    pl.Int64,
    pl.Int32,
    pl.Int64,
    pl.String,
)
LAYER = ("rmsnorm", "qkv", "attn", "o_proj", "router", "w13", "act", "w2")
HEAD = ("embed",)
TAIL = ("final_norm", "lm_head", "top_k", "sample")
CATEGORY = {"attn": "attention", "top_k": "sampling", "sample": "sampling", "lm_head": "gemm"}


def _frame(rows: list[tuple]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=dict(zip(COLS, TYPES)), orient="row")


def _decode(
    steps: int,
    layers: int,
    *,
    gap: int = 40_000,
    warmup: int = 0,
    seed: int = 0,
    lm_head_ns: int = 9_000,
    tail: tuple[str, ...] = TAIL,
) -> tuple[pl.DataFrame, list[int]]:
    """Kernels of ``steps`` decode steps on one stream (``gap`` ns idle before each step),
    after ``warmup`` irregular load kernels; returns the rows and each step's first ts."""
    rng = random.Random(seed)
    rows, firsts, t = [], [], 0
    for _ in range(warmup):
        name = f"load_{rng.randint(0, 3)}"
        rows.append((t, 3_000, "kernel", name, 0, 7, 0, None, "other"))
        t += 3_000 + rng.randint(50_000, 90_000)
    for _ in range(steps):
        t += gap
        firsts.append(t)
        names = [*HEAD, *(LAYER * layers), *tail]
        for name in names:
            dur = lm_head_ns if name == "lm_head" else rng.randint(2_000, 6_000)
            rows.append((t, dur, "kernel", name, 0, 7, 0, None, CATEGORY.get(name, "other")))
            t += dur + rng.randint(100, 400)
    return _frame(rows), firsts


def test_the_step_period_beats_the_layer_period_and_its_multiples() -> None:
    df, _ = _decode(steps=12, layers=6, gap=300)
    codes = df.with_columns(c=pl.col("name").rank("dense"))["c"].to_numpy()
    period, match = best_period(codes, candidates(codes))  # type: ignore[misc]
    assert period == len(HEAD) + 6 * len(LAYER) + len(TAIL) == 53
    assert match == 1.0


@pytest.mark.parametrize(("gap", "how"), [(40_000, "idle"), (300, "sampling")])
def test_period_steps_start_where_each_decode_step_starts(gap: int, how: str) -> None:
    df, firsts = _decode(steps=10, layers=4, gap=gap)
    steps = find_steps(df)
    assert (steps.method, steps.confidence, len(steps)) == ("period", "medium", 10)
    assert steps.ranges["start"].to_list() == firsts
    assert how in steps.detail
    # find_steps claims no phase: analyze() takes it from the kernels (none here say one)
    assert steps.ranges["phase"].to_list() == [None] * 10


def test_back_to_back_without_sampling_kernels_cut_after_the_lm_head() -> None:
    # llama.cpp samples on the CPU: a step ends with the LM head's matmul; its decode
    # attention kernel (flash_attn_ext_vec) shows an LLM generating tokens
    df, firsts = _decode(steps=9, layers=4, gap=300, lm_head_ns=50_000, tail=TAIL[:2])
    df = df.with_columns(pl.col("name").replace("attn", "flash_attn_ext_vec_f16"))
    steps = find_steps(df)
    assert (steps.method, len(steps)) == ("period", 9)
    assert steps.ranges["start"].to_list() == firsts
    assert "longest once-per-step kernel" in steps.detail


def test_load_phase_before_the_first_period_is_one_window() -> None:
    df, firsts = _decode(steps=9, layers=3, gap=300, warmup=25)
    steps = find_steps(df)
    ranges = steps.ranges
    assert ranges["label"].to_list() == [PRE_LABEL] + [f"period {i}" for i in range(9)]
    assert ranges["start"].to_list()[1:] == firsts
    assert ranges["phase"].to_list() == [None] * 10  # the kernels give phases in analyze()
    # the load phase alone: 25 single-kernel bursts of every size are no steps, one window
    assert find_steps(df.filter(pl.col("ts") < firsts[0])).method == "whole"


def _steps_of(names_of_step: list[list[str]], gap: int = 300) -> tuple[pl.DataFrame, list[int]]:
    """One stream running the given kernels step by step; the rows and each step's first ts."""
    rng = random.Random(7)
    rows, firsts, t = [], [], 0
    for names in names_of_step:
        t += gap
        firsts.append(t)
        for name in names:
            dur = 9_000 if name == "lm_head" else rng.randint(2_000, 6_000)
            rows.append((t, dur, "kernel", name, 0, 7, 0, None, CATEGORY.get(name, "other")))
            t += dur + rng.randint(100, 400)
    return _frame(rows), firsts


STEP = [*HEAD, *(LAYER * 4), *TAIL]


@pytest.mark.parametrize("every", [2, 3])
def test_a_kernel_every_few_steps_does_not_merge_steps(every: int) -> None:
    """A kernel that runs every second or third step (a cache copy, a MoE statistic) makes
    every k steps repeat exactly; the step is still one step."""
    steps = [
        [*STEP[:5], "block_table_copy", *STEP[5:]] if i % every == 0 else STEP for i in range(12)
    ]
    df, firsts = _steps_of(steps)
    found = find_steps(df)
    assert (found.method, len(found)) == ("period", 12)
    assert found.ranges["start"].to_list() == firsts


def test_steps_of_varying_length_are_found() -> None:
    """MoE steps that run four more kernels every other step (10 % of a step)."""
    longer = [*HEAD, *[k for _ in range(4) for k in (*LAYER, "moe_extra")], *TAIL]
    df, firsts = _steps_of([longer if i % 2 else STEP for i in range(12)])
    found = find_steps(df)
    assert (found.method, len(found)) == ("period", 12)
    assert found.ranges["start"].to_list() == firsts


def test_two_steps_are_two_steps_with_low_confidence() -> None:
    df, firsts = _steps_of([STEP, STEP])
    found = find_steps(df)
    assert (found.method, found.confidence, found.ranges["start"].to_list()) == (
        "period",
        "low",
        firsts,
    )


@pytest.mark.parametrize("cut", [0.3, 0.8])
def test_a_step_cut_short_by_the_end_of_the_trace_is_its_own_window(cut: float) -> None:
    df, firsts = _steps_of([STEP] * 10)
    df = df.head(9 * len(STEP) + int(cut * len(STEP)))
    found = find_steps(df)
    assert found.ranges["label"].to_list()[-1] == POST_LABEL
    assert found.ranges["start"].to_list() == firsts
    assert found.ranges["phase"].to_list() == [None] * 10  # phases come from the kernels


def test_a_collective_that_starts_early_on_its_stream_does_not_open_a_step() -> None:
    df, firsts = _steps_of([STEP] * 10, gap=2_000)
    tails = [
        (f - 1_000, 8_000, "kernel", "ncclDevKernel_AllReduce", 0, 21, 0, None, "comm")
        for f in firsts[1:]
    ]
    found = find_steps(pl.concat([df, _frame(tails)]))
    assert (found.method, found.ranges["start"].to_list()) == ("period", firsts)


def test_rows_without_a_device_index_are_periodic_too() -> None:
    df, firsts = _steps_of([STEP] * 10)
    found = find_steps(df.with_columns(device=pl.lit(None, pl.Int32)))
    assert (found.method, found.ranges["start"].to_list()) == ("period", firsts)


def test_the_load_window_takes_no_phase_from_its_kernels() -> None:
    warmup = [["paged_attention_v1_kernel", "load", "load2", "load3"]]
    df, _ = _steps_of([*warmup, *[STEP] * 6])
    from tracekit.analysis.pipeline import place_steps

    steps, _, _ = place_steps(df, {})
    assert steps.ranges.select("label", "phase").row(0) == (PRE_LABEL, None)


def test_ranks_that_repeat_differently_lower_the_confidence() -> None:
    rank0, _ = _steps_of([STEP] * 10)
    rank1, _ = _steps_of([[*HEAD, *(LAYER * 6), *TAIL]] * 10)
    found = find_steps(pl.concat([rank0, rank1.with_columns(rank=pl.lit(1, pl.Int32))]))
    assert found.confidence == "low"
    assert "rank 0: 37, rank 1: 53 kernels" in found.warnings[0]


def test_kernels_that_do_not_repeat_have_no_period() -> None:
    rng = random.Random(1)
    rows = [
        (i * 5_000, 3_000, "kernel", f"k{rng.randint(0, 400)}", 0, 7, 0, None, "other")
        for i in range(600)
    ]
    assert find_period(_frame(rows), 0) is None


def test_period_finding_holds_on_shuffled_concurrent_streams() -> None:
    """Two streams whose kernels start in a different order in some steps still give the
    steps (the sequence matches less than 100 % one period later)."""
    df, firsts = _decode(steps=12, layers=4, gap=40_000)
    rng = random.Random(3)
    side = []
    for row in df.filter(pl.col("name") == "router").iter_rows():
        jitter = rng.randint(-200, 200)
        side.append((row[0] + jitter, 2_500, "kernel", "shared_expert", 0, 13, 0, None, "gemm"))
    steps = find_steps(pl.concat([df, _frame(side)]))
    assert (steps.method, len(steps)) == ("period", 12)
    assert steps.ranges["start"].to_list() == firsts


def _api(ts: int, corr: int, name: str = "cudaLaunchKernel", dur: int = 2) -> tuple:
    return (ts, dur, "api", name, -1, None, 0, corr, None)


def _kernel(ts: int, dur: int, corr: int | None, stream: int = 7, name: str = "k") -> tuple:
    return (ts, dur, "kernel", name, 0, stream, 0, corr, "other")


def test_piecewise_graph_launches_group_by_host_synchronisation() -> None:
    rows, corr = [], 0
    for step in range(4):
        t = step * 1_000
        for piece in range(5):  # five graph launches per step, no wait between them
            corr += 1
            rows += [
                _api(t + 100 * piece, corr, "cudaGraphLaunch"),
                _kernel(t + 100 * piece + 20, 50, corr),
            ]
        rows.append(_api(t + 600, 900 + step, "cudaStreamSynchronize", dur=150))
    steps = find_steps(_frame(rows))
    assert (steps.method, steps.confidence, len(steps)) == ("graph", "medium", 4)
    assert "grouped by host synchronisation (5 per step)" in steps.detail
    work = assign(_frame(rows), steps)
    assert work.group_by("step").len().sort("step")["len"].to_list() == [5, 5, 5, 5]


def test_one_graph_launch_per_step_when_nothing_groups_them() -> None:
    rows = []
    for step in range(4):
        rows += [
            _api(step * 1_000, step + 1, "hipGraphLaunch"),
            _api(step * 1_000 + 500, 90 + step, "hipStreamSynchronize", dur=100),
            _kernel(step * 1_000 + 20, 50, step + 1),
        ]
    steps = find_steps(_frame(rows))
    assert (steps.method, len(steps)) == ("graph", 4)
    assert "one launch per step" in steps.detail


def test_rows_without_a_launch_go_to_the_device_window_that_holds_them() -> None:
    """The host runs a step ahead: step 1's range is open while step 0 still runs on the
    device. A collective with no launch link belongs to step 0 (its device window), not to
    step 1 (the host range its start falls in)."""
    rows = [
        (0, 100, "range", "ProfilerStep#0", -1, None, 0, None, None),
        (100, 100, "range", "ProfilerStep#1", -1, None, 0, None, None),
        _api(10, 1), _api(20, 2), _api(110, 3), _api(120, 4),
        _kernel(50, 40, 1), _kernel(90, 40, 2),  # step 0 on the device: 50-130
        _kernel(140, 30, 3), _kernel(170, 30, 4),  # step 1: 140-200
        _kernel(115, 20, None, stream=21, name="hcom_allReduce"),  # in step 0's window
        _kernel(175, 10, None, stream=21, name="hcom_allGather"),  # in step 1's window
    ]  # fmt: skip
    steps = find_steps(_frame(rows))
    work = assign(_frame(rows), steps).sort("ts")
    assert work.select("name", "step", "placed").rows() == [
        ("k", 0, "launch"),
        ("k", 0, "launch"),
        ("hcom_allReduce", 0, "device_window"),
        ("k", 1, "launch"),
        ("k", 1, "launch"),
        ("hcom_allGather", 1, "device_window"),
    ]
    assert windows(work).select("step", "start", "end").rows() == [(0, 50, 140), (1, 140, 200)]


def test_the_step_the_export_names_comes_before_the_device_window() -> None:
    rows = [
        (0, 100, "op", "ProfilerStep#6", -1, None, 0, None, None),
        (100, 100, "op", "ProfilerStep#7", -1, None, 0, None, None),
        _api(10, 1),
        _api(110, 2),
        _kernel(50, 40, 1),
        _kernel(140, 40, 2),
    ]
    task = _frame([_kernel(150, 10, None, stream=21, name="hcom")]).with_columns(
        args=pl.lit('{"step":6}')
    )
    df = pl.concat([_frame(rows).with_columns(args=pl.lit(None, pl.String)), task])
    work = assign(df, find_steps(df)).sort("ts")
    assert work.select("name", "step", "placed").rows()[-1] == ("hcom", 0, "export")


def test_rows_before_every_window_fall_back_to_host_time_and_say_so() -> None:
    rows = [
        (0, 10_000, "range", "ProfilerStep#0", -1, None, 0, None, None),
        (10_000, 10_000, "range", "ProfilerStep#1", -1, None, 0, None, None),
        _api(100, 1),
        _api(10_100, 2),
        _kernel(9_000, 900, None),  # runs before any launched row: host time only
        _kernel(12_000, 100, 1),
        _kernel(15_000, 1_000, 2),  # the host is a step ahead
    ]
    df = _frame(rows)
    steps = find_steps(df)
    work = assign(df, steps)
    assert work.filter(pl.col("placed") == "host_time")["step"].to_list() == [0]
    reviewed = review(steps, work, lead_ns=6_000)  # the host runs far ahead: at risk
    assert reviewed.confidence == "low" and "host step range" in reviewed.warnings[0]
    calm = review(find_steps(df), work, lead_ns=10)  # launches run at once: no risk
    assert (calm.confidence, calm.warnings) == ("high", [])


def test_one_window_holding_most_of_the_device_time_lowers_the_confidence() -> None:
    """The idle-gap method on bursts alike in their kernel count (a benchmark that sleeps
    between requests), the last of which runs its kernels a thousand times longer: one giant
    window; the second look says so."""
    rng = random.Random(5)  # kernels whose names never repeat: no micro-benchmark
    starts = [b * 100_000 + k * 1_000 for b in range(6) for k in range(3)]
    rows = [_kernel(t, 990, None, name=f"g{rng.randint(0, 10_000)}") for t in starts]
    rows += [_kernel(600_000 + k * 1_000_000, 999_000, None, name=f"h{k}") for k in range(3)]
    df = _frame(rows)
    steps = find_steps(df)
    assert (steps.method, len(steps)) == ("gaps", 7)
    work = assign(df, steps)
    reviewed = review(steps, work, None)
    assert reviewed.confidence == "low"
    assert any("step 6 holds 99% of the device time" in w for w in reviewed.warnings)


def test_a_long_prefill_among_decode_steps_is_no_giant() -> None:
    """One prefill step holding most of the device time next to short decode steps is what
    serving looks like: the steps are compared within their phase."""
    rows = [(0, 1_000, "range", "step[EXTEND bs=15 toks=15360]", -1, None, 0, None, None)]
    rows += [
        (1_000 + i * 100, 100, "range", "step[DECODE bs=32]", -1, None, 0, None, None)
        for i in range(6)
    ]
    rows += [_api(10, 1), _kernel(20, 900, 1)]
    rows += [
        r
        for i in range(6)
        for r in (_api(1_010 + i * 100, 2 + i), _kernel(1_020 + i * 100, 30, 2 + i))
    ]
    df = _frame(rows)
    steps = find_steps(df)
    reviewed = review(steps, assign(df, steps), lead_ns=10)
    assert (reviewed.confidence, reviewed.warnings) == ("high", [])


def test_most_device_time_outside_every_step_lowers_the_confidence() -> None:
    rows = [(0, 100, "range", "ProfilerStep#1", -1, None, 0, None, None), _api(10, 1),
            _kernel(20, 50, 1), _api(500, 2), _kernel(1_000, 5_000, 2)]  # fmt: skip
    df = _frame(rows)
    steps = find_steps(df)
    work = assign(df, steps)
    reviewed = review(steps, work, lead_ns=10)
    assert reviewed.confidence == "medium"
    assert reviewed.warnings == ["99% of the device time lies outside every step"]


def test_kernels_launched_outside_every_step_belong_to_none() -> None:
    rows = [(0, 100, "range", "ProfilerStep#1", -1, None, 0, None, None),
            _api(10, 1), _kernel(20, 50, 1), _api(500, 2), _kernel(510, 50, 2)]  # fmt: skip
    work = assign(_frame(rows), find_steps(_frame(rows))).sort("ts")
    assert work.select("step", "placed").rows() == [(0, "launch"), (None, "none")]


def test_graph_steps_that_the_kernel_period_contradicts_have_low_confidence() -> None:
    """A host wait inside each step (an .item() between graph pieces) splits every step in
    two by the waits; the kernels' period says otherwise."""
    rows, corr = [], 0
    for step in range(8):
        t = step * 100_000
        for piece in range(4):
            corr += 1
            rows.append(_api(t + 15_000 * piece, corr, "cudaGraphLaunch"))
            for k, name in enumerate(
                ("norm", "gemm", "act", "down") if piece else HEAD + LAYER[:3]
            ):
                rows.append(_kernel(t + 15_000 * piece + 200 + k * 1_000, 800, corr, name=name))
            if piece == 1:
                rows.append(_api(t + 15_000 * piece + 9_000, 900 + corr, "cudaStreamSynchronize"))
        rows.append(_api(t + 70_000, 800 + step, "cudaStreamSynchronize", dur=1_500))
    steps = find_steps(_frame(rows))
    assert (steps.method, len(steps), steps.confidence) == ("graph", 16, "low")
    assert "the graph launches give 16 steps, the period of the kernels 8" in steps.warnings[0]


def test_period_finding_scales_without_a_python_loop_per_kernel() -> None:
    df, firsts = _decode(steps=400, layers=8, gap=300)
    found = find_period(df, 0)
    assert found is not None and found.period == 1 + 8 * len(LAYER) + 4
    assert np.array_equal(found.lane["ts"].to_numpy()[found.starts], np.array(firsts))
