"""Bubbles the host spent in runtime calls that are no launches: memory allocation (cudaFree,
cudaMalloc …) and one-time setup (stream, event and handle creation, module loading) are
named as such, before a late launch, when they cover at least half of the bubble on its
rank; a plain late launch stays ``host-bound: launch``."""

from __future__ import annotations

import re
from functools import cache

import polars as pl
import pytest

import tracekit
from fixtures.kineto_writer import write_kineto_json
from fixtures.nsys_writer import write_nsys_sqlite
from fixtures.rocpd_writer import write_rocpd
from fixtures.runtime_calls import HIP_NAMES, NSYS_NAMES, plant_runtime_calls
from fixtures.scenario import Scenario, build_scenario
from tests.rules.scenarios import of_rule
from tests.test_steps import _df, _kernel, _range
from tracekit.metrics.bubbles import ALLOC_API, SETUP_API, attributed_bubbles
from tracekit.rules.advice import advice
from tracekit.taxonomy import vendor_of
from tracekit.timeline import Timeline, build_table

ALLOC, SETUP, LAUNCH = "host-bound: memory allocation", "host-bound: setup", "host-bound: launch"
STEPS = (2, 3, 4)  # the steps with a 150 µs host stall (of five: none is warm-up)
CALLS = (
    [("cudaFree", 50_000), ("cudaMalloc", 40_000)],  # 90 µs together, neither alone half
    [("cudaStreamCreateWithFlags", 120_000)],
    [("cudaMalloc", 60_000)],  # 40 % of the bubble: the late launch stays the cause
)
FORMATS = {  # format -> (its writer, the names its runtime calls take)
    "kineto": (lambda sc, tmp: write_kineto_json(sc.events, tmp / "t.json"), None),
    "nsys": (lambda sc, tmp: write_nsys_sqlite(sc.events, tmp / "t.sqlite"), NSYS_NAMES),
    "rocpd": (lambda sc, tmp: write_rocpd(sc.events, tmp / "t.db"), HIP_NAMES),
}


@cache
def _scenario(fmt: str) -> Scenario:
    sc = build_scenario(steps=5, layers=4, idle_bubble_ns=150_000, fault_steps=STEPS)
    return plant_runtime_calls(sc, CALLS, names=FORMATS[fmt][1])


@pytest.fixture(scope="module")
def analysed(tmp_path_factory: pytest.TempPathFactory):
    """format -> (scenario, analysis), each made once."""
    made: dict[str, tuple[Scenario, tracekit.Analysis]] = {}

    def get(fmt: str) -> tuple[Scenario, tracekit.Analysis]:
        if fmt not in made:
            sc = _scenario(fmt)
            path = FORMATS[fmt][0](sc, tmp_path_factory.mktemp(fmt))
            made[fmt] = (sc, tracekit.analyze(tracekit.load(path)))
        return made[fmt]

    return get


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_runtime_calls_name_the_bubble(analysed, fmt: str) -> None:
    sc, a = analysed(fmt)
    stalls = [resume - drained for drained, resume in sc.truth["bubbles"]]
    assert stalls == [150_000] * 3
    names = {row[0] for calls in sc.truth["runtime_calls"] for row in calls}
    parsed = set(a.rows.filter(pl.col("kind") == "api")["name"].cast(pl.String))
    assert {re.sub(r"_v\d{4,}$", "", n) for n in names} <= parsed  # nsys's suffix: stripped
    found = {f.evidence["causes"][0]: f for f in of_rule(a, "bubbles")}
    assert set(found) == {ALLOC, SETUP, LAUNCH}
    vendor = vendor_of(a.timeline.meta)
    for (cause, kind), step in zip(((ALLOC, "host_alloc"), (SETUP, "host_setup")), STEPS):
        f = found[cause]
        assert (f.steps, f.impact_ns, f.metrics["bubble_count"]) == ([step], 150_000, 1)
        assert f.pattern.startswith(f"{cause}: ") and not f.warm_up
        assert f.advice == advice("bubbles", kind, vendor, a.stack.ids)
    late = found[LAUNCH]
    assert (late.steps, late.impact_ns) == ([STEPS[2]], 150_000)
    assert late.advice == advice("bubbles", "host_launch", vendor, a.stack.ids)


