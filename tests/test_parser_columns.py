"""Shared helpers that turn decoded JSON values into Arrow columns."""

from __future__ import annotations

import msgspec
import numpy as np
import polars as pl
import pytest

from tracekit.parsers.convert import as_int, column_or_null, field_values, ints, take


class Point(msgspec.Struct):
    x: int
    y: str | None = None


class Other(msgspec.Struct):
    y: str


def test_field_values_reads_one_field_of_every_item() -> None:
    points = [Point(1, "a"), Point(2), Point(3, "c")]
    assert field_values("x")(points) == [1, 2, 3]
    assert field_values("y")(points) == ["a", None, "c"]
    assert field_values("y")([Other("b"), *points]) == ["b", "a", None, "c"]  # mixed types
    assert field_values("x") is field_values("x")  # compiled once per name
    assert field_values("x")([]) == []
    with pytest.raises(AttributeError):
        field_values("x")([Other("b")])


@pytest.mark.parametrize("name", ["x + 1", "class", "", "x]; import os; [x"])
def test_field_values_takes_only_field_names(name: str) -> None:
    with pytest.raises(ValueError, match="not a field name"):
        field_values(name)


def test_take_gathers_positions() -> None:
    items = ["a", "b", "c", "d"]
    assert take(items, np.array([3, 0, 0])) == ["d", "a", "a"]
    assert take(items, np.array([2])) == ["c"]
    assert take(items, np.array([], dtype=np.int64)) == []


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([1, None, 2**40], [1, None, 2**40]),
        ([0, 1, True, False], [0, 1, None, None]),  # a bool is no integer, whatever its place
        ([True, 3], [None, 3]),
        ([2.0, 1.5, 7], [2, None, 7]),  # integral floats only, never truncated
        (["12", " 0x10", "stream 7", "n/a"], [12, 16, 7, None]),
        ([2**63, 5], [None, 5]),  # beyond int64
        ([None, None], [None, None]),
    ],
)
def test_ints_follow_one_set_of_rules(values: list, expected: list) -> None:
    assert ints(values).to_pylist() == expected
    assert [as_int(v) for v in values] == expected


def test_column_or_null_is_the_column_or_a_typed_null_of_its_name() -> None:
    frame = pl.DataFrame({"a": [1, 2]}, schema={"a": pl.Int32})
    out = frame.select(
        column_or_null(frame, "a", pl.Int64),
        column_or_null(frame, "a", pl.Int64, cast=True).alias("cast"),
        column_or_null(frame, "b", pl.String),
    )
    assert out.schema == {"a": pl.Int32, "cast": pl.Int64, "b": pl.String}
    assert out.rows() == [(1, 1, None), (2, 2, None)]
