"""Correlation ids scoped to their process, on a real capture of two processes.

``tests/data/real/nsys_torchrun_2proc/mfu_2gpu_before.sqlite`` is an Nsight Systems export of
``torchrun --nproc_per_node=2`` (FastVideo training, one GPU per process, a 0.3 s window; see
the MANIFEST there). Both processes number their CUDA correlation ids from the same start, so
hundreds of ids repeat across them. Ground truth comes from plain SQL on the file: rows per
process, their durations, each device row's launch call in its *own* process; tracekit must
give one rank per process and place every device row by that launch.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import polars as pl
import pytest

import tracekit
from tests.conftest import sha256, sql_rows
from tracekit.analysis.result import Analysis
from tracekit.steps import Steps, assign
from tracekit.steps.model import numbered
from tracekit.steps.placement import placement_counts
from tracekit.taxonomy import classified, load_patterns
from tracekit.timeline import Timeline

DATA = Path(__file__).parent / "data" / "real" / "nsys_torchrun_2proc"
TRACE = DATA / "mfu_2gpu_before.sqlite"
DIGEST = "29aef69b67ad46dadbff593f75874e76cf5a14ca8d0ba4d9fc9205692c1e3cb4"
PID = "((globalPid >> 24) & 16777215)"  # nsys: globalPid holds the pid in bits 24..47
TID_PID = "((globalTid >> 24) & 16777215)"
# tracekit kind -> (table, the column holding the process)
TABLES = {
    "kernel": ("CUPTI_ACTIVITY_KIND_KERNEL", PID),
    "memcpy": ("CUPTI_ACTIVITY_KIND_MEMCPY", PID),
    "memset": ("CUPTI_ACTIVITY_KIND_MEMSET", PID),
    "sync": ("CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", PID),
    "api": ("CUPTI_ACTIVITY_KIND_RUNTIME", TID_PID),
    "range": ("NVTX_EVENTS", TID_PID),
}
DEVICE_KINDS = ("kernel", "memcpy", "memset")


def frame(query: str, columns: list[str]) -> pl.DataFrame:
    """Rows of ``query`` on the trace (opened read-only) as a frame."""
    return pl.DataFrame(sql_rows(TRACE, query), schema=columns, orient="row")


def device_rows() -> pl.DataFrame:
    """``kind, ts, pid, device, corr`` of every kernel, copy and fill in the file."""
    parts = [
        frame(
            f"SELECT '{kind}', start, {PID}, deviceId, correlationId FROM {TABLES[kind][0]}",
            ["kind", "ts", "pid", "device", "corr"],
        )
        for kind in DEVICE_KINDS
    ]
    return pl.concat(parts)


def launches() -> pl.DataFrame:
    """``pid, corr, launch``: every CUDA runtime call with its process and start."""
    return frame(
        f"SELECT {TID_PID}, correlationId, start FROM CUPTI_ACTIVITY_KIND_RUNTIME",
        ["pid", "corr", "launch"],
    )


@pytest.fixture(scope="module")
def loaded() -> tuple[Timeline, Analysis]:
    """The trace loaded and analysed once for the module."""
    before = sha256(TRACE)
    timeline = tracekit.load(TRACE)
    analysis = tracekit.analyze(timeline)
    assert sha256(TRACE) == before == DIGEST  # the file of the MANIFEST, never written
    return timeline, analysis


def rank_of_pid(timeline: Timeline) -> dict[int, int]:
    """pid -> rank, as tracekit recorded it."""
    return {p["pid"]: p["rank"] for p in timeline.meta["processes"]}


def test_one_rank_per_device_process(loaded: tuple[Timeline, Analysis]) -> None:
    """Two processes launch kernels (pids 144 and 145 on devices 0 and 1), the file names no
    rank: each process is one rank, numbered by its device."""
    timeline, _ = loaded
    raw = sql_rows(
        TRACE,
        f"SELECT {PID} AS pid, min(deviceId) AS device FROM CUPTI_ACTIVITY_KIND_KERNEL"
        " GROUP BY pid ORDER BY device, pid",
    )
    assert raw == [(144, 0), (145, 1)]
    assert timeline.meta["rank_source"] == "process"
    assert timeline.meta["ranks"] == [0, 1]
    expected = [{"rank": r, "pid": p, "device": d} for r, (p, d) in enumerate(raw)]
    assert timeline.meta["processes"] == expected


def test_rows_per_rank_are_the_rows_per_process(loaded: tuple[Timeline, Analysis]) -> None:
    """Each rank holds exactly its process's rows of every kind (kernels 1993 / 2017,
    runtime calls 3688 / 3778, NVTX ranges 9443 / 9675, ...), and the kernels' summed
    durations per rank are the process's (270,875,926 / 264,324,724 ns)."""
    timeline, _ = loaded
    ranks = rank_of_pid(timeline)
    table = pl.from_arrow(timeline.stored.select(["kind", "rank", "pid", "dur"]))
    assert isinstance(table, pl.DataFrame)
    table = table.with_columns(pl.col("kind").cast(pl.String))
    got = table.group_by("kind", "rank").agg(n=pl.len(), busy=pl.col("dur").sum())
    expected = {}
    for kind, (name, pid) in TABLES.items():
        rows = sql_rows(TRACE, f'SELECT {pid}, count(*), sum("end" - start) FROM {name} GROUP BY 1')
        for p, n, busy in rows:
            expected[(kind, ranks[p])] = (n, busy)
    assert len(expected) == 12  # six kinds, both processes
    assert {(k, r): (n, b) for k, r, n, b in got.iter_rows()} == expected
    assert expected[("kernel", 0)] == (1993, 270_875_926)
    assert expected[("kernel", 1)] == (2017, 264_324_724)
    # every row belongs to its own process's rank: none host-only, none crossed over
    crossed = table.filter(pl.col("rank") != pl.col("pid").replace_strict(ranks, default=-9))
    assert crossed.height == 0