def test_the_setup_advice_says_warm_up() -> None:
    for vendor in ("nvidia", "amd", "ascend", None):
        assert "warm-up" in advice("bubbles", "host_setup", vendor)
    text = advice("bubbles", "host_alloc", "nvidia", frozenset({"pytorch"}))
    assert "PYTORCH_CUDA_ALLOC_CONF" in text and "empty_cache" in text
    assert "PYTORCH" not in advice("bubbles", "host_alloc", "nvidia")


def _call(ts: int, dur: int, name: str, rank: int = 0) -> tuple:
    return (ts, dur, "api", name, -1, None, rank, None)


def _launch(ts: int, corr: int) -> tuple:
    return (ts, 2_000, "api", "cudaLaunchKernel", -1, None, 0, corr)


def test_coverage_on_the_rank_decides() -> None:
    rows = [
        _range(0, 1_000_000, "ProfilerStep#1"),
        *(_launch(1_000 * c, c) for c in (1, 2, 3, 4, 5, 6, 7)),
        _kernel(10_000, 10_000, 1),
        # 20-120 us: a free straddling its start (20 us in it) and a malloc (35 us): 55 of 100
        _call(10_000, 30_000, "cudaFree"), _call(60_000, 35_000, "cudaMalloc"),
        _launch(100_000, 8), _kernel(120_000, 10_000, 8),
        # 130-230 us: two threads creating streams and events at once, 65 us summed but
        # 40 us of the bubble covered (one merged stretch): not half, the launch stays
        _call(140_000, 40_000, "cudaStreamCreateWithFlags"),
        _call(150_000, 25_000, "cudaEventCreateWithFlags"),
        _launch(210_000, 9), _kernel(230_000, 10_000, 9),
        # 240-340 us: a malloc covering 80 us, but the next kernel was launched long before
        _call(250_000, 80_000, "cudaMalloc"), _kernel(340_000, 10_000, 2),
        # 350-450 us: setup 45 us + a free 10 us = 55 of 100: setup covers more
        _call(360_000, 45_000, "cudaStreamCreateWithFlags"), _call(410_000, 10_000, "cudaFree"),
        _launch(430_000, 10), _kernel(450_000, 10_000, 10),
        # 460-560 us: 90 us in a free on another rank's host: not this rank's
        _call(465_000, 90_000, "cudaFree", rank=1),
        _launch(540_000, 11), _kernel(560_000, 10_000, 11),
    ]  # fmt: skip
    df = _df(rows)
    tl = Timeline(build_table({c: df[c] for c in df.columns}), {"format": "test"})
    a = tracekit.analyze(tl)
    found = attributed_bubbles(a.in_windows, a.rows, 2_000)
    got = found.filter(pl.col("rank") == 0).select("start", "end", "cause").rows()
    assert got == [
        (20_000, 120_000, ALLOC),
        (130_000, 230_000, LAUNCH),
        (240_000, 340_000, "unknown"),
        (350_000, 450_000, SETUP),
        (460_000, 560_000, LAUNCH),
    ]


