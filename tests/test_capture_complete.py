"""``capture.complete``: partial captures warn or fail with their numbers and are said first
in every output; complete ones pass; a trace without device rows skips its device checks
instead of passing them."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

import tracekit
from fixtures.capture import cut_torch_npu, dropped_kernels, partial_graph, short_rocprof_v1
from fixtures.kineto_writer import write_kineto_json
from fixtures.nsys_writer import write_nsys_sqlite
from fixtures.scenario import build_scenario
from tests.conftest import real_root, run_cli
from tracekit.checks.capture import NAME, capture_check
from tracekit.export import save
from tracekit.model import STATUSES, Check
from tracekit.reports.markdown import render_markdown
from tracekit.timeline import Timeline, build_table

DEVICE_CHECKS = (
    "steps.cover",
    "categories.sum",
    "steps.giant",
    "steps.placement",
    "rows.device",
    "comm.present",
    "comm.unknown",
)


def _capture(path: Path) -> Check:
    timeline = tracekit.load(path)
    return capture_check(timeline.df, timeline.meta)


@pytest.fixture(scope="module")
def graph_traces(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[Path], dict]:
    events, truth = partial_graph()
    folder = tmp_path_factory.mktemp("graph")
    paths = [
        write_kineto_json(events, folder / "partial_graph.json"),
        write_nsys_sqlite(events, folder / "partial_graph.sqlite"),
    ]
    return paths, truth


def test_partial_graph_replays_fail_with_kernel_and_window_time(graph_traces) -> None:
    paths, truth = graph_traces
    assert truth == {
        "graph_launches": 3,
        "window_ns": 9_675_000,
        "busy_ns": 300_000,
        "launch_calls": 5,
    }
    for path in paths:  # Kineto JSON and nsys SQLite say the same
        check = _capture(path)
        assert check.status == "fail", (path, check.detail)  # 3% recorded: under half
        assert (check.expected, check.actual) == (truth["window_ns"], truth["busy_ns"])
        assert check.detail.startswith(
            "3 graph launch(es) hold 0.3 ms of device rows in the 9.7 ms up to the"
            " synchronisation that waited for them (3%"
        ), check.detail


def test_launches_without_device_rows_warn_with_their_count(tmp_path: Path) -> None:
    events, truth = dropped_kernels(every=10)
    assert truth == {"launch_calls": 280, "without_rows": 14}
    check = _capture(write_kineto_json(events, tmp_path / "dropped.json"))
    assert check.status == "warn"
    assert (check.expected, check.actual) == (280, 266)
    assert check.detail == "14 of 280 launch calls have no device row (cudaLaunchKernel ×14)"


def test_a_torch_npu_export_cut_at_200_rows_fails_against_op_statistic(tmp_path: Path) -> None:
    folder, truth = cut_torch_npu(tmp_path)
    assert truth == {"counted": 552, "listed": 194, "rows": 200, "full_rows": 568}
    check = _capture(folder)
    assert check.status == "fail"  # 194 of 552 calls: a third of the run
    assert (check.expected, check.actual) == (552, 194)
    assert check.detail == (
        "op_statistic.csv counts 552 calls; the export lists 194 of them (358 missing);"
        " rank 0 holds exactly 200 kernel rows: the export looks cut at a row limit"
    )


def test_a_rocprof_results_csv_shorter_than_its_stats_warns(tmp_path: Path) -> None:
    trace, truth = short_rocprof_v1(tmp_path / "roc")
    assert truth == {"counted": 552, "listed": 500, "rows": 500}
    check = _capture(trace)
    assert check.status == "warn"  # 91% recorded
    assert (check.expected, check.actual) == (552, 500)
    assert check.detail.startswith("results.stats.csv counts 552 calls; the export lists 500")
    assert "rank 0 holds exactly 500 kernel rows" in check.detail


def test_complete_scenarios_pass(tmp_path: Path) -> None:
    events = build_scenario().events
    for path in (
        write_kineto_json(events, tmp_path / "full.json"),
        write_nsys_sqlite(events, tmp_path / "full.sqlite"),
    ):
        check = _capture(path)
        assert check.status == "pass", check.detail
        assert check.detail == "every launch call has its device rows (280 calls)"
    full = build_scenario(steps=8).events
    from fixtures.rocprof_v1_csv_writer import write_results_csv, write_stats_csv

    write_stats_csv(full, tmp_path / "results.stats.csv")
    check = _capture(write_results_csv(full, tmp_path / "results.csv"))
    assert check.status == "pass", check.detail
    assert "results.stats.csv" in check.detail


def _timeline(events: pl.DataFrame) -> Timeline:
    return Timeline(
        build_table({c: events[c].to_list() for c in events.columns}), {"format": "test"}
    )


def _host_only(events: pl.DataFrame) -> Timeline:
    return _timeline(events.filter(pl.col("kind").is_in(["api", "range"])))


def test_a_host_only_trace_skips_its_device_checks_and_fails_the_capture() -> None:
    analysis = tracekit.analyze(_host_only(build_scenario().events))
    by = {c.name: c for c in analysis.checks}
    for name in DEVICE_CHECKS:
        assert by[name].status == "skip", (name, by[name].detail)
        assert "pass" not in by[name].detail
    assert by["steps.cover"].detail == "no device work in this trace"
    assert by[NAME].status == "fail"
    assert by[NAME].detail.startswith("none of 280 launch calls has a device row")
    assert analysis.capture_note.startswith("incomplete capture: none of 280 launch calls")
    statuses = [c.status for c in analysis.checks]
    assert (statuses[0], statuses[-1]) == ("fail", "skip")  # said first; skips after passes
    assert STATUSES.index("skip") == STATUSES.index("pass") + 1


def test_a_trace_with_nothing_to_check_skips_the_capture_check() -> None:
    ranges = build_scenario().events.filter(pl.col("kind") == "range")
    analysis = tracekit.analyze(_timeline(ranges))
    by = {c.name: c for c in analysis.checks}
    assert by[NAME].status == "skip"
    assert analysis.capture_note is None
    assert all(by[name].status == "skip" for name in DEVICE_CHECKS)


def test_the_capture_note_is_said_first_in_every_output(graph_traces, tmp_path: Path) -> None:
    path = graph_traces[0][0]
    analysis = tracekit.analyze(tracekit.load(path))
    note = analysis.capture_note
    assert note.startswith("incomplete capture: 3 graph launch(es) hold 0.3 ms")
    data = analysis.to_dict()
    assert data["capture_note"] == note
    md = render_markdown(data)
    first = md.index("> ⚠ **incomplete capture: 3 graph launch")
    assert first < md.index("**Workload:**") < md.index(") found by")
    if data["low_confidence"]:
        assert first < md.index("low confidence")
    from tracekit.reports.report import render

    html = render([analysis], "html", (), 100)
    assert json.dumps(note)[1:-1] in html or note in html
    env = {"COLUMNS": "300"}
    for command in ("check", "summary", "info"):
        done = run_cli("--no-color", command, str(path), env=env)
        assert done.stdout.splitlines()[0].startswith("⚠ incomplete capture: 3 graph"), command
        if command == "check":
            assert done.returncode == 1
            assert done.stdout.splitlines()[1].startswith("fail capture.complete  3 graph")
    info = json.loads(run_cli("info", str(path), "--json").stdout)
    assert info["capture_note"] == note


def test_skip_exits_zero_and_shows_as_skip(tmp_path: Path) -> None:
    ranges = build_scenario().events.filter(pl.col("kind") == "range")
    path = save(_timeline(ranges), tmp_path / "ranges.parquet")
    done = run_cli("--no-color", "check", str(path), env={"COLUMNS": "300"})
    assert done.returncode == 0, done.stdout
    assert any(
        line.startswith("skip steps.cover  no device work") for line in done.stdout.splitlines()
    )
    assert "skip" in done.stdout.splitlines()[-1]
    md = render_markdown(tracekit.analyze(tracekit.load(path)).to_dict())
    assert "| ➖ skip | steps.cover | no device work in this trace |" in md


# -- real traces ------------------------------------------------------------------------------
# Samples whose capture is partial, and what they lack: the others must pass (or skip, when
# they hold nothing to check the capture against).
INCOMPLETE = {
    # CUPTI range profiling: counters per range, no device activity rows at all
    "hta-cupti-profiler-range/benchmark_result_924719_1679055439_trace.json.gz": "fail",
    # the repository's owner kept the busiest stream's first dispatches after each token
    "rocprofv3_csv_gfx1151_llamacpp_TRIMMED/decode_kernel_trace.csv": "fail",
    # one hipGraphLaunch window of a longer run, the other launches' dispatches left out
    "rocprofv3_csv_gfx1151_llamacpp_TRIMMED/prefill_kernel_trace.csv": "fail",
}


def _real_samples() -> list:
    root = real_root()
    if root is None:
        return [pytest.param(None, marks=pytest.mark.skip(reason="TRACEKIT_REAL_TRACES not set"))]
    from tests.test_analysis_real import SAMPLES
    from tests.test_msprof_real import SAMPLES as ASCEND

    paths = [p.values[0] for p in SAMPLES] + [root / "ascend" / rel for rel in ASCEND]
    local = Path(__file__).parent / "data" / "real" / "amd_rpd"
    paths += [local / n for n in ("matmul_result.json", "matmul_result.rpd", "mytrace.rpd.gz")]
    return [pytest.param(p, id=str(p.relative_to(p.parents[1]))) for p in paths if p.exists()]


@pytest.mark.parametrize("path", _real_samples())
def test_every_complete_real_sample_passes(path: Path) -> None:
    check = _capture(path)
    want = next((s for rel, s in INCOMPLETE.items() if str(path).endswith(rel)), None)
    if want is None:
        assert check.status in ("pass", "skip"), check.detail
    else:
        assert check.status == want, check.detail


def test_launches_recorded_by_a_stream_capture_are_not_missing_work() -> None:
    """vLLM captures its graphs at start-up: the launches between hipStreamBeginCapture and
    hipStreamEndCapture are recorded into the graph, not run. Only the two launches outside
    the capture count, and one of them has no device row: 1 of 2 missing (a warning)."""
    api = [("hipStreamBeginCapture", 0, None), *[("hipLaunchKernel", 10 + i, i) for i in range(40)]]
    api += [("hipStreamEndCapture", 100, None), ("hipLaunchKernel", 200, 900)]
    api += [("hipLaunchKernel", 300, 901)]
    n = len(api)
    columns = {
        "ts": [t * 1_000 for _, t, _ in api] + [210_000],
        "dur": [500] * n + [5_000],
        "kind": ["api"] * n + ["kernel"],
        "name": [name for name, _, _ in api] + ["k"],
        "device": [-1] * n + [0],
        "stream": [None] * n + [7],
        "pid": [1] * n + [None],
        "tid": [1] * n + [None],
        "corr": [corr for _, _, corr in api] + [900],
    }
    timeline = Timeline(build_table(columns), {"format": "test"})
    check = capture_check(timeline.df, timeline.meta)
    assert check.status == "warn"
    assert "1 of 2 launch calls come after the last device" in check.detail
    whole = [*columns["corr"]]
    columns["ts"].append(310_000)  # the second launch's kernel ran too: nothing is missing
    for key, value in (("dur", 5_000), ("kind", "kernel"), ("name", "k"), ("device", 0),
                       ("stream", 7), ("pid", None), ("tid", None)):  # fmt: skip
        columns[key].append(value)
    columns["corr"] = [*whole, 901]
    timeline = Timeline(build_table(columns), {"format": "test"})
    check = capture_check(timeline.df, timeline.meta)
    assert check.status == "pass"
    assert "(42 calls; 40 recorded into a graph by a stream capture)" in check.detail
