"""The rule tests' fixture: the scenario with a planted fault, analysed once per session."""

from __future__ import annotations

import pytest

import tracekit
from fixtures.scenario import Scenario
from tests.rules.scenarios import FAULTS, PARTIAL, Analysed, analysed


@pytest.fixture(scope="session")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> Analysed:
    """``scenario(fmt, fault)``: the scenario with the fault of ``FAULTS`` (or ``PARTIAL``:
    the fault in some steps only) in format ``fmt``, and its analysis (made once per
    session, shared by the rule tests)."""
    made: dict[tuple[str, str], tuple[Scenario, tracekit.Analysis]] = {}

    def get(fmt: str, fault: str) -> tuple[Scenario, tracekit.Analysis]:
        if (fmt, fault) not in made:
            tmp = tmp_path_factory.mktemp(f"{fmt}-{fault}")
            made[fmt, fault] = analysed(fmt, {**FAULTS, **PARTIAL}[fault], tmp)
        return made[fmt, fault]

    return get
