"""analyze() on the scenario in every vendor format: exact step metrics and rule findings."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

import tracekit
from fixtures.kineto_writer import write_kineto_json
from fixtures.nsys_writer import write_nsys_sqlite
from fixtures.rocpd_writer import write_rocpd
from fixtures.rocprof_csv_writer import write_rocprofv3_csv
from fixtures.scenario import KERNELS, Scenario, build_scenario
from fixtures.step_truth import step_truth


def _csv(sc: Scenario, tmp: Path) -> Path:
    write_rocprofv3_csv(sc.events, tmp / "csv")
    return tmp / "csv"


WRITERS: dict[str, Callable[[Scenario, Path], Path]] = {
    "nsys": lambda sc, tmp: write_nsys_sqlite(sc.events, tmp / "t.sqlite"),
    "kineto": lambda sc, tmp: write_kineto_json(sc.events, tmp / "t.json"),
    "rocpd": lambda sc, tmp: write_rocpd(sc.events, tmp / "t.db"),
    "rocprofv3-csv": _csv,
}
# rocprofiler records hipMemsetAsync as a fill kernel: compute in those renderings
KERNEL_ROLES = {"rocpd": ("memset",), "rocprofv3-csv": ("memset",)}
FAULTS = {
    "clean": {},
    "fallback": {"fallback_kernel": True},
    "exposed": {"exposed_all_to_all": True},
    "bubble": {"idle_bubble_ns": 150_000},
    "unfused": {"unfused_collective": True},
}


def _analysis(fmt: str, knobs: dict, tmp: Path) -> tuple[Scenario, tracekit.analysis.Analysis]:
    sc = build_scenario(steps=4, layers=4, **knobs)
    return sc, tracekit.analyze(tracekit.load(WRITERS[fmt](sc, tmp)))


def _same(got: dict, want: dict, shift: int) -> list[str]:
    bad = []
    for key, value in want.items():
        have = got[key]
        if key == "start":
            value += shift
        if isinstance(value, float):
            ok = have is not None and abs(have - value) < 1e-12
        else:
            ok = have == value
        if not ok:
            bad.append(f"{key}: {have!r} != {value!r}")
    return bad


@pytest.mark.parametrize("fmt", list(WRITERS))
@pytest.mark.parametrize("fault", list(FAULTS))
def test_step_metrics_equal_ground_truth(tmp_path: Path, fmt: str, fault: str) -> None:
    sc, analysis = _analysis(fmt, FAULTS[fault], tmp_path)
    truth = step_truth(sc, kernel_roles=KERNEL_ROLES.get(fmt, ()))
    rows = analysis.step_metrics.to_dicts()
    assert analysis.steps.method == "marker" and len(rows) == len(truth) == 4
    shift = rows[0]["start"] - truth[0]["start"]  # parsers rebase time; durations do not move
    for got, want in zip(rows, truth):
        assert _same(got, want, shift) == [], f"step {want['step']}"


@pytest.mark.parametrize("fmt", list(WRITERS))
def test_clean_scenario_is_silent(tmp_path: Path, fmt: str) -> None:
    _, analysis = _analysis(fmt, {}, tmp_path)
    assert analysis.findings == []
    assert analysis.rules == ["overlap", "fallback", "mc2", "bubbles"]


@pytest.mark.parametrize("fmt", list(WRITERS))
def test_fallback_rule_reports_each_step_with_its_time(tmp_path: Path, fmt: str) -> None:
    sc, analysis = _analysis(fmt, FAULTS["fallback"], tmp_path)
    truth = step_truth(sc, kernel_roles=KERNEL_ROLES.get(fmt, ()))
    found = [f for f in analysis.findings if f.rule == "fallback"]
    assert [f.step for f in found] == [0, 1, 2, 3] and len(analysis.findings) == 4
    for f, want in zip(found, truth):
        assert f.metrics["fallback_ns"] == want["fallback_ns"] > 0
        assert f.metrics["fallback_count"] == 3
        assert f.metrics["fallback_share"] == pytest.approx(want["fallback_share"], abs=1e-12)
    assert sum(f.metrics["fallback_ns"] for f in found) == sc.truth["fallback_ns"]


@pytest.mark.parametrize("fmt", list(WRITERS))
def test_overlap_rule_finds_the_exposed_dispatch(tmp_path: Path, fmt: str) -> None:
    sc, analysis = _analysis(fmt, FAULTS["exposed"], tmp_path)
    [(start, end)] = sc.truth["exposed_dispatch"]
    [finding] = analysis.findings
    assert (finding.rule, finding.step) == ("overlap", 2)
    assert finding.metrics["exposed_ns"] == end - start
    assert finding.metrics["count"] == 1
    assert finding.metrics["exposed_comm_ns"] == step_truth(sc)[2]["exposed_comm_ns"]


@pytest.mark.parametrize("fmt", list(WRITERS))
def test_bubbles_rule_finds_the_host_stall(tmp_path: Path, fmt: str) -> None:
    sc, analysis = _analysis(fmt, FAULTS["bubble"], tmp_path)
    [(drained, resume)] = sc.truth["bubbles"]
    [finding] = analysis.findings
    assert (finding.rule, finding.step) == ("bubbles", 2)
    assert finding.metrics["largest_bubble_ns"] == resume - drained == 150_000
    assert finding.metrics["bubble_ns"] == step_truth(sc)[2]["bubble_ns"]
    assert finding.evidence["causes"][0] == "host-bound: launch"


@pytest.mark.parametrize("fmt", list(WRITERS))
def test_mc2_rule_finds_every_unfused_pair(tmp_path: Path, fmt: str) -> None:
    sc, analysis = _analysis(fmt, FAULTS["unfused"], tmp_path)
    found = [f for f in analysis.findings if f.rule == "mc2"]
    assert len(found) == len(analysis.findings) == 4
    assert sum(f.metrics["pairs"] for f in found) == len(sc.truth["unfused_pairs"]) == 16
    coll = {c for _, c in sc.truth["unfused_pairs"]}
    want_ns = sum(e - s for s, e, _, kind, role, _ in sc.truth["work"] if role == "nccl_allreduce")
    assert sum(f.metrics["collective_ns"] for f in found) == want_ns
    assert len(coll) == 16 and KERNELS["nccl_allreduce"].comm
