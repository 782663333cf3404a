"""Workload kinds against their ground truth (``fixtures.workloads``), in every format each
is written in.

1. Round trip: the parsed timeline holds exactly the fixture's device work rows (count, start
   offsets and durations, busy time), its marker ranges and, for micro-benchmarks, the
   launches per kernel name.
2. Workload: ``analysis.workload`` kind and unit, the step count, phases and labels equal the
   truth; no step of a non-decode kind is a decode step; a micro-benchmark's repetitions are
   its launches per kernel name.
"""

from __future__ import annotations

import csv
from collections import Counter
from functools import cache
from pathlib import Path

import polars as pl
import pytest

import tracekit
from fixtures.capture import cut_torch_npu, short_rocprof_v1
from fixtures.workloads import CASES, FORMATS, Truth, build, pairs, write
from tracekit.timeline import WORK_KINDS

PAIRS = [pytest.param(case, fmt, id=f"{case}-{fmt}") for case, fmt in pairs()]
WORKLOAD_KEYS = {"kind", "unit", "confidence", "evidence", "repetitions"}


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("workloads")


@cache
def _built(case: str, fmt: str) -> tuple[pl.DataFrame, Truth]:
    return build(case, fmt)


_loaded: dict[tuple[str, str], tracekit.Timeline] = {}
_analysed: dict[tuple[str, str], tracekit.Analysis] = {}


def _timeline(folder: Path, case: str, fmt: str) -> tracekit.Timeline:
    if (case, fmt) not in _loaded:
        events, _ = _built(case, fmt)
        _loaded[case, fmt] = tracekit.load(write(events, fmt, folder / f"{case}-{fmt}"))
    return _loaded[case, fmt]


def _analysis(folder: Path, case: str, fmt: str) -> tracekit.Analysis:
    if (case, fmt) not in _analysed:
        _analysed[case, fmt] = tracekit.analyze(_timeline(folder, case, fmt))
    return _analysed[case, fmt]


def _plain(df: pl.DataFrame) -> pl.DataFrame:
    return df.with_columns(pl.col("kind", "name").cast(pl.String))


def _busy_ns(rows: list[tuple[int, int]]) -> int:
    """Length of the union of [start, start + dur) intervals (plain Python)."""
    total, reach = 0, None
    for start, dur in sorted(rows):
        end = start + dur
        if reach is None or start >= reach:
            total += dur
            reach = end
        elif end > reach:
            total += end - reach
            reach = end
    return total


def _offsets(rows: list[tuple[int, int]]) -> list[tuple[int, int]]:
    first = min(s for s, _ in rows)
    return sorted((s - first, d) for s, d in rows)


# -- 1. round trip -------------------------------------------------------------------------
@pytest.mark.parametrize(("case", "fmt"), PAIRS)
def test_device_rows_round_trip(folder: Path, case: str, fmt: str) -> None:
    events, _ = _built(case, fmt)
    want = events.filter(pl.col("kind").is_in(FORMATS[fmt].work_kinds)).select("ts", "dur").rows()
    df = _plain(_timeline(folder, case, fmt).df)
    got = df.filter(pl.col("kind").is_in(WORK_KINDS)).select("ts", "dur").rows()
    assert len(got) == len(want)
    assert sum(d for _, d in got) == sum(d for _, d in want)
    assert _busy_ns(got) == _busy_ns(want)
    assert _offsets(got) == _offsets(want)


@pytest.mark.parametrize(("case", "fmt"), PAIRS)
def test_marker_ranges_round_trip(folder: Path, case: str, fmt: str) -> None:
    _, truth = _built(case, fmt)
    if truth["labels"] is None:
        pytest.skip("no marker ranges: nothing labels the steps")
    df = _plain(_timeline(folder, case, fmt).df)
    host = df.filter((pl.col("kind") == "range") & (pl.col("device").fill_null(-1) < 0))
    names = Counter(host["name"].to_list())
    for label, n in Counter(truth["labels"]).items():
        assert names[label] == n, label


def test_microbenchmark_launches_round_trip(folder: Path) -> None:
    for fmt in CASES["microbenchmark"][1]:
        _, truth = _built("microbenchmark", fmt)
        df = _plain(_timeline(folder, "microbenchmark", fmt).df)
        kernels = Counter(df.filter(pl.col("kind") == "kernel")["name"].to_list())
        assert dict(kernels) == truth["repetitions"] == dict.fromkeys(truth["repetitions"], 1000)