@pytest.mark.parametrize(
    ("name", "alloc", "setup"),
    [
        ("cudaFree", True, False),
        ("cudaHostAlloc", True, False),
        ("cudaMallocHost", True, False),
        ("cudaMalloc3DArray", True, False),
        ("cuMemAlloc_v2", True, False),
        ("cuMemAllocHost_v2", True, False),
        ("hipHostMalloc", True, False),
        ("hipMallocManaged", True, False),
        ("hipMemMap", True, False),
        ("AscendCL@aclrtMallocAlign32", True, False),
        ("cudaStreamCreateWithFlags", False, True),
        ("cuLibraryLoadData", False, True),
        ("cuModuleLoadDataEx", False, True),
        ("cublasCreate_v2", False, True),
        ("hipModuleLoad", False, True),
        ("__hipRegisterFatBinary", False, True),
        ("AscendCL@aclrtCreateEventExWithFlag", False, True),
        ("aclrtCreateStreamWithConfig", False, True),
        # stream-ordered allocation does not block the host (what the advice recommends)
        ("cudaMallocAsync", False, False),
        ("cudaFreeAsync", False, False),
        ("cudaMallocFromPoolAsync", False, False),
        ("hipMallocAsync", False, False),
        ("hipFreeAsync", False, False),
        ("cuMemAllocAsync", False, False),
        ("cuMemFreeAsync_ptsz", False, False),
        ("cuMemMapArrayAsync", False, False),
        # launches, copies, queries and cheap descriptors are neither
        ("cudaLaunchKernel", False, False),
        ("cudaMemcpyAsync", False, False),
        ("cuMemGetAddressRange_v2", False, False),
        ("cudnnCreateTensorDescriptor", False, False),
        ("AscendCL@aclCreateTensorDesc", False, False),
        ("cuLibraryGetKernel", False, False),
    ],
)
def test_runtime_call_names(name: str, alloc: bool, setup: bool) -> None:
    series = pl.Series([name])
    assert (series.str.contains(ALLOC_API)[0], series.str.contains(SETUP_API)[0]) == (
        alloc,
        setup,
    )


MAIN, PIN = 11, 12  # the launching thread and a DataLoader pin-memory thread of process 10


def _on(ts: int, dur: int, name: str, tid: int, corr: int | None = None) -> tuple:
    return (ts, dur, "api", name, -1, None, 0, 10, tid, corr)


def _k(ts: int, corr: int | None) -> tuple:
    return (ts, 10_000, "kernel", "k", 0, 7, 0, None, None, corr)


def test_only_the_launching_thread_holds_the_launch_back() -> None:
    rows = [
        (0, 1_000_000, "range", "ProfilerStep#1", -1, None, 0, 10, MAIN, None),
        _on(1_000, 2_000, "cudaLaunchKernel", MAIN, 1), _k(10_000, 1),
        # 20-120 us: 90 us pinning host memory on another thread; the launch is late
        _on(25_000, 90_000, "cudaHostAlloc", PIN), _on(100_000, 2_000, "cudaLaunchKernel", MAIN, 2),
        _k(120_000, 2),
        # 130-230 us: 80 us in a malloc on the launching thread itself
        _on(135_000, 80_000, "cudaMalloc", MAIN), _on(215_000, 2_000, "cudaLaunchKernel", MAIN, 3),
        _k(230_000, 3),
        # 240-340 us: the next kernel's launch is not in the trace: any thread of the rank
        _on(250_000, 80_000, "cudaHostAlloc", PIN), _k(340_000, None),
        # 350-450 us: 90 us in stream-ordered allocation, which returns at once: the launch
        _on(355_000, 50_000, "cudaMallocAsync", MAIN), _on(405_000, 40_000, "cudaFreeAsync", MAIN),
        _on(446_000, 2_000, "cudaLaunchKernel", MAIN, 4), _k(450_000, 4),
    ]  # fmt: skip
    cols = ("ts", "dur", "kind", "name", "device", "stream", "rank", "pid", "tid", "corr")
    types = (pl.Int64, pl.Int64, pl.String, pl.String, pl.Int32, pl.Int64, pl.Int32, pl.Int64)
    df = pl.DataFrame(rows, schema=dict(zip(cols, (*types, pl.Int64, pl.Int64))), orient="row")
    a = tracekit.analyze(Timeline(build_table({c: df[c] for c in df.columns}), {"format": "t"}))
    found = attributed_bubbles(a.in_windows, a.rows, 2_000)
    assert found.select("start", "end", "cause").rows() == [
        (20_000, 120_000, LAUNCH),
        (130_000, 230_000, ALLOC),
        (240_000, 340_000, ALLOC),
        (350_000, 450_000, LAUNCH),
    ]
