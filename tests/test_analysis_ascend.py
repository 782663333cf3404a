"""analyze() on Ascend: the 910B samples against torch_npu's own step_trace_time, and the
Ascend rendering of the scenario (torch_npu and PROF_): its step metrics, and nothing found
but its MC² operators when it is clean (each rule's findings: tests/rules/)."""

from __future__ import annotations

import csv
import sqlite3
from pathlib import Path

import polars as pl
import pytest

import tracekit
from fixtures.ascend_scenario import build_ascend_scenario
from fixtures.step_truth import step_truth
from tests.conftest import real_file
from tests.rules.scenarios import ASCEND_CLEAN, ASCEND_WRITERS, ascend_analysed
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
        row = db.execute(
            "SELECT computing, communication_not_overlapped, overlapped, free, "
            "stage FROM StepTraceTime"
        ).fetchone()
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
        "computing": m["compute_ns"],
        "not_overlapped": m["exposed_comm_ns"],
        "overlapped": m["comm_ns"] - m["exposed_comm_ns"],
        "free": span - union,
        "stage": span,
    }
    hccl = analysis.work.filter(pl.col("name").cast(pl.String).str.starts_with("hcom_"))
    assert hccl.height == 4 and hccl["is_comm"].all()  # the step's four HCCL collectives
    want = _reference(run, export)
    for key in KEYS:  # the issue asks for 2 %; the numbers agree to float rounding
        assert got[key] / 1e3 == pytest.approx(want[key], rel=1e-4, abs=0.05), key


@pytest.mark.parametrize("writer", list(ASCEND_WRITERS))
def test_clean_ascend_scenario_lists_only_its_mc2_operators(tmp_path: Path, writer: str) -> None:
    found = ascend_analysed(writer, tmp_path / "clean").findings
    assert {(f.rule, f.severity) for f in found} == {("mc2", "info")}
    assert len(found) == 3 and all(f.pattern.startswith("fused: ") for f in found)


@pytest.mark.parametrize("writer", list(ASCEND_WRITERS))
@pytest.mark.parametrize(
    "fault", ["clean", "fallback_kernel", "exposed_all_to_all", "unfused_collective"]
)
def test_step_metrics_of_the_ascend_rendering(tmp_path: Path, writer: str, fault: str) -> None:
    """Every step_metrics column but the category sums (Ascend operators carry other names:
    a copy is a Cast there) equals the scenario's truth; memsets are ZerosLike kernels."""
    knobs = {**ASCEND_CLEAN, **({} if fault == "clean" else {fault: True})}
    sc = build_ascend_scenario(steps=4, layers=4, **knobs)
    analysis = tracekit.analyze(tracekit.load(ASCEND_WRITERS[writer](sc.events, tmp_path)))
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
