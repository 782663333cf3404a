"""Round trip: scenario -> Kineto writer (every flavour) -> parser -> timeline equals the scenario.

Compared on what a Kineto trace carries: absolute start (``origin_ns + ts``), dur, kind, name,
device, stream, corr, rank, and pid/tid of host rows (the parser leaves them null on device
rows, whose Kineto pid is the device). Rows the profiler adds (cpu ops, gpu annotations,
python frames, the profiler span and its instants) are checked on their own.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import polars as pl
import pytest

import tracekit
from fixtures.kineto_writer import (
    BASE_TIME_PERIOD_NS,
    DEFAULT_BASE_TIME_NS,
    FLAVOURS,
    flavour_info,
    kineto_name,
    write_kineto_json,
    written_kinds,
)
from fixtures.scenario import build_scenario
from tracekit.parsers import kineto

KNOBS = [
    {},
    {"steps": 2, "layers": 3, "fallback_kernel": True, "unfused_collective": True},
    {"steps": 3, "layers": 2, "exposed_all_to_all": True, "idle_bubble_ns": 75_000, "seed": 5},
]
HOST = ("api", "range", "op")
WORK = ("kernel", "memcpy", "memset")
COMPARED = ["abs", "dur", "kind", "name", "device", "stream", "corr", "rank", "pid", "tid"]
PROFILER_ROWS = ("PyTorch Profiler (0)", "Iteration Start: PyTorch Profiler", "Record Window End")
PYTHON_FRAMES = 2  # python_function rows the writer puts around every host range


def _plain(df: pl.DataFrame) -> pl.DataFrame:
    cats = [c for c, t in df.schema.items() if t in (pl.Categorical, pl.Enum)]
    return df.with_columns(pl.col(cats).cast(pl.String))


def _quantised(abs_ns: pl.Expr, dur: pl.Expr, flavour: str) -> tuple[pl.Expr, pl.Expr]:
    """What the flavour keeps of a time: exact ns, or start and duration truncated to µs."""
    if flavour_info(flavour).float_ts:
        return abs_ns, dur
    return abs_ns // 1000 * 1000, dur // 1000 * 1000


def _expected(events: pl.DataFrame, flavour: str, base: int = DEFAULT_BASE_TIME_NS) -> pl.DataFrame:
    """The scenario rows as the flavour records them (names, kinds, µs truncation)."""
    spec = flavour_info(flavour)
    rows = events.filter(pl.col("kind").is_in(written_kinds(flavour)))
    names = [kineto_name(flavour, k, n) for k, n in rows.select("kind", "name").iter_rows()]
    abs_ts, dur = _quantised(pl.col("ts") + base, pl.col("dur"), flavour)
    host = pl.col("kind").is_in(HOST)
    return (
        rows.with_columns(
            abs=abs_ts,
            dur=dur,
            name=pl.Series(names, dtype=pl.String),
            kind=pl.when(pl.col("kind") == "range")
            .then(pl.lit("op" if spec.legacy else "range"))
            .otherwise(pl.col("kind")),
            pid=pl.when(host).then(pl.col("pid")),
            tid=pl.when(host).then(pl.col("tid")),
        )
        .select(COMPARED)
        .cast({"device": pl.Int32, "rank": pl.Int32})
    )


def _absolute(timeline: tracekit.Timeline) -> pl.DataFrame:
    df = _plain(timeline.df)
    return df.with_columns(abs=pl.col("ts") + timeline.meta["origin_ns"])


def _scenario_rows(df: pl.DataFrame, range_names: list[str]) -> pl.DataFrame:
    """Drop what the profiler adds: cpu ops, gpu annotations, its own span and instants."""
    added = (
        pl.col("name").is_in(PROFILER_ROWS)
        | ((pl.col("kind") == "range") & (pl.col("device") >= 0))
        | ((pl.col("kind") == "op") & ~pl.col("name").is_in(range_names))
    )
    return df.filter(~added)


def _sorted(df: pl.DataFrame) -> pl.DataFrame:
    return df.select(COMPARED).sort(["abs", "kind", "corr", "name", "stream"], nulls_last=True)


def _write(
    tmp_path: Path, events: pl.DataFrame, flavour: str, name: str = "trace.json", **kw: object
) -> Path:
    return write_kineto_json(events, tmp_path / name, flavour=flavour, **kw)


@pytest.mark.parametrize("flavour", FLAVOURS)
@pytest.mark.parametrize("knobs", KNOBS, ids=lambda k: ",".join(k) or "default")
def test_round_trip_equals_scenario(tmp_path: Path, flavour: str, knobs: dict) -> None:
    scenario = build_scenario(**knobs)
    timeline = tracekit.load(_write(tmp_path, scenario.events, flavour))
    assert timeline.meta["format"] == "kineto"
    assert timeline.meta["warnings"] == []
    assert timeline.validate() == []
    ranges = scenario.events.filter(pl.col("kind") == "range")["name"].to_list()
    got = _sorted(_scenario_rows(_absolute(timeline), ranges))
    want = _sorted(_expected(scenario.events, flavour))
    assert got.height == want.height
    assert got.equals(want)


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_counts_and_kernel_time_equal_truth(tmp_path: Path, flavour: str) -> None:
    scenario = build_scenario(steps=3, layers=3, unfused_collective=True, fallback_kernel=True)
    truth = scenario.truth
    spec = flavour_info(flavour)
    df = _absolute(tracekit.load(_write(tmp_path, scenario.events, flavour)))
    ranges = scenario.events.filter(pl.col("kind") == "range")["name"].to_list()
    rows = _scenario_rows(df, ranges)
    counts = dict(rows.group_by("kind").len().iter_rows())
    want = {k: n for k, n in truth["counts"].items() if k != "sync" or spec.cuda_sync}
    if spec.legacy:
        want["op"] = want.pop("range")
    assert counts == want
    apis = dict(rows.filter(pl.col("kind") == "api").group_by("name").len().iter_rows())
    assert apis == {kineto_name(flavour, "api", k): n for k, n in truth["api_counts"].items()}
    kernels = rows.filter(pl.col("kind") == "kernel")
    assert kernels.height == truth["counts"]["kernel"]
    by_stream = dict(kernels.group_by("stream").len().iter_rows())
    assert by_stream == {s: n for s, n in truth["kernels_by_stream"].items() if n}
    if spec.float_ts:
        assert kernels["dur"].sum() == truth["kernel_ns"]
        memcpy = rows.filter(pl.col("kind") == "memcpy")["dur"].sum()
        assert memcpy == truth["memcpy_ns"]
    else:  # durations truncated to whole µs
        want_ns = scenario.events.filter(pl.col("kind") == "kernel")["dur"] // 1000 * 1000
        assert kernels["dur"].sum() == want_ns.sum()
        assert 0 <= truth["kernel_ns"] - kernels["dur"].sum() < 1000 * kernels.height


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_kernel_and_copy_args(tmp_path: Path, flavour: str) -> None:
    scenario = build_scenario(steps=1, layers=2, unfused_collective=True)
    spec = flavour_info(flavour)
    df = _plain(tracekit.load(_write(tmp_path, scenario.events, flavour, world_size=2)).df)
    launched = {
        c: json.loads(a)
        for c, a in scenario.events.filter(pl.col("kind") == "kernel")
        .select("corr", "args")
        .iter_rows()
    }
    kernels = df.filter(pl.col("kind") == "kernel")
    assert kernels.height == len(launched)
    for name, corr, args_text in kernels.select("name", "corr", "args").iter_rows():
        args, kernel = json.loads(args_text), launched[corr]
        assert args["grid"] == kernel["grid"]
        assert args["block"] == kernel["block"]
        if spec.amd:  # roctracer records no registers, shared memory or occupancy
            assert "registers" not in args and "shared_memory" not in args
        else:
            assert args["registers"] == kernel["registers"]
            assert args["shared_memory"] == kernel["shared_static"] + kernel["shared_dynamic"]
            assert 0 <= args["occupancy"] <= 100
        if name.startswith("nccl") and spec.nccl_args:
            assert args["collective"] == "allreduce"
            assert args["group_size"] == 2
            assert args["dtype"] == "BFloat16"
            assert args["pg_ranks"] == "[0, 1]"
        else:
            assert "collective" not in args
    copies = df.filter(pl.col("kind").is_in(["memcpy", "memset"])).sort("ts")
    want = scenario.events.filter(pl.col("kind").is_in(["memcpy", "memset"])).sort("ts")
    got_bytes = [json.loads(a)["bytes"] for a in copies["args"]]
    assert got_bytes == [json.loads(a)["bytes"] for a in want["args"]]


# The 2021 profiler wrote "External id" on Operator rows but "external id" on Kernel, Runtime,
# Memcpy and Memset rows (kineto-tbplugin-resnet50-v100-legacy): both must be read.
@pytest.mark.parametrize("flavour", FLAVOURS)
def test_cpu_ops_wrap_launches_and_share_external_ids(tmp_path: Path, flavour: str) -> None:
    scenario = build_scenario(steps=2, layers=2, unfused_collective=True)
    df = _plain(tracekit.load(_write(tmp_path, scenario.events, flavour)).df)
    ranges = scenario.events.filter(pl.col("kind") == "range")["name"].to_list()
    python = pl.col("name").str.contains(r"\.py\(\d+\): ")  # step functions, kept as markers
    ops = df.filter((pl.col("kind") == "op") & ~pl.col("name").is_in(ranges) & ~python)
    launches = scenario.events.filter(pl.col("kind").is_in(["kernel", "memcpy", "memset", "sync"]))
    assert ops.height == launches.height
    assert "aten::mm" in ops["name"].to_list()
    op_ext = {
        json.loads(a)["external_id"]: (t, t + d)
        for a, t, d in ops.select("args", "ts", "dur").iter_rows()
    }
    api = {
        c: (t, t + d)
        for c, t, d in df.filter(pl.col("kind") == "api").select("corr", "ts", "dur").iter_rows()
    }
    slack = 0 if flavour_info(flavour).float_ts else 1000  # start and dur truncated apart
    kernels = df.filter(pl.col("kind") == "kernel")
    for corr, args in kernels.select("corr", "args").iter_rows():
        start, end = op_ext[json.loads(args)["external_id"]]
        assert start <= api[corr][0] and api[corr][1] <= end + slack
    nccl = kernels.filter(pl.col("name").str.starts_with("nccl"))
    nccl_ext = {json.loads(a)["external_id"] for a in nccl["args"]}
    names = {json.loads(a)["external_id"]: n for n, a in ops.select("name", "args").iter_rows()}
    assert {names[e] for e in nccl_ext} == {"record_param_comms"}


@pytest.mark.parametrize("flavour", [f for f in FLAVOURS if flavour_info(f).gpu_annotation])
def test_gpu_user_annotations_span_the_range_work(tmp_path: Path, flavour: str) -> None:
    scenario = build_scenario(steps=2, layers=2)
    events = scenario.events
    df = _absolute(tracekit.load(_write(tmp_path, events, flavour)))
    got = {
        (n, s): (a, d)
        for n, s, a, d in df.filter((pl.col("kind") == "range") & (pl.col("device") >= 0))
        .select("name", "stream", "abs", "dur")
        .iter_rows()
    }
    api_ts = dict(events.filter(pl.col("kind") == "api").select("corr", "ts").iter_rows())
    spans: dict[tuple[str, int], tuple[int, int]] = {}
    for name, start, dur in (
        events.filter(pl.col("kind") == "range").select("name", "ts", "dur").iter_rows()
    ):
        work = events.filter(
            pl.col("kind").is_in(WORK)
            & pl.col("corr").is_in([c for c, t in api_ts.items() if start <= t < start + dur])
        )
        for stream, lo, hi in (
            work.group_by("stream")
            .agg(pl.col("ts").min(), (pl.col("ts") + pl.col("dur")).max().alias("end"))
            .iter_rows()
        ):
            spans[(name, stream)] = (lo, hi)
    pad = flavour_info(flavour).annotation_pad_ns
    want = {}
    for key, (lo, hi) in spans.items():
        abs_lo, abs_hi = DEFAULT_BASE_TIME_NS + lo - pad, DEFAULT_BASE_TIME_NS + hi + pad
        span = abs_hi - abs_lo
        if not flavour_info(flavour).float_ts:
            abs_lo, span = abs_lo // 1000 * 1000, span // 1000 * 1000
        want[key] = (abs_lo, span)
    assert got == want
    assert df.filter((pl.col("kind") == "range") & (pl.col("device") >= 0))[
        "device"
    ].unique().to_list() == [0]


@pytest.mark.parametrize("flavour", [f for f in FLAVOURS if flavour_info(f).python])
def test_python_functions_only_on_request(tmp_path: Path, flavour: str) -> None:
    scenario = build_scenario(steps=3, layers=1)
    path = _write(tmp_path, scenario.events, flavour)
    plain = _plain(kineto.parse(path).df)
    full = _plain(kineto.parse(path, include_python=True).df)
    frames = full.filter(pl.col("name").str.contains(r"\.py\(\d+\): "))
    assert frames.height == PYTHON_FRAMES * 3
    assert set(frames["kind"].to_list()) == {"op"}
    assert set(frames["pid"].to_list()) == {scenario.knobs["pid"]}
    # without asking, only the serving engine's step function stays (a step marker)
    kept = plain.filter(pl.col("name").str.contains(r"\.py\(\d+\): "))
    assert kept["name"].to_list() == ["vllm/v1/worker/gpu_model_runner.py(1412): execute_model"] * 3
    assert full.height - plain.height == (PYTHON_FRAMES - 1) * 3


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_metadata(tmp_path: Path, flavour: str) -> None:
    spec = flavour_info(flavour)
    scenario = build_scenario(steps=1, layers=1)
    meta = tracekit.load(_write(tmp_path, scenario.events, flavour, world_size=4)).meta
    names = {d["name"] for d in meta["devices"]}
    assert names == {"AMD Instinct MI300X" if spec.amd else "NVIDIA H200"}
    assert len(meta["devices"]) == 8
    assert meta["ranks"] == [0]
    if spec.amd:
        assert meta["producer"]["backend"] == "roctracer"
    if not spec.legacy:
        assert meta["world_size"] == 4
        assert meta["distributed_backend"] == "nccl"


def test_two_rank_folder_is_one_timeline(tmp_path: Path) -> None:
    folder = tmp_path / "job"
    folder.mkdir()
    scenarios = {
        r: build_scenario(steps=2, layers=2, rank=r, seed=r, pid=1000 + r, tid=2000 + r)
        for r in (0, 1)
    }
    for rank, scenario in scenarios.items():
        write_kineto_json(
            scenario.events, folder / f"rank{rank}.pt.trace.json.gz", rank=rank, world_size=2
        )
    timeline = tracekit.load(folder)
    assert timeline.meta["ranks"] == [0, 1]
    assert timeline.meta["warnings"] == []
    df = _absolute(timeline)
    assert set(df["rank"].unique().to_list()) == {0, 1}
    ranges: list[str] = []
    for scenario in scenarios.values():
        ranges += scenario.events.filter(pl.col("kind") == "range")["name"].to_list()
    rows = _scenario_rows(df, ranges)
    for rank, scenario in scenarios.items():
        mine = rows.filter(pl.col("rank") == rank)
        counts = dict(mine.group_by("kind").len().iter_rows())
        assert counts == scenario.truth["counts"]
        kernel_ns = mine.filter(pl.col("kind") == "kernel")["dur"].sum()
        assert kernel_ns == scenario.truth["kernel_ns"]
        assert _sorted(mine).equals(_sorted(_expected(scenario.events, "cuda-2024")))


def test_ts_text_is_exact_integer_microseconds(tmp_path: Path) -> None:
    """Three decimals of µs from integer ns, relative to a quarter-year baseTimeNanoseconds."""
    scenario = build_scenario(steps=1, layers=1)
    path = _write(tmp_path, scenario.events, "cuda-2024", name="t.json.gz")
    with gzip.open(path, "rt") as fh:
        text = fh.read()
    trace = json.loads(text)
    base = trace["baseTimeNanoseconds"]
    assert base % BASE_TIME_PERIOD_NS == 0
    assert trace["displayTimeUnit"] == "ms"
    first = scenario.events.filter(pl.col("kind") == "kernel").row(0, named=True)
    rel = DEFAULT_BASE_TIME_NS + first["ts"] - base
    dur = first["dur"]
    assert f'"ts":{rel // 1000}.{rel % 1000:03d},"dur":{dur // 1000}.{dur % 1000:03d}' in text


def test_large_relative_timestamps_stay_exact(tmp_path: Path) -> None:
    """A trace that starts just before a quarter boundary: ts near 7.9e12 µs keeps its ns."""
    scenario = build_scenario(steps=2, layers=2)
    base = 224 * BASE_TIME_PERIOD_NS + BASE_TIME_PERIOD_NS - 2_000_000  # 2 ms before the next
    timeline = tracekit.load(_write(tmp_path, scenario.events, "cuda-2024", base_time_ns=base))
    ranges = scenario.events.filter(pl.col("kind") == "range")["name"].to_list()
    got = _sorted(_scenario_rows(_absolute(timeline), ranges))
    assert got.equals(_sorted(_expected(scenario.events, "cuda-2024", base)))


def test_integer_flavours_are_exact_on_whole_microseconds(tmp_path: Path) -> None:
    """cuda-2022 loses nothing when the scenario's times are whole µs."""
    events = build_scenario(steps=1, layers=2).events.with_columns(
        pl.col("ts") * 1000, pl.col("dur") * 1000
    )
    timeline = tracekit.load(_write(tmp_path, events, "cuda-2022"))
    ranges = events.filter(pl.col("kind") == "range")["name"].to_list()
    got = _scenario_rows(_absolute(timeline), ranges)
    want = _expected(events, "cuda-2022")
    base_ts = events.filter(pl.col("kind").is_in(written_kinds("cuda-2022")))
    assert (want["dur"] == base_ts["dur"]).all()
    assert _sorted(got).equals(_sorted(want))


def test_writer_refuses_bad_input(tmp_path: Path) -> None:
    events = build_scenario(steps=1, layers=1).events
    path = _write(tmp_path, events, "cuda-2024")
    with pytest.raises(FileExistsError):
        _write(tmp_path, events, "cuda-2024")
    assert _write(tmp_path, events, "rocm", overwrite=True) == path
    with pytest.raises(ValueError, match="flavour"):
        _write(tmp_path, events, "cuda-1999", name="x.json")
    with pytest.raises(ValueError, match="rank"):
        _write(tmp_path, events, "cuda-2024", name="x.json", rank=1, world_size=2)
    with pytest.raises(ValueError, match="kinds"):
        _write(tmp_path, events.with_columns(kind=pl.lit("marker")), "cuda-2024", name="y.json")
    assert not (tmp_path / "x.json").exists() and not (tmp_path / "y.json").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["trace.json"]
