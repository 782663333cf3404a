"""analyze() on the scenario in every vendor format: exact step metrics, nothing found in the
clean scenario but its fused operators, and every planted fault one finding, ranked by
impact (each rule's findings: tests/rules/)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from fixtures.step_truth import step_truth
from tests.rules.scenarios import FAULTS, KERNEL_ROLES, WRITERS, analysed
from tracekit.model import ranked
from tracekit.rules import registry


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
    sc, analysis = analysed(fmt, FAULTS[fault], tmp_path)
    truth = step_truth(sc, kernel_roles=KERNEL_ROLES.get(fmt, ()))
    rows = analysis.step_metrics.to_dicts()
    assert analysis.steps.method == "marker" and len(rows) == len(truth) == 4
    shift = rows[0]["start"] - truth[0]["start"]  # parsers rebase time; durations do not move
    for got, want in zip(rows, truth):
        assert _same(got, want, shift) == [], f"step {want['step']}"


@pytest.mark.parametrize("fmt", list(WRITERS))
def test_clean_scenario_lists_only_its_fused_operators(tmp_path: Path, fmt: str) -> None:
    _, analysis = analysed(fmt, {}, tmp_path)
    found = analysis.findings
    assert {(f.rule, f.severity) for f in found} == {("mc2", "info")}
    assert len(found) == 3 and all(f.pattern.startswith("fused: ") for f in found)
    assert analysis.rules == list(registry.available())


@pytest.mark.parametrize("fmt", ["nsys", "rocpd"])
def test_every_planted_fault_is_one_ranked_finding(tmp_path: Path, fmt: str) -> None:
    """All four faults at once: each rule finds its pattern once (and mc2 the two DeepEP
    operators), ranked by impact, each with advice for the trace's vendor."""
    knobs = {k: v for knobs in FAULTS.values() for k, v in knobs.items()}
    _, analysis = analysed(fmt, knobs, tmp_path)
    found = analysis.findings
    assert found == ranked(found)
    assert [f.impact_ns for f in found] == sorted((f.impact_ns for f in found), reverse=True)
    assert Counter(f.rule for f in found) == {"bubbles": 1, "fallback": 1, "overlap": 1, "mc2": 3}
    mc2 = sorted(f.pattern.split(": ")[0] for f in found if f.rule == "mc2")
    assert mc2 == ["fused", "fused", "unfused"]  # DeepEP dispatch and combine; the pair
    assert all(f.advice and f.steps and f.impact_ns > 0 for f in found)
    assert {f.steps == [2] for f in found if f.rule in ("bubbles", "overlap")} == {True}
    assert {f.steps == [0, 1, 2, 3] for f in found if f.rule in ("fallback", "mc2")} == {True}