def test_correlation_ids_repeat_across_the_processes() -> None:
    """The file is a real test of the scoping: ids repeat across processes."""
    kernels = sql_rows(
        TRACE,
        "SELECT count(*) FROM (SELECT correlationId FROM CUPTI_ACTIVITY_KIND_KERNEL"
        f" GROUP BY correlationId HAVING count(DISTINCT {PID}) > 1)",
    )
    calls = sql_rows(
        TRACE,
        "SELECT count(*) FROM (SELECT correlationId FROM CUPTI_ACTIVITY_KIND_RUNTIME"
        f" GROUP BY correlationId HAVING count(DISTINCT {TID_PID}) > 1)",
    )
    assert (kernels, calls) == ([(78,)], [(264,)])
    rows, launch_calls = device_rows(), launches()
    other = rows.join(launch_calls.rename({"pid": "launcher"}), on="corr").filter(
        pl.col("launcher") != pl.col("pid")
    )
    assert other.unique(["kind", "ts", "pid"]).height == 379  # 294 kernels, 65 copies, 20 fills


def test_device_rows_are_placed_by_their_own_process_launch(
    loaded: tuple[Timeline, Analysis],
) -> None:
    """Every device row that has a launch call in its own process (5268 of 5299) is placed by
    it, in the step of its rank whose host range holds that call; the 31 rows whose call fell
    before the window (one of them shares its id with a call of the other process) are not
    placed by a launch at all. A join that ignored the process would have linked 200 rows to
    the other process's call and put 230 rows in another step."""
    timeline, _ = loaded
    # Steps of FSDP blocks, from one block's FSDP::pre_forward range to the next on each rank
    # (host ranges: rows are placed through their launch), so that many steps are at stake
    # whatever the analysis itself chooses for this forward-pass window (one whole window).
    rows_tk, _ = classified(timeline.df, "nvidia", load_patterns(None))
    blocks = rows_tk.filter(pl.col("name").cast(pl.String).str.starts_with("FSDP::pre_forward"))
    first = rows_tk.group_by("rank").agg(first=pl.col("ts").min())  # the first block from it
    block_ranges = numbered(
        blocks.select("rank", label=pl.col("name").cast(pl.String), start=pl.col("ts"))
        .sort("rank", "start")
        .join(first, on="rank")
        .with_columns(
            start=pl.when(pl.int_range(pl.len()).over("rank") == 0)
            .then(pl.col("first"))
            .otherwise(pl.col("start")),
            end=pl.col("start").shift(-1).over("rank").fill_null(2**62),
        )
        .drop("first")
    )
    steps = Steps("marker", "high", "FSDP blocks", block_ranges)
    analysis = SimpleNamespace(work=assign(rows_tk, steps), steps=steps)
    ranks = rank_of_pid(timeline)
    rows = device_rows().with_columns(
        rank=pl.col("pid").replace_strict(ranks, return_dtype=pl.Int32)
    )
    calls = launches()
    own = rows.join(calls, on=["pid", "corr"], how="left")  # (pid, corr) is unique in the file
    assert own.height == rows.height == 5299
    work = analysis.work.select(
        pl.col("kind").cast(pl.String), "ts", "rank", "corr", "device", "step", "placed"
    )
    placed = own.join(work, on=["kind", "ts", "rank", "corr"], how="left", suffix="_tk")
    assert placed.height == work.height == 5299
    assert placed["placed"].null_count() == 0  # every raw row is one tracekit row, and back
    assert (placed["device"] == placed["device_tk"]).all()

    ranges = analysis.steps.ranges.select("rank", _step="step", _start="start", _end="end").sort(
        "_start"
    )
    assert sorted(ranges["rank"].unique().to_list()) == [0, 1]

    def step_of(frame: pl.DataFrame, at: str) -> pl.Series:
        """Per row, the step of its rank whose range holds time ``at`` (null: none)."""
        probe = frame.select("rank", at).with_row_index("_i")
        probe = probe.filter(pl.col(at).is_not_null()).sort(at)
        hit = probe.join_asof(
            ranges, left_on=at, right_on="_start", by="rank", check_sortedness=False
        )
        hit = hit.select("_i", step=pl.when(pl.col(at) < pl.col("_end")).then(pl.col("_step")))
        every = pl.DataFrame({"_i": pl.arange(0, frame.height, eager=True).cast(pl.UInt32)})
        return every.join(hit, on="_i", how="left", maintain_order="left")["step"]

    linked = placed.filter(pl.col("launch").is_not_null())
    assert linked.height == 5268
    assert (linked["placed"].cast(pl.String) == "launch").all()
    expected = step_of(linked, "launch")
    assert expected.null_count() == 0
    assert (linked["step"] == expected).all()
    assert placement_counts(analysis.work)["launch"] == 5268

    unlinked = placed.filter(pl.col("launch").is_null())
    assert unlinked.height == 31
    assert not (unlinked["placed"].cast(pl.String) == "launch").any()
    shared = unlinked.join(calls.rename({"pid": "launcher"}), on="corr")
    assert shared.height == 1  # a process-blind join would have linked it to the other's call

    # the same rows joined on the id alone (first call of each id): what scoping prevents
    blind = rows.join(
        calls.sort("launch").unique("corr", keep="first").rename({"pid": "launcher"}),
        on="corr",
        how="left",
    )
    wrong = blind.filter(pl.col("launcher").is_not_null() & (pl.col("launcher") != pl.col("pid")))
    assert wrong.height == 200
    moved = placed.select("kind", "ts", "rank", "corr", "step").join(
        blind.with_columns(blind_step=step_of(blind, "launch")).select(
            "kind", "ts", "rank", "corr", "blind_step"
        ),
        on=["kind", "ts", "rank", "corr"],
    )
    assert (
        moved.filter(pl.col("step").fill_null(-1) != pl.col("blind_step").fill_null(-1)).height
        == 230
    )


