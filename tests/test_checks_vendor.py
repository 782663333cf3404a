"""Vendor summaries: each check passes on a faithful fixture and fails, naming the step or
kernel and both values, when one number of the vendor's summary is changed by 10 %."""

from __future__ import annotations

import csv
from pathlib import Path

import polars as pl
import pytest

import tracekit
from fixtures.rocprof_csv_writer import write_rocprofv3_csv
from fixtures.rocprof_v1_csv_writer import write_results_csv, write_stats_csv
from fixtures.scenario import build_scenario


@pytest.fixture(scope="module")
def events() -> pl.DataFrame:
    return build_scenario(steps=3, layers=2, fallback_kernel=True).events


def _checks(path: Path) -> dict[str, tracekit.checks.Check]:
    return {c.name: c for c in tracekit.analyze(tracekit.load(path)).checks}


def _scale(path: Path, key_column: str, value_column: str, pick: int = 0) -> tuple[str, int]:
    """Multiply ``value_column`` of the ``pick``-th data row by 1.1 in place; return that
    row's key and the new value."""
    with path.open(newline="", encoding="utf-8-sig") as fh:
        rows = list(csv.reader(fh))
    head = rows[0]
    row = rows[1 + pick]
    new = round(float(row[head.index(value_column)]) * 1.1)
    row[head.index(value_column)] = str(new)
    quoting = csv.QUOTE_NONNUMERIC if path.read_text().startswith('"') else csv.QUOTE_MINIMAL
    with path.open("w", newline="", encoding="utf-8") as fh:
        csv.writer(fh, quoting=quoting).writerows(rows)
    return row[head.index(key_column)], new


def test_rocprof_v1_stats_pass_then_fail_naming_the_kernel(
    events: pl.DataFrame, tmp_path: Path
) -> None:
    path = write_results_csv(events, tmp_path / "results.csv", style="stats")
    stats = write_stats_csv(events, tmp_path / "results.stats.csv")
    check = _checks(path)["vendor.kernels:results.stats.csv"]
    assert check.status == "pass" and check.actual == check.expected > 10
    name, new = _scale(stats, "Name", "TotalDurationNs")
    check = _checks(path)["vendor.kernels:results.stats.csv"]
    assert check.status == "fail" and check.expected == new
    assert check.detail.startswith(repr(name[:80])) and "(9.1% off)" in check.detail


def test_rocprofv3_kernel_stats_pass_then_fail_naming_the_kernel(
    events: pl.DataFrame, tmp_path: Path
) -> None:
    files = write_rocprofv3_csv(events, tmp_path, "4242")
    name = "vendor.kernels:4242_kernel_stats.csv"
    assert _checks(files["kernel_trace"])[name].status == "pass"
    kernel, new = _scale(tmp_path / "4242_kernel_stats.csv", "Name", "TotalDurationNs", pick=2)
    check = _checks(files["kernel_trace"])[name]
    assert check.status == "fail" and check.expected == new
    assert repr(kernel[:80]) in check.detail and "(9.1% off)" in check.detail


@pytest.fixture(scope="module")
def ascend() -> pl.DataFrame:
    from fixtures.ascend_scenario import build_ascend_scenario

    return build_ascend_scenario(steps=4, layers=2).events


def test_torch_npu_step_trace_pass_then_fail_naming_the_step(
    ascend: pl.DataFrame, tmp_path: Path
) -> None:
    from fixtures.ascend_text_writer import write_torch_npu

    out = write_torch_npu(ascend, tmp_path, rank=0)
    name = "vendor.steps:step_trace_time.csv@rank0"
    check = _checks(out)[name]
    assert check.status == "pass" and check.detail.startswith("4 step(s) agree")
    step, _ = _scale(
        out / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv", "Step", "Computing", pick=2
    )
    check = _checks(out)[name]
    assert check.status == "fail" and check.detail.startswith(f"step {step}: computing ")
    assert "(9.1% off)" in check.detail


