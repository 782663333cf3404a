"""Memory shared rather than copied at 10M rows: args text held once per distinct value (an
Arrow string view inside the timeline, the schema's ``string`` outside), the Ascend device
work rows put first so that the analysis slices them, the cut rows made where read. Each
way must give exactly what the plain way gave."""

from __future__ import annotations

import json
import random
import warnings
from pathlib import Path

import polars as pl
import pyarrow as pa
import pytest

import tracekit
from fixtures.ascend_db_writer import write_torch_npu_db
from fixtures.ascend_scenario import build_ascend_scenario
from fixtures.nsys_writer import write_nsys_sqlite
from fixtures.scenario import build_scenario
from tracekit.metrics.steps import clipped
from tracekit.model import Context
from tracekit.parsers.convert import shared_text
from tracekit.parsers.demangle import ARG_KEY, demangle_events
from tracekit.parsers.msprof.rows import args_json, to_table
from tracekit.steps.placement import work_rows
from tracekit.taxonomy import classified, load_patterns, vendor_of
from tracekit.timeline import SCHEMA, Timeline, build_table, spelled_out


def _address(series: pl.Series) -> int:
    """Where the first value of a numeric column lies in memory."""
    array = series.to_arrow()
    return array.buffers()[1].address + array.offset * array.type.byte_width


def test_shared_text_stores_each_text_once() -> None:
    texts = ['{"grid":[4,1,1],"block":[128,1,1]}', '{"grid":[8,1,1],"block":[256,1,1]}', None]
    values = pa.chunked_array([pa.array(texts * 5_000), pa.array(texts[:2] * 1_000)])
    shared = shared_text(values)
    assert shared.type == pa.string_view()
    assert shared.cast(pa.string()).to_pylist() == values.to_pylist()
    # 17k rows of 35-byte texts: views of 16 bytes, the texts themselves once per chunk
    assert shared.nbytes < 16 * len(values) + 4_000 < values.nbytes
    distinct = pa.array([f"text number {i:08d}" for i in range(100)] * 2)
    assert shared_text(distinct) is distinct  # half the rows distinct: kept as it is


def test_a_timeline_holding_views_hands_over_the_schema() -> None:
    args = shared_text(pa.array(['{"op":"x"}', None, '{"a long text beyond the inline":1}'] * 10))
    table = build_table({"ts": list(range(30)), "dur": [1] * 30, "kind": ["kernel"] * 30}, 30)
    table = build_table({**{c: table[c] for c in table.column_names}, "args": args}, 30)
    timeline = Timeline(table, {"format": "test"})
    assert timeline.stored.schema.field("args").type == pa.string_view()
    assert timeline.validate() == []
    events = timeline.events
    assert events.schema.remove_metadata() == SCHEMA
    assert json.loads(events.schema.metadata[b"tracekit"])["format"] == "test"
    assert events["args"].to_pylist() == args.cast(pa.string()).to_pylist()
    assert timeline.df["args"].to_list() == events["args"].to_pylist()
    timeline.combine_chunks()  # one chunk of views
    assert timeline.stored["args"].num_chunks == 1 and len(timeline) == 30


def test_views_are_spelled_out_in_chunks_that_fit() -> None:
    texts = pl.Series(["abc" * 10, None, "x" * 50, "y"] * 1_000)
    views = pa.chunked_array([texts.to_arrow(compat_level=pl.CompatLevel.newest())] * 2)
    out = spelled_out(views, limit=5_000)  # 2 GiB in a real string chunk
    assert out.type == pa.string() and out.to_pylist() == views.to_pylist()
    assert out.num_chunks > 10 and max(len(c.buffers()[2]) for c in out.chunks) <= 5_000 + 50
    assert all(c.buffers()[1].to_pybytes()[:4] == bytes(4) for c in out.chunks)  # from 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # byte counts summed as signed 64-bit, not uint32
        whole = spelled_out(views)
    assert whole.num_chunks == 2 and whole.to_pylist() == views.to_pylist()


def test_demangling_spells_out_viewed_args() -> None:
    def table(names: list[str]) -> pa.Table:
        args = shared_text(pa.array(['{"grid":1}', None] * 20))
        name = pa.array(names * 20).dictionary_encode()
        return build_table({"ts": list(range(40)), "dur": [1] * 40, "name": name, "args": args})

    out = demangle_events(table(["_ZN4vllm3fooEv", "plain"]))
    assert out.schema.field("args").type == pa.string()
    assert json.loads(out["args"][0].as_py()) == {ARG_KEY: "_ZN4vllm3fooEv", "grid": 1}
    assert out["args"][1].as_py() is None and out["name"][0].as_py() == "vllm::foo()"
    plain = table(["k", "plain"])
    assert plain.schema.field("args").type == pa.string_view()
    assert demangle_events(plain) is plain  # nothing mangled: the views stay
    looks = table(["_Zfoo", "plain"])  # looks mangled, is not: the table as it was
    assert demangle_events(looks) is looks


