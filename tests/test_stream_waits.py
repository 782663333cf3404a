"""Streams waiting on events (issue 31, part 3): Ascend host callbacks and runtime tasks are
``sync`` rows, never kernels; a stream wait is attributed to a host callback or to the stream
that released it, per step in ``stream_wait_ns`` and as the cause of the bubbles it makes."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import polars as pl
import pytest

import tracekit
from fixtures.ascend_scenario import build_ascend_scenario, plant_stream_waits
from fixtures.scenario import Scenario
from tests.rules.scenarios import ASCEND_WRITERS
from tracekit.metrics.stream_waits import stream_waits
from tracekit.parsers.msprof.engines import classify
from tracekit.rules.advice import advice
from tracekit.timeline import Timeline, build_table

WAIT_STEPS = (1, 3)  # the steps whose idle bubble a wait fills
KNOBS = {
    "steps": 4,
    "layers": 4,
    "idle_bubble_ns": 150_000,
    "fault_steps": WAIT_STEPS,
    "fallback_kernel": False,
    "hccl_all_to_all_layers": 0,
}
RUNTIME = ("HOSTFUNC_CALLBACK", "EVENT_WAIT", "EVENT_RECORD")


@cache
def _scenario(planted: bool) -> Scenario:
    sc = build_ascend_scenario(**KNOBS)
    return plant_stream_waits(sc, WAIT_STEPS) if planted else sc


@pytest.fixture(scope="module")
def ascend(tmp_path_factory: pytest.TempPathFactory):
    """(writer, planted) -> (the folder written, its analysis), each made once."""
    made: dict[tuple[str, bool], tuple[Path, tracekit.Analysis]] = {}

    def get(writer: str, planted: bool = True) -> tuple[Path, tracekit.Analysis]:
        if (writer, planted) not in made:
            tmp = tmp_path_factory.mktemp(f"{writer}{int(planted)}")
            path = ASCEND_WRITERS[writer](_scenario(planted).events, tmp)
            made[writer, planted] = (tmp, tracekit.analyze(tracekit.load(path)))
        return made[writer, planted]

    return get


def test_runtime_tasks_are_not_kernels() -> None:
    names = [
        "HOSTFUNC_CALLBACK",
        "EVENT_RESET",
        "MEM_WAIT_VALUE",
        "NOTIFY_WAIT",
        "STREAM_LABEL_GOTO",
    ]
    frame = pl.DataFrame(
        {"core": [None] * 5, "task": names, "name": ["N/A"] * 5},
        schema={"core": pl.String, "task": pl.String, "name": pl.String},
    )
    kind, _, known = classify(pl.col("core"), pl.col("task"), pl.col("name"))
    got = frame.select(kind=kind, known=known)
    assert got["kind"].to_list() == ["sync", "sync", "sync", "sync", "marker"]
    assert got["known"].all()


def _op_table_ns(folder: Path) -> tuple[int, int]:
    """(rows, summed ns) of the op table's compute rows (op_summary / kernel_details), read
    exactly from its µs text."""
    [path] = [p for p in folder.rglob("*.csv") if p.name.startswith(("op_summary", "kernel_"))]
    table = pl.read_csv(path, infer_schema=False)
    core = "Accelerator Core" if "Accelerator Core" in table.columns else "Task Type"
    us = "Duration(us)" if "Duration(us)" in table.columns else "Task Duration(us)"
    rows = table.filter(pl.col(core) != "HCCL")
    total = rows[us].str.strip_chars().cast(pl.Decimal(20, 3)).sum()
    return rows.height, int(total * 1000)


@pytest.mark.parametrize("writer", ["prof", "torch_npu"])
def test_kernel_time_equals_the_op_table(ascend, writer: str) -> None:
    # task_time (prof) and the trace_view hardware layer (torch_npu) list the callback, the
    # waits and the record as tasks: none of them is a kernel, so kernel time is the op table's
    folder, a = ascend(writer)
    runtime = a.rows.filter(pl.col("name").cast(pl.String).is_in(RUNTIME))
    assert sorted(runtime["name"].cast(pl.String).to_list()) == sorted(
        ["HOSTFUNC_CALLBACK", "EVENT_WAIT", "EVENT_WAIT", "EVENT_RECORD"]
    )
    assert set(runtime["kind"].cast(pl.String)) == {"sync"}
    kernels = a.rows.filter(pl.col("kind") == "kernel")
    assert (kernels.height, kernels["dur"].sum()) == _op_table_ns(folder) == (276, 5_301_141)
    # and compute, busy and bubble time are those of the same run without the runtime tasks
    _, bare = ascend(writer, planted=False)
    columns = ["step", "busy_ns", "compute_ns", "bubble_ns", "cat_other_ns"]
    assert a.step_metrics.select(columns).equals(bare.step_metrics.select(columns))
    assert bare.step_metrics["stream_wait_ns"].sum() == 0


def test_stream_wait_per_step_equals_the_truth(ascend) -> None:
    _, a = ascend("torch_npu")  # steps from ProfilerStep#N: the scenario's own numbers
    truth = _scenario(True).truth["stream_wait_ns"]
    assert truth == {1: 147_000, 3: 149_000}
    got = dict(a.step_metrics.select("step", "stream_wait_ns").iter_rows())
    assert got == {0: 0, 1: 147_000, 2: 0, 3: 149_000}
    assert a.step_metrics["sync_wait_ns"].sum() == 0  # ranks waiting at collectives: none


def test_stream_waits_on_task_time_name_what_they_waited_for(ascend) -> None:
    _, a = ascend("prof")  # msprof task_time + op_summary: steps by period
    waits = stream_waits(a.rows, a.work)
    assert waits.select("stream", "target", "cause").rows() == [
        (7, None, "waiting on a host callback"),
        (7, 13, "waiting on stream 13"),
    ]
    assert (waits["end"] - waits["start"]).to_list() == [147_000, 149_000]
    per_step = a.step_metrics.filter(pl.col("stream_wait_ns") > 0)["stream_wait_ns"]
    assert sorted(per_step.to_list()) == [147_000, 149_000]


def test_bubbles_name_the_wait(ascend) -> None:
    _, a = ascend("torch_npu")
    found = {f.pattern.split(":")[0]: f for f in a.findings if f.rule == "bubbles"}
    assert set(found) == {"waiting on a host callback", "waiting on stream 13"}
    callback, stream = found["waiting on a host callback"], found["waiting on stream 13"]
    assert (callback.steps, callback.impact_ns) == ([1], 150_000)
    assert (stream.steps, stream.impact_ns) == ([3], 150_000)
    assert callback.advice == advice("bubbles", "host_callback", "ascend")
    assert stream.advice == advice("bubbles", "stream_wait", "ascend")
    assert "HOSTFUNC_CALLBACK" in callback.advice and "EVENT_WAIT" in stream.advice


def _cuda(wait_args: dict) -> Timeline:
    """A CUDA step: stream 7 waits (cudaStreamWaitEvent, its CUPTI record timed on the host)
    for stream 13, whose second kernel is late; a second wait on 7 finds 13 already done."""
    rows = [
        (0, 200_000, "range", "ProfilerStep#0", -1, None, None, None),
        (1_000, 2_000, "api", "cudaLaunchKernel", -1, None, 1, None),
        (2_000, 2_000, "api", "cudaLaunchKernel", -1, None, 2, None),
        (3_000, 2_000, "api", "cudaLaunchKernel", -1, None, 3, None),
        (4_000, 2_000, "api", "cudaLaunchKernel", -1, None, 4, None),
        (5_000, 2_000, "api", "cudaLaunchKernel", -1, None, 5, None),
        (10_000, 10_000, "kernel", "a", 0, 7, 1, None),
        (15_000, 25_000, "kernel", "producer_1", 0, 13, 2, None),
        (21_000, 2_000, "sync", "Stream Wait Event", 0, 7, None, json.dumps(wait_args)),
        (100_000, 10_000, "kernel", "producer_2", 0, 13, 3, None),
        (111_000, 10_000, "kernel", "consumer", 0, 7, 4, None),
        (125_000, 1_000, "sync", "Stream Wait Event", 0, 7, None, json.dumps(wait_args)),
        (130_000, 5_000, "kernel", "tail", 0, 7, 5, None),
    ]
    cols = ("ts", "dur", "kind", "name", "device", "stream", "corr", "args")
    types = (pl.Int64, pl.Int64, pl.String, pl.String, pl.Int32, pl.Int64, pl.Int64, pl.String)
    df = pl.DataFrame(rows, schema=dict(zip(cols, types)), orient="row")
    df = df.with_columns(rank=pl.lit(0, pl.Int32))
    return Timeline(build_table({c: df[c] for c in df.columns}), {"format": "test"})


@pytest.mark.parametrize(
    "wait_args", [{"wait_on_stream": 13, "event_id": 19}, {"event": 5}], ids=["kineto", "nsys"]
)
def test_cuda_stream_wait_event(wait_args: dict) -> None:
    # Kineto keeps the stream waited on; nsys only the event id: any other stream releases it
    a = tracekit.analyze(_cuda(wait_args))
    waits = stream_waits(a.rows, a.work)
    assert waits.select("stream", "start", "end", "target", "cause").rows() == [
        (7, 21_000, 111_000, 13, "waiting on stream 13")  # the second wait blocked nothing
    ]
    # of the 90 µs wait, the device idled from producer_1's end to producer_2 (60 µs) and
    # from producer_2's end to the consumer (1 µs): the idle time the wait explains
    assert a.step_metrics["stream_wait_ns"].to_list() == [61_000]
    bubble, other = sorted((f for f in a.findings if f.rule == "bubbles"), key=lambda f: f.step)
    assert bubble.pattern.startswith("waiting on stream 13: producer_1 → producer_2")
    assert other.pattern.startswith("unknown: consumer → tail")  # 125 µs: 13 was done
    assert bubble.impact_ns == 60_000
    assert bubble.advice == advice("bubbles", "stream_wait", None)  # no vendor: the default


def test_real_cuda_wait_that_blocked_nothing() -> None:
    traces = Path(__import__("os").environ.get("TRACEKIT_REAL_TRACES", ""))
    path = traces / "nvidia/hta-event-sync-multistream/event_sync_trace.json.gz"
    if not path.is_file():
        pytest.skip("TRACEKIT_REAL_TRACES is not set")
    # its one Stream Wait Event (stream 24 on stream 20) comes 18 ms after stream 20 ended
    a = tracekit.analyze(tracekit.load(path))
    assert stream_waits(a.rows, a.work).height == 0
    assert a.step_metrics["stream_wait_ns"].sum() == 0


def test_a_short_ascend_wait_blocked_its_stream_from_the_gap_before_it() -> None:
    # CANN 6 msprof on an Ascend 910 (mindinsight's AlexNet): the compute stream 4 runs its
    # next operator 40 µs after the HCCL stream's last task; the HCCL stream records the event
    # at 23.4 µs and stream 4's EVENT_WAIT is timed 10 ns at 39.96 µs, when it was satisfied
    rows = [
        (0, 200_000, "range", "Step#0", None, None),
        (0, 50_000, "kernel", "MatMul", 4, "aic"),
        (40_000, 60_000, "comm", "hcom_allReduce_", 8, "comm"),
        (123_400, 10, "sync", "EVENT_RECORD", 8, None),
        (139_960, 10, "sync", "EVENT_WAIT", 4, None),
        (140_280, 5_480, "kernel", "TransData", 4, "aic"),
    ]
    cols = ("ts", "dur", "kind", "name", "stream", "engine")
    df = pl.DataFrame(rows, schema=cols, orient="row").with_columns(
        device=pl.when(pl.col("kind") != "range").then(pl.lit(0, pl.Int32)),
        rank=pl.lit(0, pl.Int32),
    )
    meta = {"format": "msprof", "producer": {"name": "msprof"}}
    a = tracekit.analyze(Timeline(build_table({c: df[c] for c in df.columns}), meta))
    waits = stream_waits(a.rows, a.work)
    assert waits.select("stream", "start", "end", "target", "cause").rows() == [
        (4, 50_000, 139_970, 8, "waiting on stream 8")  # from stream 4's last row's end
    ]
    assert a.step_metrics["stream_wait_ns"].to_list() == [39_970]  # idle: 100 µs to the wait
    [bubble] = [f for f in a.findings if f.rule == "bubbles"]
    assert bubble.pattern == "waiting on stream 8: hcom_allReduce_ → TransData"
    assert bubble.impact_ns == 40_280
    # with nothing of another stream ending in the gap the wait is only what it timed: 10 ns
    alone = df.filter(~pl.col("name").is_in(["EVENT_RECORD", "hcom_allReduce_"]))
    b = tracekit.analyze(Timeline(build_table({c: alone[c] for c in alone.columns}), meta))
    assert stream_waits(b.rows, b.work).select("start", "end", "cause").rows() == [
        (139_960, 139_970, "waiting on an event")
    ]


def _ascend(rows: list[tuple]) -> tracekit.Analysis:
    """The analysis of msprof-like ``(ts, dur, kind, name, stream, engine)`` rows on device 0."""
    cols = ("ts", "dur", "kind", "name", "stream", "engine")
    df = pl.DataFrame(rows, schema=cols, orient="row").with_columns(
        device=pl.when(pl.col("kind") != "range").then(pl.lit(0, pl.Int32)),
        rank=pl.lit(0, pl.Int32),
    )
    meta = {"format": "msprof", "producer": {"name": "msprof"}}
    return tracekit.analyze(Timeline(build_table({c: df[c] for c in df.columns}), meta))


@pytest.mark.parametrize(
    ("record_end", "expected"),
    [
        # the record 4.9 ms before the wait released nothing the stream waited 5 ms for
        (200_000, (5_100_000, 5_100_010, None, "waiting on an event")),
        # 50 µs before the wait (EVENT_LATENCY_NS, inclusive): it released it, from the gap
        (5_050_000, (100_000, 5_100_010, 2, "waiting on stream 2")),
        (5_049_999, (5_100_000, 5_100_010, None, "waiting on an event")),  # 1 ns earlier
    ],
)
def test_a_short_wait_long_after_the_record_stays_as_timed(
    record_end: int, expected: tuple
) -> None:
    a = _ascend(
        [
            (0, 6_000_000, "range", "Step#0", None, None),
            (0, 100_000, "kernel", "MatMul", 1, "aic"),
            (record_end - 10, 10, "sync", "EVENT_RECORD", 2, None),
            (5_100_000, 10, "sync", "EVENT_WAIT", 1, None),
            (5_100_010, 20_000, "kernel", "Add", 1, "aiv"),
        ]
    )
    waits = stream_waits(a.rows, a.work)
    assert waits.select("stream", "start", "end", "target", "cause").rows() == [(1, *expected)]
    # the device idles through the whole wait: stream_wait_ns is its length
    assert a.step_metrics["stream_wait_ns"].to_list() == [expected[1] - expected[0]]


@pytest.mark.parametrize(
    "wait_args", [{"wait_on_stream": 8, "event_id": 3}, {"event": 3}], ids=["kineto", "nsys"]
)
def test_an_issued_wait_ends_when_its_stream_released_it(wait_args: dict) -> None:
    # stream 7 waits at 100 µs for stream 8's collective, done at 120 µs; the host launches
    # 7's next kernel only at 2.99 ms: the wait is 100-122 µs (the release + SLACK_NS), the
    # rest of the gap is the late launch
    rows = [
        (0, 4_000_000, "range", "ProfilerStep#0", -1, None, None, None),
        (0, 100_000, "kernel", "gemm", 0, 7, None, None),
        (0, 120_000, "comm", "ncclDevKernel_AllReduce_Sum_f32_RING_LL", 0, 8, None, None),
        (100_000, 1_000, "sync", "Stream Wait Event", 0, 7, None, json.dumps(wait_args)),
        (2_990_000, 5_000, "api", "cudaLaunchKernel", -1, None, 1, None),
        (3_000_000, 10_000, "kernel", "next", 0, 7, 1, None),
    ]
    cols = ("ts", "dur", "kind", "name", "device", "stream", "corr", "args")
    types = (pl.Int64, pl.Int64, pl.String, pl.String, pl.Int32, pl.Int64, pl.Int64, pl.String)
    df = pl.DataFrame(rows, schema=dict(zip(cols, types)), orient="row")
    df = df.with_columns(rank=pl.lit(0, pl.Int32))
    a = tracekit.analyze(Timeline(build_table({c: df[c] for c in df.columns}), {"format": "t"}))
    waits = stream_waits(a.rows, a.work)
    assert waits.select("stream", "start", "end", "target", "cause").rows() == [
        (7, 100_000, 122_000, 8, "waiting on stream 8")
    ]
    assert a.step_metrics["stream_wait_ns"].to_list() == [2_000]  # idle 120-122 µs
    [bubble] = [f for f in a.findings if f.rule == "bubbles"]
    assert bubble.pattern.startswith("host-bound: launch: ncclDevKernel")
    assert bubble.impact_ns == 2_880_000
