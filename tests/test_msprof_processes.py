"""Large Ascend timeline JSON is read by several processes: the one-process timeline, or a
fallback to it when a worker fails."""

from __future__ import annotations

import tempfile
from pathlib import Path

import polars as pl
import pytest

import tracekit
from fixtures.ascend_scenario import build_ascend_scenario
from fixtures.ascend_text_writer import write_torch_npu
from tracekit.parsers.kineto import chunks
from tracekit.parsers.msprof import device, parallel, rows


def _frame(tl: tracekit.Timeline) -> pl.DataFrame:
    df = tl.df.with_columns(pl.col(pl.Categorical).cast(pl.String))
    return df.sort(df.columns, nulls_last=True)


@pytest.fixture(scope="module")
def output(tmp_path_factory: pytest.TempPathFactory) -> Path:
    sc = build_ascend_scenario(steps=3, layers=3, unfused_collective=True)
    return write_torch_npu(sc.events, tmp_path_factory.mktemp("npu"))


def _one_process_load(output: Path, monkeypatch: pytest.MonkeyPatch) -> tracekit.Timeline:
    """The timeline read in this process alone (``TRACEKIT_PROCESSES=1``)."""
    monkeypatch.setenv("TRACEKIT_PROCESSES", "1")
    serial = tracekit.load(output)
    monkeypatch.delenv("TRACEKIT_PROCESSES")
    return serial


def _split_small_files(monkeypatch: pytest.MonkeyPatch, cpus: int) -> None:
    monkeypatch.setattr(parallel, "MIN_BYTES", 16 << 10)
    monkeypatch.setattr(parallel, "HEAD_EXTRA", 0)
    monkeypatch.setattr(chunks.os, "sched_getaffinity", lambda _pid: set(range(cpus)),
                        raising=False)  # fmt: skip


def test_three_processes_give_the_one_process_timeline(
    output: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    serial = _one_process_load(output, monkeypatch)
    _split_small_files(monkeypatch, 3)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where workers write their parts
    started = []
    original = parallel._Worker.start

    def spy(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        started.append(args)
        original(self, *args, **kwargs)

    monkeypatch.setattr(parallel._Worker, "start", spy)
    split = tracekit.load(output)
    assert len(started) == 2
    assert _frame(split).equals(_frame(serial))
    assert split.meta == serial.meta
    assert list(tmp_path.iterdir()) == []  # the part files are removed


def test_failed_worker_falls_back_to_one_process(
    output: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    serial = _one_process_load(output, monkeypatch)
    _split_small_files(monkeypatch, 2)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    parts = []
    monkeypatch.setattr(parallel._Worker, "part", lambda self: parts.append(self))  # -> None
    assert _frame(tracekit.load(output)).equals(_frame(serial))
    assert len(parts) == 1  # the worker ran and its (failed) slice was asked for
    assert list(tmp_path.iterdir()) == []


def test_own_slice_is_read_again_when_the_file_context_differs(
    output: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    serial = _one_process_load(output, monkeypatch)
    _split_small_files(monkeypatch, 2)
    calls = []
    original = parallel.layers_of

    def spy(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(args[1])
        return original(*args, **kwargs)

    monkeypatch.setattr(parallel, "layers_of", spy)
    monkeypatch.setattr(parallel, "_agrees", lambda *_: False)
    split = tracekit.load(output)
    assert len(calls) == 2  # with its own slice's context, then with the file's
    assert _frame(split).equals(_frame(serial))


def test_contexts_agree_only_on_the_pids_of_the_slice() -> None:
    mine = ({1: "hw", 2: "cann"}, {(1, 7): "Stream 7", (2, 3): "Thread 3"})
    assert parallel._agrees([1, 2], mine, ({**mine[0], 9: "hccl"}, {**mine[1], (9, 1): "x"}))
    assert not parallel._agrees([1, 2], mine, ({1: "hw"}, mine[1]))  # pid 2 has no role
    assert not parallel._agrees([1], mine, (mine[0], {**mine[1], (1, 8): "Stream 8"}))
    assert parallel._agrees([2], mine, (mine[0], {**mine[1], (1, 8): "Stream 8"}))


def test_task_rows_built_in_halves_are_the_rows_built_at_once(
    output: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRACEKIT_PROCESSES", "1")
    monkeypatch.setattr(rows, "HALVES_FROM", 10**9)
    whole = tracekit.load(output)
    heights = []
    original = device.task_rows

    def spy(frame, *args):  # type: ignore[no-untyped-def]
        heights.append(frame.height)
        return original(frame, *args)

    monkeypatch.setattr(device, "task_rows", spy)
    monkeypatch.setattr(rows, "HALVES_FROM", 2)
    split = tracekit.load(output)
    assert len(heights) == 2 and abs(heights[0] - heights[1]) <= 1  # two halves
    assert _frame(split).equals(_frame(whole))
    assert split.meta == whole.meta
