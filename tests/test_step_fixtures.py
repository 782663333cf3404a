"""Steps on serving-engine shapes of the scenario, written by the vendors' fixture writers,
against the scenario's own ground truth: step counts, windows, phases and tokens.

* engine annotations (vLLM, SGLang) on host and device (Kineto) or as NVTX (Nsight Systems);
* Python frames of the engine's step function only (no annotations);
* a piecewise-graph decode: one graph launch per layer piece, tens per step;
* a markerless, graphless back-to-back decode after a load phase and a prefill;
* a torch_npu decode whose host runs ahead and whose HCCL tasks have no launch link, against
  the ``step_trace_time.csv`` written beside it.
"""

from __future__ import annotations

import csv
from collections.abc import Callable
from pathlib import Path

import polars as pl
import pyarrow as pa
import pytest

import tracekit
from fixtures.ascend_scenario import build_ascend_scenario
from fixtures.ascend_text_writer import write_torch_npu
from fixtures.kineto_writer import write_kineto_json
from fixtures.nsys_writer import write_nsys_sqlite
from fixtures.rocprof_csv_writer import write_rocprofv3_csv
from fixtures.scenario import Scenario, build_scenario
from fixtures.serving import decode, mixed, prefill
from tracekit.steps import find_steps
from tracekit.steps.period import PRE_LABEL

BATCHES = [prefill(2), decode(64), decode(64), mixed(1, 256, 63), decode(48), decode(64)]
Writer = Callable[[pl.DataFrame, Path], Path]
WRITERS: dict[str, Writer] = {
    "kineto-cuda": lambda ev, tmp: write_kineto_json(ev, tmp / "trace.json"),
    "kineto-rocm": lambda ev, tmp: write_kineto_json(ev, tmp / "trace.json.gz", flavour="rocm"),
    "nsys": lambda ev, tmp: write_nsys_sqlite(ev, tmp / "trace.sqlite"),
}
# SGLang's scheduler iteration as a Python frame (python/sglang/srt/managers/scheduler.py)
SGLANG_FRAME = "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py(2919): run_batch"


def _analyze(sc: Scenario, writer: Writer, tmp: Path) -> tracekit.Analysis:
    return tracekit.analyze(tracekit.load(writer(sc.events, tmp)))


def _windows(analysis: tracekit.Analysis) -> list[tuple[int, int]]:
    return analysis.windows.sort("step").select("start", "end").rows()


def _shifted(
    truth: list[tuple[int, int]], analysis: tracekit.Analysis, first: tuple[int, int]
) -> list[tuple[int, int]]:
    """Truth windows moved onto the timeline's clock (its origin differs by writer)."""
    shift = _windows(analysis)[0][0] - first[0]
    return [(s + shift, e + shift) for s, e in truth]


@pytest.mark.parametrize("writer", list(WRITERS))
@pytest.mark.parametrize("marker", ["vllm", "vllm-native", "sglang"])
def test_engine_annotations_give_steps_phases_and_tokens(
    tmp_path: Path, writer: str, marker: str
) -> None:
    sc = build_scenario(steps=6, layers=3, marker=marker, batches=BATCHES)
    frame = SGLANG_FRAME if marker == "sglang" else None
    if frame and writer.startswith("kineto"):  # SGLang's iteration frame holds its spans
        flavour = "rocm" if writer == "kineto-rocm" else "cuda-2024"
        a = tracekit.analyze(
            tracekit.load(
                write_kineto_json(sc.events, tmp_path / "t.json", flavour=flavour, step_frame=frame)
            )
        )
    else:
        a = _analyze(sc, WRITERS[writer], tmp_path)
        frame = None
    truth = sc.truth["step_table"]
    assert (a.steps.method, a.steps.confidence, len(a.steps)) == ("marker", "high", 6)
    labels = [frame] * 6 if frame else [t["label"] for t in truth]
    assert a.steps.ranges["label"].to_list() == labels
    assert a.steps.ranges["phase"].to_list() == [t["phase"] for t in truth]
    assert a.steps.ranges["tokens"].to_list() == [t["tokens"] for t in truth]
    windows = sc.truth["step_windows"]
    assert _windows(a) == _shifted(windows, a, windows[0])
    m = a.step_metrics.sort("step")
    assert m["phase"].to_list() == ["prefill", "decode", "decode", "mixed", "decode", "decode"]
    per_token = [None if t["tokens"] is None else d / t["tokens"] for d, t in zip(m["dur"], truth)]
    assert m["ns_per_token"].to_list() == per_token
    assert a.placement["launch"] == a.work.height  # every row by its launch


