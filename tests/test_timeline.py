"""Timeline schema, validation and save/load round trips."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pyarrow as pa
import pytest

from tracekit.errors import TraceError
from tracekit.export import save
from tracekit.load import load
from tracekit.timeline import COLUMNS, SCHEMA, Timeline, build_table


def _timeline() -> Timeline:
    table = build_table(
        {
            "ts": [0, 100, 250, 10],
            "dur": [100, 50, 0, 5],
            "kind": ["kernel", "kernel", "marker", "api"],
            "name": ["gemm", "gemm", "step", "cudaLaunchKernel"],
            "device": [0, 0, -1, -1],
            "stream": [7, 7, None, None],
            "corr": [1, 2, None, 1],
            "engine": ["sm", "sm", None, None],
            "args": ['{"grid":[1,1,1]}', None, None, None],
        }
    )
    meta = {"format": "test", "devices": [{"index": 0, "name": "GPU ü"}], "origin_ns": 17}
    return Timeline(table, meta)


def test_schema_columns_and_types() -> None:
    assert COLUMNS == (
        "ts", "dur", "kind", "name", "device", "stream", "rank",
        "pid", "tid", "corr", "engine", "args",
    )  # fmt: skip
    assert SCHEMA.field("ts").type == pa.int64() and not SCHEMA.field("ts").nullable
    assert SCHEMA.field("kind").type == pa.dictionary(pa.int32(), pa.string())
    assert SCHEMA.field("device").type == pa.int32()
    assert SCHEMA.field("args").type == pa.string()


def test_polars_view_and_meta() -> None:
    tl = _timeline()
    assert tl.validate() == []
    assert tl.df.schema["kind"] == pl.Categorical
    assert tl.df["dur"].sum() == 155
    assert tl.meta["schema_version"] == 1 and tl.meta["warnings"] == []
    assert tl.events.schema.metadata[b"tracekit"].startswith(b"{")


def test_combine_chunks_keeps_every_value() -> None:
    one = _timeline()
    # batches as a reader hands them over: two chunks, the names in two dictionaries
    table = pa.concat_tables([one.events.slice(0, 3), one.events.slice(3)])
    tl = Timeline(table, one.meta)
    assert tl.events.column("name").num_chunks == 2
    tl.combine_chunks()
    assert [c.num_chunks for c in tl.events.columns] == [1] * len(COLUMNS)
    assert tl.events.schema == one.events.schema
    assert tl.events.to_pylist() == one.events.to_pylist()
    assert tl.validate() == [] and tl.df["name"].cast(pl.String).to_list()[3] == "cudaLaunchKernel"


@pytest.mark.parametrize("suffix", [".parquet", ".arrow"])
def test_save_and_load_round_trip(tmp_path: Path, suffix: str) -> None:
    tl = _timeline()
    out = save(tl, tmp_path / f"t{suffix}")
    back = load(out)
    assert back.meta == tl.meta | {"source": f"t{suffix}"}
    assert back.meta["devices"][0]["name"] == "GPU ü"
    assert back.df.equals(tl.df)


def test_validate_reports_each_problem() -> None:
    good = _timeline().events
    bad = good.set_column(1, "dur", pa.array([-1, 50, 0, 5], pa.int64()))
    kinds = pa.array(["kernel", "bogus", "marker", "api"]).dictionary_encode()
    bad = bad.set_column(2, "kind", kinds.cast(SCHEMA.field("kind").type))
    problems = Timeline(bad).validate()
    assert problems == ["dur is negative in 1 rows", "unknown kinds: bogus"]


def test_save_rejects_unknown_suffix(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match=r"use a \.parquet or \.arrow"):
        save(_timeline(), tmp_path / "x.csv")


def test_arrow_without_tracekit_metadata_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "plain.parquet"
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"a": [1]}), path)
    with pytest.raises(TraceError, match="not a saved timeline"):
        load(path)
