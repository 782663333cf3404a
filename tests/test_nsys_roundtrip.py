"""Round trip: scenario -> nsys SQLite writer -> parser -> timeline equals the scenario."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

import tracekit
from fixtures.make_demo import demo_scenario
from fixtures.nsys_writer import write_nsys_sqlite
from fixtures.scenario import build_scenario
from tracekit import stats
from tracekit.timeline import COLUMNS

DEMO = Path(__file__).resolve().parents[1] / "tracekit" / "data" / "demo.sqlite"
KNOBS = [
    {},
    {"steps": 2, "layers": 3, "fallback_kernel": True, "unfused_collective": True},
    {"steps": 3, "layers": 2, "exposed_all_to_all": True, "idle_bubble_ns": 75_000},
    {"steps": 1, "layers": 1, "pid": 77, "tid": 78, "seed": 9},
]


def _canonical(df: pl.DataFrame) -> pl.DataFrame:
    cats = [c for c, t in df.schema.items() if t == pl.Categorical]
    return (
        df.with_columns(pl.col(cats).cast(pl.String))
        .select(COLUMNS)
        .sort(["ts", "kind", "corr", "name"], nulls_last=True)
    )


@pytest.mark.parametrize("knobs", KNOBS, ids=lambda k: ",".join(k) or "default")
def test_round_trip_equals_scenario(tmp_path: Path, knobs: dict) -> None:
    scenario = build_scenario(**knobs)
    path = write_nsys_sqlite(scenario.events, tmp_path / "s.sqlite")
    timeline = tracekit.load(path)
    assert timeline.validate() == []
    assert timeline.meta["warnings"] == []
    got = _canonical(timeline.df)
    want = _canonical(scenario.events.cast({"device": pl.Int32, "rank": pl.Int32}))
    assert got.height == scenario.truth["rows"]
    assert got.equals(want)


def test_summary_numbers_equal_scenario_truth(tmp_path: Path) -> None:
    scenario = build_scenario(steps=3, layers=4, idle_bubble_ns=120_000, fallback_kernel=True)
    truth = scenario.truth
    timeline = tracekit.load(write_nsys_sqlite(scenario.events, tmp_path / "s.sqlite"))
    data = stats.summary(timeline)
    assert data["devices"][0]["busy_ns"] == truth["device_busy_ns"]
    span = truth["device_span"]
    assert data["devices"][0]["span_ns"] == span[1] - span[0]
    busy = {row["stream"]: row["busy_ns"] for row in data["streams"]}
    assert busy == {int(k): v for k, v in truth["stream_busy_ns"].items()}
    kinds = {row["kind"]: row for row in data["kinds"]}
    assert kinds["kernel"]["total_ns"] == truth["kernel_ns"]
    assert kinds["kernel"]["count"] == truth["counts"]["kernel"]
    assert kinds["memcpy"]["total_ns"] == truth["memcpy_ns"]
    info = stats.info(timeline)
    assert info["events_per_kind"] == dict(sorted(truth["counts"].items()))
    assert info["streams_per_device"] == {"0": [7, 13, 21]}


def test_bundled_demo_is_the_demo_scenario(tmp_path: Path) -> None:
    """tracekit/data/demo.sqlite is what `python -m fixtures.make_demo` writes today."""
    bundled = _canonical(tracekit.load(DEMO).df)
    assert bundled.equals(
        _canonical(
            tracekit.load(write_nsys_sqlite(demo_scenario().events, tmp_path / "demo.sqlite")).df
        )
    )
    assert bundled.filter(pl.col("kind") == "range").height == 8