def test_device_copies_of_the_annotations_alone_give_the_same_steps(tmp_path: Path) -> None:
    """A Kineto trace that kept only the gpu_user_annotation rows (no host ranges, no Python
    frames): steps by device time."""
    sc = build_scenario(steps=6, layers=3, marker="vllm", batches=BATCHES)
    path = write_kineto_json(sc.events, tmp_path / "t.json")
    timeline = tracekit.load(path)
    host_ranges = pl.col("kind").cast(pl.String).is_in(["range", "op"]) & (pl.col("device") < 0)
    kept = timeline.events.filter(pa.array(~timeline.df.select(host_ranges).to_series()))
    only_device = tracekit.Timeline(kept, timeline.meta)
    a = tracekit.analyze(only_device)
    assert (a.steps.method, len(a.steps), a.steps.by_device_time) == ("marker", 6, True)
    assert a.steps.ranges["tokens"].to_list() == [t["tokens"] for t in sc.truth["step_table"]]
    windows = sc.truth["step_windows"]
    assert _windows(a) == _shifted(windows, a, windows[0])


def test_python_frames_of_the_step_function_mark_steps_and_kernels_tell_phases(
    tmp_path: Path,
) -> None:
    sc = build_scenario(steps=6, layers=3, batches=BATCHES)
    path = write_kineto_json(sc.events, tmp_path / "t.json", annotations=False)
    a = tracekit.analyze(tracekit.load(path))
    assert (a.steps.method, len(a.steps)) == ("marker", 6)
    assert "python" in a.steps.detail
    assert a.steps.phase_method == "kernels"  # FlashMLA decode / FlashInfer ragged prefill
    assert a.steps.ranges["phase"].to_list() == [t["phase"] for t in sc.truth["step_table"]]
    windows = sc.truth["step_windows"]
    assert _windows(a) == _shifted(windows, a, windows[0])


@pytest.mark.parametrize("writer", ["kineto-cuda", "nsys"])
def test_piecewise_graphs_are_one_step_each(tmp_path: Path, writer: str) -> None:
    layers = 24  # 25 graph launches per step, attention eager between them
    sc = build_scenario(steps=5, layers=layers, marker="none", graphs="piecewise")
    a = _analyze(sc, WRITERS[writer], tmp_path)
    launches = a.rows.filter(pl.col("name").cast(pl.String).str.contains("GraphLaunch"))
    assert launches.height == 5 * (layers + 1)
    assert (a.steps.method, a.steps.confidence, len(a.steps)) == ("graph", "medium", 5)
    assert f"grouped by host synchronisation ({layers + 1} per step)" in a.steps.detail
    windows = sc.truth["step_windows"]
    assert _windows(a) == _shifted(windows, a, windows[0])
    assert a.placement["launch"] == a.work.height


def test_piecewise_graphs_under_the_step_function(tmp_path: Path) -> None:
    sc = build_scenario(steps=5, layers=24, graphs="piecewise")
    path = write_kineto_json(sc.events, tmp_path / "t.json", annotations=False)
    a = tracekit.analyze(tracekit.load(path))
    assert (a.steps.method, len(a.steps)) == ("marker", 5) and "python" in a.steps.detail
    windows = sc.truth["step_windows"]
    assert _windows(a) == _shifted(windows, a, windows[0])


