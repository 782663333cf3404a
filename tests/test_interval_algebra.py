"""intersect / subtract / lengths against a brute-force point-set model."""

from __future__ import annotations

from itertools import pairwise

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from tracekit.intervals import intersect, lengths, subtract

spans = st.lists(st.tuples(st.integers(0, 2), st.integers(0, 60), st.integers(0, 15)), max_size=12)


def _frame(rows: list[tuple[int, int, int]]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema={"k": pl.Int64, "ts": pl.Int64, "dur": pl.Int64}, orient="row")


def _points(rows: list[tuple[int, int, int]]) -> set[tuple[int, int]]:
    return {(k, t) for k, ts, dur in rows for t in range(ts, ts + dur)}


def _as_points(frame: pl.DataFrame) -> set[tuple[int, int]]:
    return {(k, t) for k, s, e in frame.select("k", "start", "end").rows() for t in range(s, e)}


@settings(max_examples=150, deadline=None)
@given(spans, spans)
def test_intersect_and_subtract_match_point_sets(a: list, b: list) -> None:
    both = intersect(_frame(a), _frame(b), ["k"])
    only_a = subtract(_frame(a), _frame(b), ["k"])
    assert _as_points(both) == _points(a) & _points(b)
    assert _as_points(only_a) == _points(a) - _points(b)
    for result in (both, only_a):  # merged: sorted, disjoint and not touching per key
        rows = result.sort("k", "start").rows()
        for (k1, _, e1), (k2, s2, _) in pairwise(rows):
            assert k1 != k2 or e1 < s2
    total = lengths(both, ["k"])
    assert dict(total.rows()) == {
        k: n
        for k in {k for k, _ in _points(a) & _points(b)}
        if (n := sum(1 for kk, _ in _points(a) & _points(b) if kk == k))
    }


def test_without_keys_and_empty_inputs() -> None:
    a = pl.DataFrame({"ts": [0, 10], "dur": [5, 10]})
    b = pl.DataFrame({"ts": [3, 12], "dur": [4, 2]})
    assert intersect(a, b).rows() == [(3, 5), (12, 14)]
    assert subtract(a, b).rows() == [(0, 3), (10, 12), (14, 20)]
    empty = a.clear()
    assert intersect(a, empty).height == 0
    assert subtract(a, empty).rows() == [(0, 5), (10, 20)]
    assert subtract(empty, b).height == 0