def _reference(frame: pl.DataFrame, keys: list[str]) -> list[str | None]:
    """Each row's args the plain way: one JSON object of its non-null values, in key order."""
    out = []
    for row in frame.iter_rows(named=True):
        parts = [
            f"{json.dumps(k)}:{json.dumps(row[k], ensure_ascii=False)}"
            for k in keys
            if row[k] is not None
        ]
        out.append("{" + ",".join(parts) + "}" if parts else None)
    return out


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_args_joined_piece_by_piece_equal_the_plain_json(seed: int) -> None:
    rng = random.Random(seed)
    n = 4_000
    # few-valued keys around many-valued ones: groups open, close and open again
    counts = {"core": 3, "op": 40, "id": n, "dtype": 5, "shape": 900, "step": 7, "seq": n // 2}

    def value(count: int, text: bool) -> str | int | None:
        if rng.random() < 0.1:
            return None
        v = rng.randrange(count)
        return f'v"{v}é' if text else v

    frame = pl.DataFrame(
        {
            k: [value(c, k in ("core", "op", "dtype", "shape")) for _ in range(n)]
            for k, c in counts.items()
        }
    )
    frame = frame.with_columns(
        pl.when(pl.int_range(n) % 97 == 0).then(None).otherwise(pl.all()).name.keep()
    )
    fields = [(k, pl.col(k), "text" if frame[k].dtype == pl.String else "int") for k in counts]
    assert args_json(frame, fields).to_list() == _reference(frame, list(counts))


@pytest.fixture(scope="module")
def npu_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    events = build_ascend_scenario().events
    return write_torch_npu_db(events, tmp_path_factory.mktemp("npu"), rank=0)


def test_ascend_work_rows_come_first_and_are_sliced() -> None:
    kinds = ["kernel", "sync", "kernel", "comm", "sync", "memcpy", "api", "kernel", None, "op"]
    frame = pl.DataFrame(
        {
            "ts": range(100, 110),
            "dur": [1] * 10,
            "kind": kinds,
            "name": [f"n{i}" for i in range(10)],
        },
        schema_overrides={"kind": pl.String},
    )
    tasks, host = frame.head(6), frame.tail(4)  # the kernels' frame has its sync tasks inside
    timeline = Timeline(to_table([tasks, host], 100))
    df = timeline.df
    order = [0, 2, 3, 5, 7, 1, 4, 6, 8, 9]  # the work rows first, then the rest, each in order
    assert df["name"].cast(pl.String).to_list() == [f"n{i}" for i in order]
    assert df["ts"].to_list() == order and df["kind"].cast(pl.String).to_list()[:5] == [
        "kernel",
        "kernel",
        "comm",
        "memcpy",
        "kernel",
    ]
    rows, _ = classified(df, vendor_of(timeline.meta), load_patterns(None))
    sliced = work_rows(rows)  # polars filters one run of rows as a slice: no copy
    assert sliced.height == 5 and _address(sliced["ts"]) == _address(df["ts"])
    one_run = frame[[6, 0, 3, 5, 1]]  # api, then the work rows, then sync: kept as it is
    ordered = Timeline(to_table([one_run], 100)).df["kind"].cast(pl.String).to_list()
    assert ordered == ["api", "kernel", "comm", "memcpy", "sync"]


def test_nsys_kernel_args_are_views_of_the_sql_text(tmp_path: Path) -> None:
    path = write_nsys_sqlite(build_scenario(steps=3).events, tmp_path / "t.sqlite")
    timeline = tracekit.load(path)
    assert timeline.stored.schema.field("args").type == pa.string_view()
    kernels = timeline.events.filter(pa.compute.equal(timeline.events["kind"], "kernel"))
    texts = kernels["args"].to_pylist()
    assert len(texts) > 100 and all(json.loads(t)["grid"] for t in texts)


def test_the_cut_rows_are_made_where_read(npu_db: Path) -> None:
    analysis = tracekit.analyze(tracekit.load(npu_db))
    expected = clipped(analysis.work, analysis.windows)
    assert analysis.in_windows.equals(expected) and expected.height > 0
    made = []
    ctx = Context(
        analysis.rows,
        analysis.work,
        lambda: made.append(1) or expected,
        analysis.windows,
        analysis.step_metrics,
        analysis.steps,
        {},
    )
    assert ctx.in_windows is expected and ctx.in_windows is expected and made == [1, 1]