BACK_TO_BACK = {
    "kineto-cuda": WRITERS["kineto-cuda"],
    "nsys": WRITERS["nsys"],
    "rocprofv3-csv": lambda ev, tmp: write_rocprofv3_csv(ev, tmp)["kernel_trace"],
}


@pytest.mark.parametrize("writer", list(BACK_TO_BACK))
def test_back_to_back_decode_after_a_load_phase(tmp_path: Path, writer: str) -> None:
    """No marker, no graph, no idle gap between tokens (the host runs a step ahead): the
    period of the kernels gives the steps; the load phase is one window, the prefill a step."""
    tokens = 9
    sc = build_scenario(
        steps=1 + tokens,
        layers=3,
        marker="none",
        host_ahead=1,
        warmup_copies=30,
        batches=[prefill(1)] + [decode(8)] * tokens,
    )
    a = _analyze(sc, BACK_TO_BACK[writer], tmp_path)
    assert (a.steps.method, a.steps.confidence, len(a.steps)) == ("period", "medium", 11)
    ranges = a.steps.ranges
    assert ranges["label"][0] == PRE_LABEL
    assert ranges["phase"].to_list() == [None, "prefill", *["decode"] * tokens]
    load, windows = sc.truth["load_window"], sc.truth["step_windows"]
    assert _windows(a) == _shifted([load, *windows], a, load)
    load_only = find_steps(a.rows.filter(pl.col("ts") < _windows(a)[1][0]))
    # the load phase alone: its copies make bursts of one row each, no steps: one window
    assert (load_only.method, len(load_only)) == ("whole", 1)
    decode_median = next(p for p in a.to_dict()["phases"] if p["phase"] == "decode")
    assert decode_median["steps"] == tokens


def _step_trace(folder: Path) -> list[dict[str, str]]:
    with (folder / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv").open() as fh:
        return list(csv.DictReader(fh))


@pytest.mark.parametrize(("ahead", "frames"), [(1, False), (2, False), (1, True)])
def test_torch_npu_host_ahead_matches_its_step_trace_time(
    tmp_path: Path, ahead: int, frames: bool
) -> None:
    """The host launches step k+1 (or k+2) while the device runs step k, and HCCL tasks have
    no launch link: they are placed by the device windows, and every step's Computing,
    Communication (Not Overlapped) and Overlapped equal torch_npu's own. The steps are
    ProfilerStep#N, or vllm-ascend's execute_model Python frames."""
    sc = build_ascend_scenario(
        steps=6,
        layers=4,
        host_ahead=ahead,
        hccl_flows=False,
        hccl_all_to_all_layers=4,
        unfused_collective=True,
        fallback_kernel=False,
        step_frames=frames,
    )
    out = write_torch_npu(sc.events, tmp_path)
    a = tracekit.analyze(tracekit.load(out))
    assert (a.steps.method, a.steps.confidence, len(a.steps)) == ("marker", "high", 6)
    assert ("python" if frames else "pytorch") in a.steps.detail
    hccl = a.work.filter(pl.col("corr").is_null())
    assert hccl.height > 0 and set(hccl["placed"].to_list()) == {"device_window"}
    rows = _step_trace(out)
    assert len(rows) == a.step_metrics.height == 6
    for want, got in zip(rows, a.step_metrics.sort("step").iter_rows(named=True)):
        assert got["compute_ns"] / 1e3 == pytest.approx(float(want["Computing"]), abs=5e-4)
        not_overlapped = float(want["Communication(Not Overlapped)"])
        assert got["exposed_comm_ns"] / 1e3 == pytest.approx(not_overlapped, abs=5e-4)
        overlapped = (got["comm_ns"] - got["exposed_comm_ns"]) / 1e3
        assert overlapped == pytest.approx(float(want["Overlapped"]), abs=5e-4)
