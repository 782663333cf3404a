"""Step detection methods, row assignment through correlation ids, and windows."""

from __future__ import annotations

import polars as pl
import pytest

from tracekit.errors import TraceError
from tracekit.steps import assign, find_steps, windows

COLS = ("ts", "dur", "kind", "name", "device", "stream", "rank", "corr")


def _df(rows: list[tuple]) -> pl.DataFrame:
    types = (pl.Int64, pl.Int64, pl.String, pl.String, pl.Int32, pl.Int64, pl.Int32, pl.Int64)
    schema = dict(zip(COLS, types))
    return pl.DataFrame(rows, schema=schema, orient="row")


def _range(ts: int, dur: int, name: str) -> tuple:
    return (ts, dur, "range", name, -1, None, 0, None)


def _api(ts: int, corr: int, name: str = "cudaLaunchKernel") -> tuple:
    return (ts, 2, "api", name, -1, None, 0, corr)


def _kernel(ts: int, dur: int, corr: int | None, stream: int = 7) -> tuple:
    return (ts, dur, "kernel", "k", 0, stream, 0, corr)


def test_markers_and_assignment_by_launch() -> None:
    rows = [
        _range(0, 100, "ProfilerStep#3"), _api(10, 1), _api(90, 2),
        _range(120, 100, "ProfilerStep#4"), _api(130, 3),
        _kernel(20, 50, 1), _kernel(125, 20, 2),  # launched in step 0, runs in step 1's range
        _kernel(150, 30, 3), _kernel(300, 5, None),  # no launch: by time -> last step
    ]  # fmt: skip
    steps = find_steps(_df(rows))
    assert (steps.method, steps.confidence, len(steps)) == ("marker", "high", 2)
    assert steps.ranges["label"].to_list() == ["ProfilerStep#3", "ProfilerStep#4"]
    work = assign(_df(rows), steps).sort("ts")
    assert work["step"].to_list() == [0, 0, 1, 1]
    assert windows(work).select("step", "start", "end", "dur").rows() == [
        (0, 20, 150, 130),
        (1, 150, 305, 155),
    ]


def test_user_marker_wins_and_bad_markers_fail() -> None:
    rows = [_range(0, 50, "ProfilerStep#1"), _range(0, 20, "fwd 1"), _range(30, 20, "fwd 2"),
            _kernel(5, 5, None), _kernel(35, 5, None)]  # fmt: skip
    assert len(find_steps(_df(rows), marker=r"^fwd \d")) == 2
    assert len(find_steps(_df(rows))) == 1
    with pytest.raises(TraceError, match="not a valid regular expression"):
        find_steps(_df(rows), marker="fwd (")
    with pytest.raises(TraceError, match="matches no range"):
        find_steps(_df(rows), marker="^decode")


def test_nested_markers_keep_the_outermost() -> None:
    rows = [
        _range(0, 100, "decode_step 0"),
        _range(10, 20, "decode_step inner"),
        _range(150, 50, "decode_step 1"),
        _kernel(5, 5, None),
    ]
    assert find_steps(_df(rows)).ranges.select("start", "end").rows() == [(0, 100), (150, 200)]


def test_graph_launches_make_steps() -> None:
    rows = [_api(0, 1, "cudaGraphLaunch"), _api(100, 2, "cudaGraphLaunch"),
            _api(200, 3, "cudaGraphLaunch"), _kernel(10, 50, 1), _kernel(15, 10, 1, 9),
            _kernel(110, 50, 2), _kernel(210, 50, 3)]  # fmt: skip
    steps = find_steps(_df(rows))
    assert (steps.method, steps.confidence, len(steps)) == ("graph", "medium", 3)
    assert assign(_df(rows), steps).sort("ts")["step"].to_list() == [0, 0, 1, 2]


def test_idle_gaps_split_bursts_and_one_burst_is_one_window() -> None:
    # varied kernels (one name repeated would be a micro-benchmark: one window)
    bursts = [
        (t, 10, "kernel", f"k{t}", 0, 7, 0, None)
        for start in (0, 200_000, 400_000)
        for t in (start, start + 12)
    ]
    steps = find_steps(_df(bursts))
    assert (steps.method, steps.confidence, len(steps)) == ("gaps", "low", 3)
    assert assign(_df(bursts), steps)["step"].to_list() == [0, 0, 1, 1, 2, 2]
    single = find_steps(_df(bursts[:2]))
    assert (single.method, len(single)) == ("whole", 1)
    assert assign(_df(bursts[:2]), single)["step"].to_list() == [0, 0]
    repeated = find_steps(_df([_kernel(t, 10, None) for t, *_ in bursts]))
    assert (repeated.method, len(repeated)) == ("whole", 1)  # one kernel 6 times: a benchmark


def test_gap_threshold_ignores_one_outlier() -> None:
    import numpy as np

    from tracekit.steps.gaps import cut_size as _cut

    within = [25_000, 30_000, 22_000, 28_000] * 10  # inside steps
    between = [400_000, 420_000, 390_000, 410_000] * 3  # between steps
    gaps = np.array([*within, *between, 900_000_000])  # and a warm-up long before
    assert _cut(gaps, 20_000) == 390_000
    assert _cut(np.array([30_000, 31_000, 29_000]), 20_000) == 20_000  # one class: all cut
    assert _cut(np.array([5_000, 500_000]), 20_000) == 20_000  # too few to split
