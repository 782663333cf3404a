"""Rule ``mc2``: an all-reduce right after the ``o_proj`` GEMM in every layer triggers it;
the clean scenario, with no such pair, does not."""

from __future__ import annotations

from pathlib import Path

import pytest

from fixtures.scenario import KERNELS
from tests.rules.scenarios import ASCEND_WRITERS, WRITERS, Analysed, ascend_analysed

RULE = "mc2"


@pytest.mark.parametrize("fmt", list(WRITERS))
def test_mc2_rule_finds_every_unfused_pair(scenario: Analysed, fmt: str) -> None:
    sc, analysis = scenario(fmt, "unfused")
    found = [f for f in analysis.findings if f.rule == RULE]
    assert len(found) == len(analysis.findings) == 4
    assert sum(f.metrics["pairs"] for f in found) == len(sc.truth["unfused_pairs"]) == 16
    coll = {c for _, c in sc.truth["unfused_pairs"]}
    want_ns = sum(e - s for s, e, _, kind, role, _ in sc.truth["work"] if role == "nccl_allreduce")
    assert sum(f.metrics["collective_ns"] for f in found) == want_ns
    assert len(coll) == 16 and KERNELS["nccl_allreduce"].comm


@pytest.mark.parametrize("writer", list(ASCEND_WRITERS))
def test_unfused_pairs_of_the_ascend_scenario(tmp_path: Path, writer: str) -> None:
    # hcom_allReduce next to the o_proj MatMul
    found = ascend_analysed(writer, tmp_path, unfused_collective=True).findings
    assert {f.rule for f in found} == {RULE} and sum(f.metrics["pairs"] for f in found) == 16


@pytest.mark.parametrize("fmt", list(WRITERS))
def test_clean_scenario_has_no_unfused_pair(scenario: Analysed, fmt: str) -> None:
    _, analysis = scenario(fmt, "clean")
    assert [f for f in analysis.findings if f.rule == RULE] == []
