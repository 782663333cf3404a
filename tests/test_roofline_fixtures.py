"""The roofline end to end on generated traces whose writers record shapes the way the real
exports do: per operator (one of each family, Kineto and torch_npu) and per decode step and
family (the Kineto scenario), FLOPs and bytes equal the fixtures' hand computation; the step
metrics add up; traces without shapes get no roofline."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import polars as pl
import pytest

import tracekit
from fixtures.ascend_text_writer import write_torch_npu
from fixtures.kineto_writer import write_kineto_json
from fixtures.scenario import build_scenario
from fixtures.shaped_ops import (
    ASCEND_OPS,
    ASCEND_TRUTH,
    TORCH_OPS,
    TORCH_TRUTH,
    ascend_events,
    torch_events,
)

STEPS, LAYERS = 3, 2


def _row(analysis: tracekit.Analysis, op: str, kernel: str) -> dict:
    rows = analysis.roofline.rows.filter((pl.col("op") == op) & (pl.col("name") == kernel))
    [row] = rows.to_dicts()
    return row


@pytest.fixture(scope="module")
def torch_ops(tmp_path_factory: pytest.TempPathFactory) -> tracekit.Analysis:
    path = write_kineto_json(torch_events(), tmp_path_factory.mktemp("ops") / "ops.json")
    return tracekit.analyze(tracekit.load(path))


@pytest.fixture(scope="module")
def ascend_ops(tmp_path_factory: pytest.TempPathFactory) -> tracekit.Analysis:
    folder = write_torch_npu(ascend_events(), tmp_path_factory.mktemp("npu"))
    return tracekit.analyze(tracekit.load(folder), device="910b2")


@pytest.mark.parametrize("key", list(TORCH_TRUTH))
def test_each_torch_family_gets_the_hand_computed_work(
    torch_ops: tracekit.Analysis, key: str
) -> None:
    op, kernel = TORCH_OPS[key]
    truth = TORCH_TRUTH[key]
    row = _row(torch_ops, op.name, kernel)
    assert (row["family"], row["exact"]) == (truth["family"], truth["exact"])
    assert row["flops"] == truth["flops"]
    assert row["bytes"] == truth["bytes"]


@pytest.mark.parametrize("key", list(ASCEND_TRUTH))
def test_each_ascend_family_gets_the_hand_computed_work(
    ascend_ops: tracekit.Analysis, key: str
) -> None:
    name, op_type = ASCEND_OPS[key][:2]
    truth = ASCEND_TRUTH[key]
    rows = ascend_ops.roofline.rows.filter(pl.col("name") == name).to_dicts()
    shapes = ASCEND_OPS[key][3]
    [row] = [r for r in rows if r["shapes"].startswith(shapes.split(";")[0].replace(",", "×"))]
    assert row["op"] == op_type
    assert (row["family"], row["exact"]) == (truth["family"], truth["exact"])
    assert row["flops"] == truth["flops"]
    assert row["bytes"] == truth["bytes"]


def test_the_bound_is_flops_at_the_peak_or_bytes_at_the_bandwidth(
    torch_ops: tracekit.Analysis,
) -> None:
    """On the H200 the Kineto writer names: bf16 989.5 TFLOP/s dense, 4.8 TB/s."""
    op, kernel = TORCH_OPS["mm"]
    row = _row(torch_ops, op.name, kernel)
    truth = TORCH_TRUTH["mm"]
    assert row["compute_ns"] == pytest.approx(truth["flops"] / 989.5e3)
    assert row["memory_ns"] == pytest.approx(truth["bytes"] / 4800)
    assert row["bound_ns"] == pytest.approx(max(row["compute_ns"], row["memory_ns"]))


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory):
    sc = build_scenario(steps=STEPS, layers=LAYERS, record_shapes=True)
    path = write_kineto_json(sc.events, tmp_path_factory.mktemp("sc") / "sc.json")
    return sc, tracekit.analyze(tracekit.load(path))


def test_scenario_work_per_step_and_family_is_the_truth(scenario) -> None:
    sc, analysis = scenario
    rows = analysis.roofline.rows
    found: dict[tuple[int, str], list[float]] = defaultdict(lambda: [0.0, 0.0])
    for step, family, flops, nbytes in rows.select("step", "family", "flops", "bytes").iter_rows():
        found[(step, family)][0] += flops
        found[(step, family)][1] += nbytes
    truth = {
        (step, family): (v["flops"], v["bytes"])
        for step, families in enumerate(sc.truth["roofline_steps"])
        for family, v in families.items()
    }
    assert set(found) == set(truth)
    for key, (flops, nbytes) in truth.items():
        assert found[key][0] == pytest.approx(flops, rel=1e-12), key
        assert found[key][1] == pytest.approx(nbytes, rel=1e-12), key


def test_step_roofline_columns_add_up(scenario) -> None:
    _, analysis = scenario
    rows, metrics = analysis.roofline.rows, analysis.step_metrics
    per_step = rows.group_by("step").agg(pl.col("bound_ns").sum(), pl.col("dur").sum())
    bounds = dict(per_step.select("step", "bound_ns").iter_rows())
    assert metrics["step"].to_list() == list(range(STEPS))
    for step, roofline, share in metrics.select("step", "roofline_ns", "shaped_share").iter_rows():
        assert roofline == round(bounds[step])
        assert 0 < share < 1  # communication and copies carry no shapes
    assert set(metrics["bound"]) <= {"memory", "compute", "mixed"}


def test_a_trace_without_shapes_has_no_roofline(tmp_path: Path) -> None:
    sc = build_scenario(steps=2, layers=2)
    analysis = tracekit.analyze(tracekit.load(write_kineto_json(sc.events, tmp_path / "t.json")))
    assert analysis.roofline.rows.height == 0
    assert analysis.step_metrics["roofline_ns"].null_count() == analysis.step_metrics.height
    assert analysis.step_metrics["shaped_share"].to_list() == [0.0, 0.0]
    [check] = [c for c in analysis.checks if c.name == "roofline.devices"]
    assert check.status == "skip"
    assert not [f for f in analysis.findings if f.rule == "efficiency"]
