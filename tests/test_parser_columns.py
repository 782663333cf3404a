"""Shared helpers that turn decoded JSON values into Arrow columns."""

from __future__ import annotations

import msgspec
import numpy as np
import pytest

from tracekit.parsers.columns import field_values, take


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
