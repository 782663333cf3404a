"""tracekit checks its own numbers: every accounting identity passes on a faithful trace and
fails (or warns) with numbers on one built to break it; `tracekit check` prints them, failing
first, and exits 1 on a failure and 2 on bad input."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

import tracekit
from tests.conftest import run_cli
from tests.test_step_outputs import low_confidence_trace
from tracekit.checks.identities import categories_add_up
from tracekit.demo import demo_paths
from tracekit.export import save
from tracekit.timeline import Timeline, build_table

COLUMNS = ("ts", "dur", "kind", "name", "device", "stream", "rank", "pid", "tid", "corr")


def _timeline(rows: list[dict]) -> Timeline:
    return Timeline(build_table({k: [r.get(k) for r in rows] for k in COLUMNS}), {"format": "test"})


def _decode(
    steps: int = 6,
    linked: bool = True,
    device: int | None = 0,
    rank: int = 0,
    kernel: str = "gemm_{j}",
) -> list[dict]:
    """Marker steps of 100 µs every 200 µs, four 15 µs kernels each (launched inside)."""
    rows, corr = [], rank * 1_000
    for i in range(steps):
        t0 = i * 200_000
        rows.append({"ts": t0, "dur": 100_000, "kind": "range", "name": f"decode_step_{i}",
                     "pid": 1, "tid": 1, "rank": rank})  # fmt: skip
        for j in range(4):
            corr += 1
            link = corr if linked else None
            rows.append({"ts": t0 + j * 20_000, "dur": 2_000, "kind": "api", "rank": rank,
                         "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "corr": link})  # fmt: skip
            rows.append({"ts": t0 + j * 20_000 + 1_000, "dur": 15_000, "kind": "kernel",
                         "name": kernel.format(j=j), "device": device, "stream": 7,
                         "rank": rank, "corr": link})  # fmt: skip
    return rows


def _checks(rows: list[dict]) -> dict[str, tracekit.checks.Check]:
    return {c.name: c for c in tracekit.analyze(_timeline(rows)).checks}


def test_every_identity_passes_on_the_faithful_demo() -> None:
    checks = tracekit.analyze(tracekit.load(demo_paths()[0])).checks
    by = {c.name: c for c in checks}
    # an Nsight Systems export records no operator shapes: no roofline, and it says so
    assert by.pop("roofline.devices").status == "skip"
    checks = list(by.values())
    assert [c.status for c in checks] == ["pass"] * len(checks)
    assert set(by) == {
        "capture.complete",
        "steps.confidence",
        "steps.cover",
        "categories.sum",
        "steps.giant",
        "steps.placement",
        "rows.device",
        "comm.present",
        "comm.unknown",
    }  # and roofline.devices, skipped above
    assert by["steps.cover"].expected == by["steps.cover"].actual == 14_472_221
    assert by["comm.present"].actual == 4_520_238
    assert by["categories.sum"].actual == 16_370_789


def test_busy_time_between_the_steps_fails_the_cover_check() -> None:
    rows = _decode()
    # launched and run between step 2 and step 3: placed in no step, yet between the steps
    rows += [{"ts": 520_000, "dur": 2_000, "kind": "api", "name": "cudaLaunchKernel",
              "pid": 1, "tid": 1, "rank": 0, "corr": 999},
             {"ts": 521_000, "dur": 60_000, "kind": "kernel", "name": "stray_gemm",
              "device": 0, "stream": 7, "rank": 0, "corr": 999}]  # fmt: skip
    check = _checks(rows)["steps.cover"]
    assert (check.status, check.expected, check.actual) == ("fail", 420_000, 360_000)
    assert "85.71%" in check.detail
    assert _checks(_decode())["steps.cover"].status == "pass"


def test_rows_placed_by_host_time_warn_with_their_count() -> None:
    check = _checks(_decode(linked=False))["steps.placement"]
    assert (check.status, check.actual) == ("warn", 24)
    assert "24 device rows (100.0% of device time)" in check.detail
    assert _checks(_decode())["steps.placement"].status == "pass"


def test_a_giant_step_of_unknown_phase_warns_naming_it(tmp_path: Path) -> None:
    path = low_confidence_trace(tmp_path / "giant.parquet")
    check = {c.name: c for c in tracekit.analyze(tracekit.load(path)).checks}["steps.giant"]
    assert check.status == "warn" and "(rank 0 step 6" in check.detail
    assert "holds 99% of the device time of its phase's 7 steps" in check.detail


def test_a_giant_decode_step_fails_naming_it() -> None:
    rows = _decode()
    for row in rows:  # vLLM's step annotation: 8 decode requests, no prefill
        if row["kind"] == "range":
            row["name"] = "execute_context_0(0)_generation_8(8)"
    for corr, stream in ((998, 8), (999, 9)):  # two 150 µs kernels on side streams
        rows += [{"ts": 620_000, "dur": 2_000, "kind": "api", "name": "cudaLaunchKernel",
                  "pid": 1, "tid": 1, "rank": 0, "corr": corr},
                 {"ts": 621_000, "dur": 150_000, "kind": "kernel", "name": "gemm_big",
                  "device": 0, "stream": stream, "rank": 0, "corr": corr}]  # fmt: skip
    long = [r for r in rows if r.get("name") == "gemm_0" and r["ts"] == 601_000]
    long[0]["dur"] = 90_000
    check = _checks(rows)["steps.giant"]
    assert check.status == "fail", check.detail
    assert "(rank 0 step 3 'execute_context_0(0)_generation_8(8)') holds" in check.detail


def test_device_rows_without_a_device_warn() -> None:
    check = _checks(_decode(device=None))["rows.device"]
    assert (check.status, check.actual) == ("warn", 24)
    assert _checks(_decode())["rows.device"].status == "pass"


def test_two_ranks_that_never_communicate_warn() -> None:
    check = _checks(_decode(rank=0) + _decode(rank=1))["comm.present"]
    assert check.status == "warn" and check.detail.startswith("2 ranks/devices")
    nccl = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
    both = _decode(rank=0, kernel=nccl) + _decode(rank=1, kernel=nccl)
    assert _checks(both)["comm.present"].status == "pass"


def test_kernels_counted_as_communication_by_their_look_warn_with_names_and_time() -> None:
    check = _checks(_decode(kernel="mylab::fancy_allreduce_v{j}"))["comm.unknown"]
    assert (check.status, check.actual) == ("warn", 4)
    assert "4 kernel name(s) counted as communication by their look alone, 360,000 ns" in (
        check.detail
    )
    assert "mylab::fancy_allreduce_v0 ×6 90,000 ns" in check.detail


def test_category_times_that_do_not_add_up_fail() -> None:
    analysis = tracekit.analyze(_timeline(_decode()))
    assert categories_add_up(analysis.work, analysis.step_metrics).status == "pass"
    broken = analysis.step_metrics.with_columns(pl.col("cat_gemm_ns") - 1_000)
    check = categories_add_up(analysis.work, broken)
    assert (check.status, check.expected, check.actual) == ("fail", 360_000, 354_000)


def test_check_command_prints_failing_first_and_exits_one(tmp_path: Path) -> None:
    rows = _decode()
    rows += [{"ts": 520_000, "dur": 2_000, "kind": "api", "name": "cudaLaunchKernel",
              "pid": 1, "tid": 1, "rank": 0, "corr": 999},
             {"ts": 521_000, "dur": 60_000, "kind": "kernel", "name": "stray_gemm",
              "device": 0, "stream": 7, "rank": 0, "corr": 999}]  # fmt: skip
    path = save(_timeline(rows), tmp_path / "stray.parquet")
    done = run_cli("--no-color", "check", str(path), env={"COLUMNS": "300"})
    assert done.returncode == 1, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("fail steps.cover  step windows hold 85.71%")
    # skipped: comm.unknown (no comm kernel), roofline.devices (no shapes)
    assert lines[-1] == "10 checks: 1 fail, 7 pass, 2 skip"
    data = json.loads(run_cli("check", str(path), "--json").stdout)
    assert [c["status"] for c in data["checks"]][:2] == ["fail", "pass"]
    assert run_cli("check", str(demo_paths()[0])).returncode == 0


@pytest.mark.parametrize("bad", ["missing.sqlite", "garbage.json"])
def test_check_command_on_bad_input_is_one_line_and_exit_2(tmp_path: Path, bad: str) -> None:
    path = tmp_path / bad
    if bad == "garbage.json":
        path.write_text("not a trace")
    done = run_cli("check", str(path))
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr


def test_checks_show_in_summary_analyze_and_markdown(tmp_path: Path) -> None:
    rows = _decode(kernel="mylab::fancy_allreduce_v{j}")
    path = save(_timeline(rows), tmp_path / "guess.parquet")
    for command in ("analyze", "summary"):
        out = run_cli("--no-color", command, str(path), env={"COLUMNS": "300"}).stdout
        lines = out.splitlines()  # what the trace is first, then the checks that did not pass
        assert lines[0].startswith("workload: LLM serving, decode (high)")
        assert lines[1] == "stack: nothing recognised"  # hand-made names of no known software
        assert lines[2].startswith("warn comm.unknown  4 kernel name(s)")
        assert lines[3] == "10 checks: 1 warn, 8 pass, 1 skip"  # skip: no shapes, no roofline
    md = run_cli("analyze", str(path), "--format", "md").stdout
    assert "**Checks:** 10 checks: 1 warn, 8 pass, 1 skip" in md and "### Checks" in md
    assert "| ⚠ warn | comm.unknown | 4 kernel name(s)" in md
    data = json.loads(run_cli("analyze", str(path), "--json").stdout)
    assert data["checks"][0]["name"] == "comm.unknown"


def test_hccl_tasks_count_once_in_sums_and_checks() -> None:
    """The 910B sample's collectives and their hardware tasks are all communication rows;
    sums count a task in its collective only, so the step's communication category time is
    its communication union (the collectives do not overlap) and no more."""
    from tests.conftest import real_file

    path = real_file("ascend", "msinsight_torchnpu_910B_2rank/text/level1")
    analysis = tracekit.analyze(tracekit.load(path))
    metrics = analysis.step_metrics.sort("rank")
    assert metrics["cat_comm_ns"].to_list() == metrics["comm_ns"].to_list()
    assert metrics["comm_ns"].to_list() == [105_991_878, 100_375_286]
    by = {c.name: c for c in analysis.checks}
    assert by["categories.sum"].status == "pass"
    assert by["comm.present"].actual == 105_991_878 + 100_375_286
