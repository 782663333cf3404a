"""The step methods one by one on hand-built rows with known answers: period finding, graph
launches grouped per step, placement by launch / device window / export / host time, and
the second look that lowers the confidence."""

from __future__ import annotations

import random

import numpy as np
import polars as pl
import pytest

from tracekit.steps import assign, find_steps, review, windows
from tracekit.steps.period import PRE_LABEL, best_period, candidates, find_period

COLS = ("ts", "dur", "kind", "name", "device", "stream", "rank", "corr", "category")
TYPES = (pl.Int64, pl.Int64, pl.String, pl.String, pl.Int32, pl.Int64, pl.Int32, pl.Int64,
         pl.String)  # fmt: skip
LAYER = ("rmsnorm", "qkv", "attn", "o_proj", "router", "w13", "act", "w2")
HEAD = ("embed",)
TAIL = ("final_norm", "lm_head", "top_k", "sample")
CATEGORY = {"attn": "attention", "top_k": "sampling", "sample": "sampling", "lm_head": "gemm"}


def _frame(rows: list[tuple]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=dict(zip(COLS, TYPES)), orient="row")


def _decode(steps: int, layers: int, *, gap: int = 40_000, warmup: int = 0, seed: int = 0,
            lm_head_ns: int = 9_000, tail: tuple[str, ...] = TAIL,
            ) -> tuple[pl.DataFrame, list[int]]:  # fmt: skip
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
    assert steps.ranges["phase"].to_list() == ["decode"] * 10


def test_back_to_back_without_sampling_kernels_cut_after_the_lm_head() -> None:
    # llama.cpp samples on the CPU: a step ends with the LM head's matmul
    df, firsts = _decode(steps=9, layers=4, gap=300, lm_head_ns=50_000, tail=TAIL[:2])
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
    assert ranges["phase"].to_list() == [None] + ["decode"] * 9
    # the idle-gap method would have cut the load phase into 25 "steps"
    assert len(find_steps(df.filter(pl.col("ts") < firsts[0]))) == 25


def test_kernels_that_do_not_repeat_have_no_period() -> None:
    rng = random.Random(1)
    rows = [(i * 5_000, 3_000, "kernel", f"k{rng.randint(0, 400)}", 0, 7, 0, None, "other")
            for i in range(600)]  # fmt: skip
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
            rows += [_api(t + 100 * piece, corr, "cudaGraphLaunch"),
                     _kernel(t + 100 * piece + 20, 50, corr)]  # fmt: skip
        rows.append(_api(t + 600, 900 + step, "cudaStreamSynchronize", dur=150))
    steps = find_steps(_frame(rows))
    assert (steps.method, steps.confidence, len(steps)) == ("graph", "medium", 4)
    assert "grouped by host synchronisation (5 per step)" in steps.detail
    work = assign(_frame(rows), steps)
    assert work.group_by("step").len().sort("step")["len"].to_list() == [5, 5, 5, 5]


def test_one_graph_launch_per_step_when_nothing_groups_them() -> None:
    rows = []
    for step in range(4):
        rows += [_api(step * 1_000, step + 1, "hipGraphLaunch"),
                 _api(step * 1_000 + 500, 90 + step, "hipStreamSynchronize", dur=100),
                 _kernel(step * 1_000 + 20, 50, step + 1)]  # fmt: skip
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
        ("k", 0, "launch"), ("k", 0, "launch"), ("hcom_allReduce", 0, "device_window"),
        ("k", 1, "launch"), ("k", 1, "launch"), ("hcom_allGather", 1, "device_window"),
    ]  # fmt: skip
    assert windows(work).select("step", "start", "end").rows() == [(0, 50, 140), (1, 140, 200)]


def test_the_step_the_export_names_comes_before_the_device_window() -> None:
    rows = [
        (0, 100, "op", "ProfilerStep#6", -1, None, 0, None, None),
        (100, 100, "op", "ProfilerStep#7", -1, None, 0, None, None),
        _api(10, 1), _api(110, 2), _kernel(50, 40, 1), _kernel(140, 40, 2),
    ]  # fmt: skip
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
        _api(100, 1), _api(10_100, 2),
        _kernel(9_000, 900, None),  # runs before any launched row: host time only
        _kernel(12_000, 100, 1), _kernel(15_000, 1_000, 2),  # the host is a step ahead
    ]  # fmt: skip
    df = _frame(rows)
    steps = find_steps(df)
    work = assign(df, steps)
    assert work.filter(pl.col("placed") == "host_time")["step"].to_list() == [0]
    reviewed = review(steps, work, lead_ns=6_000)  # the host runs far ahead: at risk
    assert reviewed.confidence == "low" and "host step range" in reviewed.warnings[0]
    calm = review(find_steps(df), work, lead_ns=10)  # launches run at once: no risk
    assert (calm.confidence, calm.warnings) == ("high", [])


def test_one_window_holding_most_of_the_device_time_lowers_the_confidence() -> None:
    """The idle-gap method on a trace whose generation ran back to back: tiny load bursts
    and one giant window; the second look says so."""
    load = (0, 50_000, 120_000, 210_000, 270_000, 350_000)  # idle gaps of 49-89 us
    rows = [_kernel(t, 1_000, None, name=f"load{i % 2}") for i, t in enumerate(load)]
    rng = random.Random(5)  # generation kernels whose names never repeat in order
    rows += [_kernel(420_000 + i * 1_000, 990, None, name=f"g{rng.randint(0, 300)}")
             for i in range(2_000)]  # fmt: skip
    df = _frame(rows)
    steps = find_steps(df)
    work = assign(df, steps)
    reviewed = review(steps, work, None)
    assert reviewed.confidence == "low"
    assert any("step 6 holds 100% of the device time" in w for w in reviewed.warnings)


def test_period_finding_scales_without_a_python_loop_per_kernel() -> None:
    df, firsts = _decode(steps=400, layers=8, gap=300)
    found = find_period(df, 0)
    assert found is not None and found.period == 1 + 8 * len(LAYER) + 4
    assert np.array_equal(found.lane["ts"].to_numpy()[found.starts], np.array(firsts))