def test_steps_and_workload_per_process(loaded: tuple[Timeline, Analysis]) -> None:
    """Both processes get steps of their own, and the workload is the training the capture
    ran (``torchrun ... /tmp/fv_mfu_training.py``, FSDP ranges in NVTX)."""
    _, analysis = loaded
    command = sql_rows(
        TRACE, "SELECT value FROM META_DATA_CAPTURE WHERE name = 'PROCESS_0:ARGUMENT_3'"
    )
    assert command == [("/tmp/fv_mfu_training.py",)]
    per_rank = analysis.steps.ranges.group_by("rank").len().sort("rank")
    assert per_rank["rank"].to_list() == [0, 1]
    # the window holds FSDP forward blocks, no backward and no optimizer step: the blocks
    # repeat with a period, but none is an iteration (they were 18 "decode" steps once)
    assert per_rank["len"].to_list() == [1, 1]
    assert (analysis.workload.kind, analysis.workload.unit) == ("training", "whole window")
    assert "decode" not in analysis.steps.ranges["phase"].to_list()
    # idle per device is the window minus the union of busy time, from the raw rows
    got = analysis.step_metrics.select("device", "dur", "busy_ns", "idle_ns").sort("device")
    for device, dur, busy, idle in got.iter_rows():
        spans = sql_rows(
            TRACE,
            "SELECT start, end FROM ("
            + " UNION ALL ".join(
                f"SELECT start, end, deviceId FROM {TABLES[k][0]}" for k in DEVICE_KINDS
            )
            + f") WHERE deviceId = {device} ORDER BY start",
        )
        union, reach = 0, None
        for start, end in spans:
            if reach is None or start > reach:
                union += end - start
                reach = end
            elif end > reach:
                union += end - reach
                reach = end
        window = max(end for _, end in spans) - spans[0][0]
        assert (dur, busy, idle) == (window, union, window - union)