def test_truth_is_what_the_fixtures_say() -> None:
    """The truth tables themselves: counts and phases as the issue's acceptance lists them."""
    expected = {
        "decode": ("decode", "decode step", 4, ["decode"] * 4),
        "serving": ("serving", "step", 4, ["prefill", "decode", "mixed", "decode"]),
        "training": ("training", "iteration", 3, [None] * 3),
        "training-unmarked": ("training", "iteration", 3, [None] * 3),
        "training-forward": ("training", "whole window", 1, [None]),
        "microbenchmark": ("microbenchmark", "repetition", 1, [None]),
        "single": ("single", "whole window", 1, [None]),
        "runs": ("runs", "run", 5, [None] * 5),
    }
    for case, fmt in pairs():
        t = _built(case, fmt)[1]
        assert (t["kind"], t["unit"], t["steps"], t["phases"]) == expected[case], (case, fmt)
        assert t["labels"] is None or len(t["labels"]) == t["steps"]
    assert _built("training", "kineto")[1]["labels"] == [f"ProfilerStep#{i}" for i in (2, 3, 4)]
    assert _built("runs", "nsys")[1]["labels"] == [f"run {i}" for i in range(5)]
    assert all(len(formats) >= 2 for _, formats in CASES.values())


# -- 2. workload ---------------------------------------------------------------------------
@pytest.mark.parametrize(("case", "fmt"), PAIRS)
def test_workload_kind_and_unit(folder: Path, case: str, fmt: str) -> None:
    _, truth = _built(case, fmt)
    w = _analysis(folder, case, fmt).workload
    assert (w.kind, w.unit) == (truth["kind"], truth["unit"]), w.evidence


@pytest.mark.parametrize(("case", "fmt"), PAIRS)
def test_steps_phases_and_labels(folder: Path, case: str, fmt: str) -> None:
    _, truth = _built(case, fmt)
    a = _analysis(folder, case, fmt)
    ranges = a.steps.ranges.sort("rank", "step")
    assert len(a.steps) == truth["steps"], (a.steps.method, a.steps.detail)
    assert ranges["phase"].to_list() == truth["phases"]
    if truth["labels"] is not None:
        assert ranges["label"].to_list() == truth["labels"]


@pytest.mark.parametrize(("case", "fmt"), PAIRS)
def test_no_decode_phase_outside_decode(folder: Path, case: str, fmt: str) -> None:
    _, truth = _built(case, fmt)
    phases = _analysis(folder, case, fmt).steps.ranges["phase"].to_list()
    if truth["kind"] == "decode":
        assert set(phases) == {"decode"}
    elif truth["kind"] == "serving":
        assert Counter(phases) == Counter(truth["phases"])
    else:
        assert "decode" not in phases


@pytest.mark.parametrize("fmt", CASES["microbenchmark"][1])
def test_microbenchmark_repetitions(folder: Path, fmt: str) -> None:
    _, truth = _built("microbenchmark", fmt)
    w = _analysis(folder, "microbenchmark", fmt).workload
    assert {r["name"]: r["count"] for r in w.repetitions} == truth["repetitions"]
    assert all(r["median_ns"] > 0 for r in w.repetitions)


@pytest.mark.parametrize(("case", "fmt"), [("runs", "rocpd"), ("training", "nsys")])
def test_workload_in_to_dict(folder: Path, case: str, fmt: str) -> None:
    _, truth = _built(case, fmt)
    out = _analysis(folder, case, fmt).to_dict()["workload"]
    assert set(out) == WORKLOAD_KEYS
    assert (out["kind"], out["unit"]) == (truth["kind"], truth["unit"])
    assert out["repetitions"] == [] and out["evidence"]


def test_a_cut_export_reads_as_what_it_holds_and_says_it_is_cut(tmp_path: Path) -> None:
    """The acceptance's cut export, in two formats: a torch_npu export whose
    kernel_details.csv keeps its first 200 rows (op_statistic.csv counts the whole run) and a
    rocprof v1 results.csv cut at 500 rows (results.stats.csv counts them all). Each reads as
    the decode it holds — the Step Ids it kept, the periods it kept (the last cut short) —
    and says first that it is cut."""
    npu, truth = cut_torch_npu(tmp_path / "npu")
    details = npu / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    with details.open(encoding="utf-8") as fh:
        kept = sorted({int(row["Step Id"]) for row in csv.DictReader(fh)})
    a = tracekit.analyze(tracekit.load(npu))
    assert (a.workload.kind, a.workload.unit, len(a.steps)) == ("decode", "decode step", len(kept))
    assert kept == [0, 1, 2] and a.steps.ranges["phase"].to_list() == ["decode"] * 3
    assert a.capture_note and f"lists {truth['listed']} of them" in a.capture_note
    assert a.to_dict()["capture_note"] == a.capture_note

    v1, truth = short_rocprof_v1(tmp_path / "v1")
    a = tracekit.analyze(tracekit.load(v1))
    assert (a.workload.kind, a.workload.unit, len(a.steps)) == ("decode", "decode step", 8)
    assert a.steps.ranges["phase"].to_list() == ["decode"] * 7 + [None]  # the cut-short one
    assert a.steps.ranges["label"].to_list()[-1] == "after the last period"
    assert a.capture_note and f"lists {truth['listed']} of them" in a.capture_note
