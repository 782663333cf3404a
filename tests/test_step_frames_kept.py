"""Parsers keep the serving engines' step-function frames (step markers) even when they drop
the other Python rows: Kineto (fixture) and torch_npu text and db exports (real 910B samples,
whose frames are ``main.py(282): main_worker``-like; the test takes one of them for a step
function)."""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl
import pytest

from tests.conftest import real_file
from tracekit.engine_frames import STEP_FUNCTIONS
from tracekit.parsers import msprof
from tracekit.parsers.msprof import db_host as msprof_db
from tracekit.parsers.msprof import trace_layers

FRAME = re.compile(r"\.py\(\d+\): ")


@pytest.mark.parametrize(
    ("name", "kept"),
    [
        ("vllm/v1/worker/gpu_model_runner.py(3380): execute_model", True),
        ("vllm/v1/worker/gpu_worker.py(455): execute_model", True),
        ("vllm/worker/model_runner.py(1654): execute_model", True),
        ("vllm/v1/worker/gpu/model_runner.py(176): execute_model", True),
        ("vllm_ascend/worker/model_runner_v1.py(1777): execute_model", True),
        ("/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py(2919): run_batch", True),
        ("tensorrt_llm/_torch/pyexecutor/py_executor.py(1310): _forward_step", True),
        ("vllm/v1/worker/gpu_model_runner.py(1983): _compute_cascade_attn_prefix_lens", False),
        ("vllm/v1/worker/gpu_model_runner.py(3087): synchronize_input_prep", False),
        (
            "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py(2919): _run_batch_inner",
            False,
        ),
        ("torch/nn/modules/module.py(1773): _call_impl", False),
        ("my_model.py(10): execute_model_inputs", False),
    ],
)
def test_step_function_frames(name: str, kept: bool) -> None:
    assert (re.search(STEP_FUNCTIONS, name) is not None) == kept


@pytest.mark.parametrize("export", ["text", "db"])
def test_torch_npu_exports_keep_only_step_function_frames(
    export: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = real_file("ascend", f"msinsight_torchnpu_910B_2rank/{export}/level1/rank0_ascend_pt")
    full = _frames(msprof.parse(run, include_python=True).df)
    assert full.height > 500
    assert _frames(msprof.parse(run).df).height == 0  # no step function among them
    step_function = r"main\.py\(\d+\): main_worker$"  # stands for execute_model here
    want = full.filter(pl.col("name").str.contains(step_function))
    assert want.height >= 1
    for module in (msprof_db, trace_layers):
        monkeypatch.setattr(module, "STEP_FUNCTIONS", step_function)
    kept = _frames(msprof.parse(run).df)
    assert kept.sort("ts").rows() == want.sort("ts").rows()


def _frames(df: pl.DataFrame) -> pl.DataFrame:
    rows = df.with_columns(pl.col("name").cast(pl.String), pl.col("kind").cast(pl.String))
    return rows.filter(pl.col("name").str.contains(FRAME.pattern)).select(
        "ts", "dur", "kind", "name"
    )


def test_kineto_keeps_step_function_frames(tmp_path: Path) -> None:
    from fixtures.kineto_writer import write_kineto_json
    from fixtures.scenario import build_scenario
    from tracekit.parsers import kineto

    sc = build_scenario(steps=3, layers=1)
    path = write_kineto_json(sc.events, tmp_path / "t.json")
    kept = _frames(kineto.parse(path).df)
    assert kept["name"].to_list() == ["vllm/v1/worker/gpu_model_runner.py(1412): execute_model"] * 3
    assert set(kept["kind"].to_list()) == {"op"}
