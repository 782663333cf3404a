"""``diff`` reports efficiency changes per operator family: the same shapes on both sides, a
different time. On the shaped Kineto scenario the dense GEMMs run 30 % longer in the head:
the gemm family's same-shape time grows, its efficiency falls by the same factor, and the
families that did not change are not listed."""

from __future__ import annotations

from pathlib import Path

import pytest

import tracekit
from fixtures.kineto_writer import write_kineto_json
from fixtures.scenario import build_scenario
from tracekit.diff import compare
from tracekit.reports.diff_markdown import render_diff_markdown

SLOWER = 1.3
SCALED_OPS = {"aten::mm", "aten::addmm"}  # the dense GEMM roles' operators


def _analysed(tmp: Path, name: str, gemm_scale: float) -> tracekit.Analysis:
    sc = build_scenario(steps=4, layers=2, record_shapes=True, gemm_scale=gemm_scale)
    return tracekit.analyze(tracekit.load(write_kineto_json(sc.events, tmp / name)))


@pytest.fixture(scope="module")
def diff(tmp_path_factory: pytest.TempPathFactory) -> dict:
    tmp = tmp_path_factory.mktemp("diff")
    base, head = _analysed(tmp, "base.json", 1.0), _analysed(tmp, "head.json", SLOWER)
    return compare([base], [head]).to_dict()


def test_the_slower_gemms_are_listed_with_their_efficiency(diff: dict) -> None:
    [gemm] = [f for f in diff["efficiency"] if f["family"] == "gemm"]
    assert 0.05 < gemm["rel"] < SLOWER - 1  # the bmm and _scaled_mm GEMMs did not change
    eff = gemm["efficiency"]
    assert eff["head"] < eff["base"]
    assert gemm["moved"], "the scaled shapes are listed"
    for moved in gemm["moved"]:
        assert moved["op"] in SCALED_OPS
        assert moved["rel"] == pytest.approx(SLOWER - 1, abs=2e-3)  # durations round to ns
        base_eff, head_eff = moved["efficiency"]
        assert head_eff == pytest.approx(base_eff / SLOWER, rel=2e-3)


def test_unchanged_families_are_not_listed(diff: dict) -> None:
    assert {f["family"] for f in diff["efficiency"]} == {"gemm"}


def test_the_markdown_has_the_section(diff: dict) -> None:
    text = render_diff_markdown(diff)
    assert "#### Efficiency, same shapes on both sides" in text
    assert "- <code>gemm</code> (" in text
