"""analyze() on Ascend: the 910B samples against torch_npu's own step_trace_time, AI CPU
fallbacks, and the rules on the Ascend rendering of the scenario (torch_npu and PROF_)."""

from __future__ import annotations

import csv
import sqlite3
from collections.abc import Callable
from pathlib import Path

import polars as pl
import pytest

import tracekit
from fixtures.ascend_scenario import build_ascend_scenario
from fixtures.ascend_text_writer import write_torch_npu
from fixtures.msprof_prof_writer import write_prof
from fixtures.scenario import build_scenario
from fixtures.step_truth import step_truth
from tests.conftest import real_file
from tracekit.intervals import lengths, merge

SET = "msinsight_torchnpu_910B_2rank"
LEVELS = ("level0", "level1", "level2")
RUNS = [(export, level, rank) for export in ("text", "db") for level in LEVELS for rank in (0, 1)]
KEYS = ("computing", "not_overlapped", "overlapped", "free", "stage")


def _reference(run: Path, export: str) -> dict[str, float]:
    """torch_npu's step 50 figures (µs): step_trace_time.csv, or analysis.db for the db export."""
    out = run / "ASCEND_PROFILER_OUTPUT"
    if export == "text":
        row = next(csv.DictReader((out / "step_trace_time.csv").open()))
        cols = ("Computing", "Communication(Not Overlapped)", "Overlapped", "Free", "Stage")
        return {k: float(row[c]) for k, c in zip(KEYS, cols)}
    with sqlite3.connect(f"file:{out / 'analysis.db'}?mode=ro", uri=True) as db:
        row = db.execute("SELECT computing, communication_not_overlapped, overlapped, free, "
                         "stage FROM StepTraceTime").fetchone()  # fmt: skip
    return dict(zip(KEYS, map(float, row)))


@pytest.mark.parametrize(("export", "level", "rank"), RUNS)
def test_910b_steps_reproduce_torch_npu_step_trace(export: str, level: str, rank: int) -> None:
    run = real_file("ascend", f"{SET}/{export}/{level}/rank{rank}_ascend_pt")
    analysis = tracekit.analyze(tracekit.load(run))
    assert (analysis.steps.method, len(analysis.steps)) == ("marker", 1)
    [m] = analysis.step_metrics.to_dicts()
    # torch_npu's Stage spans the step's compute and communication tasks (not its copies);
    # Free is that span minus their union.
    rows = analysis.work.filter(pl.col("is_comm") | (pl.col("kind").cast(pl.String) == "kernel"))
    span = int((rows["ts"] + rows["dur"]).max() - rows["ts"].min())
    union = int(lengths(merge(rows))["ns"][0])
    got = {
        "computing": m["compute_ns"], "not_overlapped": m["exposed_comm_ns"],
        "overlapped": m["comm_ns"] - m["exposed_comm_ns"], "free": span - union, "stage": span,
    }  # fmt: skip
    hccl = analysis.work.filter(pl.col("name").cast(pl.String).str.starts_with("hcom_"))
    assert hccl.height == 4 and hccl["is_comm"].all()  # the step's four HCCL collectives
    want = _reference(run, export)
    for key in KEYS:  # the issue asks for 2 %; the numbers agree to float rounding
        assert got[key] / 1e3 == pytest.approx(want[key], rel=1e-4, abs=0.05), key


def test_ai_cpu_tasks_are_fallbacks() -> None:
    run = next(real_file("ascend", "mindinsight_msprof_PROF_2dev").glob("PROF_*"))
    analysis = tracekit.analyze(tracekit.load(run))
    ai_cpu = analysis.work.filter(pl.col("engine").cast(pl.String) == "ai_cpu")
    assert ai_cpu.height == 20 and ai_cpu["is_fallback"].all()
    assert "device ranges" in analysis.steps.detail and len(analysis.steps) == 10
    found = [f for f in analysis.findings if f.rule == "fallback"]
    in_steps = ai_cpu.filter(pl.col("step").is_not_null())
    assert sum(f.metrics["fallback_count"] for f in found) == in_steps.height
    assert sum(f.metrics["fallback_ns"] for f in found) == in_steps["dur"].sum()


