"""Every real sample and fixture gives the results it gave before the speed work: the
digests of ``tools/output_digests.py`` against the committed ``tests/data/output_digests.json``
(rewrite it with ``python tools/output_digests.py write`` when a change of results is meant)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import polars as pl
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

from output_digests import DEFAULT, cases, digest_of, table_digest  # noqa: E402

WANT: dict[str, str] = json.loads(DEFAULT.read_text())


def _differences(real: bool) -> tuple[list[str], int]:
    checked, differ = 0, []
    for key, path in cases():
        if key.startswith("fixture/") == real:
            continue
        checked += 1
        if WANT.get(key) != digest_of(path):
            differ.append(key)
    return differ, checked


def test_fixtures_give_the_same_results() -> None:
    differ, checked = _differences(real=False)
    assert checked == sum(k.startswith("fixture/") for k in WANT) == 35
    assert differ == []


@pytest.mark.skipif(not os.environ.get("TRACEKIT_REAL_TRACES"), reason="TRACEKIT_REAL_TRACES")
def test_real_samples_give_the_same_results() -> None:
    differ, checked = _differences(real=True)
    assert checked == sum(not k.startswith("fixture/") for k in WANT) > 400
    assert differ == []


def test_the_digest_sees_one_changed_value_and_ignores_row_order_and_encoding() -> None:
    frame = pl.DataFrame({"ts": [1, 2, 3], "name": ["a", "b", None], "r": [0.5, 1.0, 2.0]})
    same = frame.reverse().with_columns(pl.col("name").cast(pl.Categorical))
    assert table_digest(same) == table_digest(frame)
    assert table_digest(frame.with_columns(ts=pl.Series([1, 2, 4]))) != table_digest(frame)
    assert table_digest(frame.with_columns(r=pl.Series([0.5, 1.0, 2.001]))) != table_digest(frame)
    assert table_digest(frame.with_columns(name=pl.Series(["a", "b", ""]))) != table_digest(frame)
