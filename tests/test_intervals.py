"""Interval algebra against a brute-force bitmap."""

from __future__ import annotations

import numpy as np
import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from tracekit.intervals import gaps, merge, union_length

intervals = st.lists(
    st.tuples(st.integers(0, 200), st.integers(0, 40), st.integers(0, 2)), max_size=40
)


def _frame(rows: list[tuple[int, int, int]]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=["ts", "dur", "stream"], orient="row")


def _bitmap(rows: list[tuple[int, int, int]], stream: int | None = None) -> np.ndarray:
    covered = np.zeros(260, dtype=bool)
    for ts, dur, s in rows:
        if stream is None or s == stream:
            covered[ts : ts + dur] = True
    return covered


@settings(max_examples=200, deadline=None)
@given(intervals)
def test_union_length_matches_bitmap(rows: list[tuple[int, int, int]]) -> None:
    df = _frame(rows)
    assert (union_length(df)["busy"][0] or 0) == _bitmap(rows).sum()
    per = dict(union_length(df, ["stream"]).rows()) if rows else {}
    for s in {r[2] for r in rows}:
        assert per[s] == _bitmap(rows, s).sum()


@settings(max_examples=200, deadline=None)
@given(intervals)
def test_gaps_are_exactly_the_uncovered_holes(rows: list[tuple[int, int, int]]) -> None:
    df = _frame([r for r in rows if r[1] > 0])
    covered = _bitmap(rows)
    holes = gaps(df) if df.height else pl.DataFrame({"start": [], "end": []})
    for start, end in holes.select("start", "end").rows():
        assert start < end and not covered[start:end].any()
        assert covered[start - 1] and covered[end]
    if covered.any():
        first, last = np.nonzero(covered)[0][[0, -1]]
        assert holes.select((pl.col("end") - pl.col("start")).sum()).item() == (
            (last + 1 - first) - covered.sum()
        )


def test_merge_touching_and_nested() -> None:
    df = pl.DataFrame({"ts": [0, 10, 12, 30], "dur": [10, 5, 1, 5]})
    assert merge(df).rows() == [(0, 15), (30, 35)]
    assert gaps(df).rows() == [(15, 30)]
    assert union_length(df)["busy"][0] == 20