WRITERS: dict[str, Callable[[pl.DataFrame, Path], Path]] = {
    "torch_npu": lambda events, tmp: write_torch_npu(events, tmp),
    "prof": lambda events, tmp: write_prof(events, tmp),
}
CLEAN = {"fallback_kernel": False, "hccl_all_to_all_layers": 0}


def _run(writer: str, tmp: Path, **knobs: object) -> tracekit.Analysis:
    sc = build_ascend_scenario(steps=4, layers=4, **{**CLEAN, **knobs})
    return tracekit.analyze(tracekit.load(WRITERS[writer](sc.events, tmp)))


def _base(**knobs: object) -> dict:
    return build_scenario(steps=4, layers=4, **knobs).truth


@pytest.mark.parametrize("writer", list(WRITERS))
def test_scenario_rules_on_ascend(tmp_path: Path, writer: str) -> None:
    assert _run(writer, tmp_path / "clean").findings == []
    # AI CPU tasks replace the eager chain at the same times
    found = _run(writer, tmp_path / "fb", fallback_kernel=True).findings
    assert {f.rule for f in found} == {"fallback"} and len(found) == 4
    assert (
        sum(f.metrics["fallback_ns"] for f in found) == _base(fallback_kernel=True)["fallback_ns"]
    )
    # the exposed MoeDistributeDispatchV2 (and its Aicpu side) count once
    [(start, end)] = _base(exposed_all_to_all=True)["exposed_dispatch"]
    [f] = _run(writer, tmp_path / "ex", exposed_all_to_all=True).findings
    assert (f.rule, f.step, f.metrics["exposed_ns"]) == ("overlap", 2, end - start)
    # hcom_allReduce next to the o_proj MatMul
    found = _run(writer, tmp_path / "un", unfused_collective=True).findings
    assert {f.rule for f in found} == {"mc2"} and sum(f.metrics["pairs"] for f in found) == 16


def test_bubble_on_torch_npu_output(tmp_path: Path) -> None:
    [(drained, resume)] = _base(idle_bubble_ns=150_000)["bubbles"]
    [f] = _run("torch_npu", tmp_path, idle_bubble_ns=150_000).findings
    assert (f.rule, f.step, f.metrics["largest_bubble_ns"]) == ("bubbles", 2, resume - drained)


@pytest.mark.parametrize("writer", list(WRITERS))
@pytest.mark.parametrize(
    "fault", ["clean", "fallback_kernel", "exposed_all_to_all", "unfused_collective"]
)
def test_step_metrics_of_the_ascend_rendering(tmp_path: Path, writer: str, fault: str) -> None:
    """Every step_metrics column but the category sums (Ascend operators carry other names:
    a copy is a Cast there) equals the scenario's truth; memsets are ZerosLike kernels."""
    knobs = {**CLEAN, **({} if fault == "clean" else {fault: True})}
    sc = build_ascend_scenario(steps=4, layers=4, **knobs)
    analysis = tracekit.analyze(tracekit.load(WRITERS[writer](sc.events, tmp_path)))
    truth = step_truth(sc, kernel_roles=("memset",))
    rows = analysis.step_metrics.to_dicts()
    assert len(rows) == len(truth) == 4
    shift = rows[0]["start"] - truth[0]["start"]
    for got, want in zip(rows, truth):
        for key, value in want.items():
            if key.startswith("cat_"):
                continue
            value = value + shift if key == "start" else value
            if isinstance(value, float):
                assert got[key] == pytest.approx(value, abs=1e-12), (want["step"], key)
            else:
                assert got[key] == value, (want["step"], key)
