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
