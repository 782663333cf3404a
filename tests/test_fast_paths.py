"""The shortcuts taken for 10M-row traces give what the plain ways gave, on the inputs where
they could differ (found by a review of the speed work)."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.rules.scenarios import FAULTS, analysed
from tracekit.intervals import IntervalOverflowError, gaps, intersect, merge, sort_key
from tracekit.metrics import steps as metric_steps
from tracekit.metrics.collectives import launches
from tracekit.metrics.steps import step_metrics
from tracekit.timeline import Timeline, build_table


def test_launch_args_keep_their_numbers_as_written() -> None:
    args = [
        '{"pg_name":"0","seq":5.0,"in_nelems":1024.0,"dtype":"Float"}',
        '{"pg_name":"0","seq":6,"in_nelems":1e3,"dtype":"Float"}',
        '{"pg_name":"0","seq":"7","seq":"8","count":4,"dtype":"Float"}',
    ]
    work = pl.DataFrame(
        {
            "rank": [0, 0, 0],
            "device": [0, 0, 0],
            "step": [0, 0, 0],
            "is_comm": [True] * 3,
            "is_part": [False] * 3,
            "is_fused_comm": [False] * 3,
            "name": pl.Series(["ncclKernel_AllReduce_Sum"] * 3).cast(pl.Categorical),
            "ts": [0, 10, 20],
            "dur": [5, 5, 5],
            "args": args,
        }
    )
    found = launches(work).select("instance", "bytes").rows()
    # json_path_match semantics: "5.0" stays "5.0" (and is no integer), the last "seq" wins
    assert found == [("seq 5.0", None), ("seq 6", None), ("seq 8", 16)]
    # the same args repeated (each then parsed once): the same values, row by row
    repeated = pl.concat([work.with_columns(step=pl.lit(s, pl.Int64)) for s in range(3)])
    again = launches(repeated).sort("step", "start").select("instance", "bytes").rows()
    assert again == found * 3


def test_a_foreign_dictionary_is_encoded_afresh() -> None:
    kind = pa.DictionaryArray.from_arrays(
        pa.array([0, 1, 1], pa.int8()), pa.array(["kernel", None])
    )
    name = pa.DictionaryArray.from_arrays(pa.array([0, 0, 0], pa.int8()), pa.array(["k", "_Zx"]))
    table = build_table({"ts": [0, 1, 2], "dur": [1, 1, 1], "kind": kind, "name": name})
    assert Timeline(table).validate() == ["kind is null in 2 rows"]
    assert table["name"].chunk(0).dictionary.to_pylist() == ["k"]  # the unused name is gone
    compact = pa.DictionaryArray.from_arrays(pa.array([1, 0], pa.int8()), pa.array(["a", "b"]))
    cast = build_table({"ts": [0, 1], "dur": [1, 1], "name": compact})["name"]
    assert cast.to_pylist() == ["b", "a"] and cast.type == pa.dictionary(pa.int32(), pa.string())


def test_merged_sets_are_taken_as_they_are_and_anything_else_is_refused() -> None:
    rows = pl.DataFrame({"k": [0, 0, 1], "ts": [0, 5, 0], "dur": [3, 5, 2]})
    merged = merge(rows, ["k"])
    assert gaps(merged, ["k"]).rows() == gaps(rows, ["k"]).rows() == [(0, 3, 5)]
    assert intersect(merged, rows, ["k"]).rows() == merged.rows()
    with pytest.raises(ValueError, match="merge"):
        gaps(pl.DataFrame({"start": [5, 0], "end": [10, 20]}))


@pytest.mark.parametrize("fault", ["exposed", "bubble"])
def test_step_metrics_in_pieces_equal_the_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fault: str
) -> None:
    """The interval metrics taken a few steps at a time give what one pass over all gave."""
    _, a = analysed("kineto", FAULTS[fault], tmp_path)
    whole = step_metrics(a.work, a.windows, in_windows=a.in_windows, ranges=a.steps.ranges)
    monkeypatch.setattr(metric_steps, "STEPS_ROWS", 40)
    pieces = metric_steps._by_steps(a.in_windows, 40)
    assert len(pieces) > 3 and sum(p.height for p in pieces) == a.in_windows.height
    cut = step_metrics(a.work, a.windows, in_windows=a.in_windows, ranges=a.steps.ranges)
    assert cut.equals(whole) and whole["busy_ns"].sum() > 0


keyed_spans = st.lists(
    st.tuples(
        st.one_of(st.none(), st.integers(-3, 3)),
        st.one_of(st.none(), st.integers(0, 2**31 - 1)),
        st.integers(-50, 50),
        st.integers(0, 20),
    ),
    max_size=30,
)


@settings(max_examples=120, deadline=None)
@given(keyed_spans)
def test_merge_by_one_packed_integer_equals_merge_by_the_key_columns(rows: list) -> None:
    """Integer keys (nulls, negatives, wide ranges) are sorted as one packed integer; text
    keys by the columns: the two ways give the same merged rows in the same order."""
    schema = {"a": pl.Int32, "b": pl.Int64, "ts": pl.Int64, "dur": pl.Int64}
    frame = pl.DataFrame(rows, schema=schema, orient="row")
    as_text = frame.with_columns(
        (pl.col("a") + 10).cast(pl.String).str.zfill(3), pl.col("b").cast(pl.String).str.zfill(12)
    )
    packed, columns = merge(frame, ["a", "b"]), merge(as_text, ["a", "b"])
    assert packed.select("start", "end").equals(columns.select("start", "end"))
    keys = frame.select("a", "b").unique().sort("a", "b")
    assert isinstance(sort_key(frame, ["a", "b"], "ts"), pl.Expr) or frame.height == 0
    by_columns = frame.sort("a", "b", "ts", maintain_order=True)
    assert frame.sort(sort_key(frame, ["a", "b"], "ts"), maintain_order=True).equals(by_columns)
    assert keys.height == packed.select("a", "b").unique().height or not frame.height


def test_timestamps_too_far_apart_are_refused_without_keys_too() -> None:
    far = pl.DataFrame({"ts": [0, 9 * 10**18], "dur": [10, 1000]})
    with pytest.raises(IntervalOverflowError):
        merge(far)


def test_a_merged_set_changed_in_place_is_checked_again() -> None:
    merged = merge(pl.DataFrame({"k": [1, 1], "ts": [0, 20], "dur": [10, 10]}), ["k"])
    assert gaps(merged, ["k"]).rows() == [(1, 10, 20)]  # taken as merged
    merged.vstack(merged, in_place=True)  # now overlapping: no longer merge() output
    with pytest.raises(ValueError, match="must be merge"):
        gaps(merged, ["k"])
