"""analyze() on the scenario in every vendor format: exact step metrics, and nothing found in
the clean scenario (each rule's findings: tests/rules/)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fixtures.step_truth import step_truth
from tests.rules.scenarios import FAULTS, KERNEL_ROLES, WRITERS, analysed
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
def test_clean_scenario_is_silent(tmp_path: Path, fmt: str) -> None:
    _, analysis = analysed(fmt, {}, tmp_path)
    assert analysis.findings == []
    assert analysis.rules == list(registry.available())