def test_torch_npu_op_statistic_pass_then_fail_naming_the_operator_type(
    ascend: pl.DataFrame, tmp_path: Path
) -> None:
    from fixtures.ascend_text_writer import write_torch_npu

    out = write_torch_npu(ascend, tmp_path, rank=0)
    name = "vendor.kernels:op_statistic.csv@rank0"
    assert _checks(out)[name].status == "pass"
    op_type, _ = _scale(
        out / "ASCEND_PROFILER_OUTPUT" / "op_statistic.csv", "OP Type", "Total Time(us)", pick=1
    )
    check = _checks(out)[name]
    assert check.status == "fail" and check.detail.startswith(repr(op_type))


def test_torch_npu_analysis_db_pass_then_fail_naming_the_step(
    ascend: pl.DataFrame, tmp_path: Path
) -> None:
    import sqlite3

    from fixtures.ascend_db_writer import write_torch_npu_db

    out = write_torch_npu_db(ascend, tmp_path, rank=0)
    name = "vendor.steps:analysis.db@rank0"
    check = _checks(out)[name]
    assert check.status == "pass" and check.detail.startswith("4 step(s) agree")
    db = out / "ASCEND_PROFILER_OUTPUT" / "analysis.db"
    with sqlite3.connect(db) as con:
        con.execute("UPDATE StepTraceTime SET overlapped = overlapped * 1.1 WHERE step = '3'")
    con.close()
    check = _checks(out)[name]
    assert check.status == "fail" and check.detail.startswith("step 3: overlapped ")
    assert "(9.1% off)" in check.detail


def test_torch_npu_kernel_details_pass_then_fail_naming_the_kernel(
    ascend: pl.DataFrame, tmp_path: Path
) -> None:
    from fixtures.ascend_text_writer import write_torch_npu

    out = write_torch_npu(ascend, tmp_path, rank=0)
    name = "vendor.kernels:kernel_details.csv@rank0"
    check = _checks(out)[name]
    assert check.status == "pass" and check.detail.endswith("in calls and time")
    details = out / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    kernel, _ = _scale(details, "Name", "Duration(us)", pick=3)
    check = _checks(out)[name]
    assert check.status == "fail" and check.detail.startswith(repr(kernel))


def test_each_rank_of_a_folder_is_checked_against_its_own_summary(
    ascend: pl.DataFrame, tmp_path: Path
) -> None:
    """Ranks told apart by folder only (no profiler_info): each summary still compared with
    its own rank's rows, not with the rows of all ranks together."""
    from fixtures.ascend_text_writer import write_torch_npu

    for rank in (0, 1):
        out = write_torch_npu(
            ascend,
            tmp_path,
            rank=rank,
            device=rank,
            name=f"host{rank}_4242_20250109074803_ascend_pt",
        )
        for info in out.glob("profiler_info_*.json"):
            info.unlink()
    checks = _checks(tmp_path)
    vendor = {n: c.status for n, c in checks.items() if n.startswith("vendor.")}
    assert vendor == {
        f"vendor.{k}@rank{r}": "pass"
        for r in (0, 1)
        for k in (
            "steps:step_trace_time.csv",
            "kernels:op_statistic.csv",
            "kernels:kernel_details.csv",
        )
    }


def test_an_unreadable_stats_row_is_left_out_not_a_crash(
    events: pl.DataFrame, tmp_path: Path
) -> None:
    path = write_results_csv(events, tmp_path / "results.csv", style="stats")
    stats = write_stats_csv(events, tmp_path / "results.stats.csv")
    lines = stats.read_text().splitlines()
    cells = lines[1].split(",")
    cells[2] = '"n/a"'
    stats.write_text("\n".join([lines[0], ",".join(cells), *lines[2:]]) + "\n")
    check = _checks(path)["vendor.kernels:results.stats.csv"]
    assert check.status == "pass" and check.actual == len(lines) - 2
