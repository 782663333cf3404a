"""Large Ascend timeline JSON is read by several processes: the one-process timeline, or a
fallback to it when a worker fails."""

from __future__ import annotations

import gzip
import json
import shutil
import tempfile
from pathlib import Path

import polars as pl
import pytest

import tracekit
from fixtures.ascend_scenario import build_ascend_scenario
from fixtures.ascend_text_writer import write_torch_npu
from tracekit.parsers import io, slices, workers
from tracekit.parsers.msprof import device, rows, trace_parallel


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
    monkeypatch.setattr(trace_parallel, "MIN_BYTES", 16 << 10)
    monkeypatch.setattr(trace_parallel, "HEAD_EXTRA", 0)
    affinity = set(range(cpus))
    monkeypatch.setattr(workers.os, "sched_getaffinity", lambda _pid: affinity, raising=False)


def test_three_processes_give_the_one_process_timeline(
    output: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    serial = _one_process_load(output, monkeypatch)
    _split_small_files(monkeypatch, 3)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where workers write their parts
    started = []
    original = workers.Worker.finish

    def spy(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        started.append(args)
        original(self, *args, **kwargs)

    monkeypatch.setattr(workers.Worker, "finish", spy)
    split = tracekit.load(output)
    assert len(started) == 2
    assert _frame(split).equals(_frame(serial))
    assert split.meta == serial.meta
    assert list(tmp_path.iterdir()) == []  # the workers' answer folders are removed


def test_failed_worker_falls_back_to_one_process(
    output: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    serial = _one_process_load(output, monkeypatch)
    _split_small_files(monkeypatch, 2)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    parts = []
    monkeypatch.setattr(workers.Worker, "result", lambda self: parts.append(self))  # -> None
    assert _frame(tracekit.load(output)).equals(_frame(serial))
    assert len(parts) == 1  # the worker ran and its (failed) slice was asked for
    assert list(tmp_path.iterdir()) == []


def test_own_slice_is_read_again_when_the_file_context_differs(
    output: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    serial = _one_process_load(output, monkeypatch)
    _split_small_files(monkeypatch, 2)
    calls = []
    original = trace_parallel.layers_of

    def spy(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(args[1])
        return original(*args, **kwargs)

    monkeypatch.setattr(trace_parallel, "layers_of", spy)
    monkeypatch.setattr(trace_parallel, "_agrees", lambda *_: False)
    split = tracekit.load(output)
    assert len(calls) == 2  # with its own slice's context, then with the file's
    assert _frame(split).equals(_frame(serial))


def test_contexts_agree_only_on_the_pids_of_the_slice() -> None:
    mine = ({1: "hw", 2: "cann"}, {(1, 7): "Stream 7", (2, 3): "Thread 3"})
    assert trace_parallel._agrees([1, 2], mine, ({**mine[0], 9: "hccl"}, {**mine[1], (9, 1): "x"}))
    assert not trace_parallel._agrees([1, 2], mine, ({1: "hw"}, mine[1]))  # pid 2 has no role
    assert not trace_parallel._agrees([1], mine, (mine[0], {**mine[1], (1, 8): "Stream 8"}))
    assert trace_parallel._agrees([2], mine, (mine[0], {**mine[1], (1, 8): "Stream 8"}))


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


def test_a_gzip_timeline_is_split_with_its_slices_sent_to_the_workers(
    output: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    folder = tmp_path / output.name
    shutil.copytree(output, folder)
    trace = folder / "ASCEND_PROFILER_OUTPUT" / "trace_view.json"
    trace.with_name("trace_view.json.gz").write_bytes(gzip.compress(trace.read_bytes()))
    trace.unlink()
    serial = _one_process_load(folder, monkeypatch)
    _split_small_files(monkeypatch, 3)
    sent = []
    original = workers.Worker.send

    def spy(self, value, raw=None):  # type: ignore[no-untyped-def]
        sent.append(raw is not None)
        original(self, value, raw)

    monkeypatch.setattr(workers.Worker, "send", spy)
    split = tracekit.load(folder)
    assert sent == [True, True, False, False]  # the slices' bytes, then the file's context
    assert _frame(split).equals(_frame(serial))
    assert split.meta == serial.meta


def test_a_file_that_cannot_be_mapped_gives_the_same_slices(
    output: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = output / "ASCEND_PROFILER_OUTPUT" / "trace_view.json"
    data = path.read_bytes()
    cut = slices.plan(data, 3, bare=True)
    assert cut is not None
    first, second = cut[0][:2]
    with slices.mapped_slice(path, first, first=True) as view:
        mapped = [bytes(view)]
    with slices.mapped_slice(path, second, first=False) as view:
        mapped.append(bytes(view))
    monkeypatch.setattr(io.mmap, "mmap", _no_mapping)
    with slices.mapped_slice(path, first, first=True) as view:
        assert bytes(view) == mapped[0]
    with slices.mapped_slice(path, second, first=False) as view:
        assert bytes(view) == mapped[1]
    assert json.loads(mapped[1])[0] == json.loads(slices.slice_text(data, second))[0]
    whole = tracekit.load(output)
    assert _frame(whole).equals(_frame(_one_process_load(output, monkeypatch)))


def _no_mapping(*args: object, **kwargs: object) -> None:
    raise OSError("this file system cannot map files")
