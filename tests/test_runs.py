"""Which runs a side of `tracekit diff` holds: files, folders of runs, one-trace folders, globs."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from fixtures.kineto_writer import write_kineto_json
from fixtures.nsys_writer import write_nsys_sqlite
from fixtures.scenario import build_scenario
from tests.conftest import real_file
from tracekit.errors import TraceError
from tracekit.runs import find_runs


@pytest.fixture(scope="module")
def events() -> pl.DataFrame:
    return build_scenario(steps=2, layers=1).events


def test_folder_of_runs_and_glob(tmp_path: Path, events: pl.DataFrame) -> None:
    for name in ("b.sqlite", "a.sqlite"):
        write_nsys_sqlite(events, tmp_path / name)
    (tmp_path / "README.md").write_text("notes\n")
    (tmp_path / ".hidden.sqlite").write_bytes((tmp_path / "a.sqlite").read_bytes())
    assert find_runs(str(tmp_path)) == [tmp_path / "a.sqlite", tmp_path / "b.sqlite"]
    assert find_runs(str(tmp_path / "*.sqlite")) == [tmp_path / "a.sqlite", tmp_path / "b.sqlite"]
    assert find_runs(str(tmp_path / "a.sqlite")) == [tmp_path / "a.sqlite"]


def test_kineto_folder_is_one_run_when_its_files_name_ranks(
    tmp_path: Path, events: pl.DataFrame
) -> None:
    ranks, runs = tmp_path / "ranks", tmp_path / "runs"
    ranks.mkdir(), runs.mkdir()
    for rank in (0, 1):
        per_rank = build_scenario(steps=2, layers=1, rank=rank).events
        write_kineto_json(per_rank, ranks / f"trace_rank{rank}.json", rank=rank, world_size=2)
        write_kineto_json(events, runs / f"run{rank}.json")
    assert find_runs(str(ranks)) == [ranks]
    assert find_runs(str(runs)) == [runs / "run0.json", runs / "run1.json"]
    # a folder of such rank folders: each one run
    assert find_runs(str(tmp_path)) == [ranks, runs]


def test_ascend_output_with_two_ranks_is_one_run() -> None:
    folder = real_file("ascend", "msinsight_torchnpu_910B_2rank/text/level1")
    assert find_runs(str(folder)) == [folder]


@pytest.mark.parametrize("spec", ["nope.sqlite", "empty", "empty/*.json"])
def test_nothing_to_compare_is_an_error(tmp_path: Path, spec: str) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(TraceError):
        find_runs(str(tmp_path / spec))
