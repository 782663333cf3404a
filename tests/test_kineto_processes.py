"""Large traces are decoded by several processes: same timeline as one process, or fallback."""

from __future__ import annotations

import gzip
import itertools
import json
import tempfile
from pathlib import Path

import polars as pl
import pytest

import tracekit
from tests.conftest import real_root
from tracekit.parsers import io, slices, workers
from tracekit.parsers.kineto import events as kineto_events
from tracekit.parsers.kineto import read, stream, worker


def _frame(tl: tracekit.Timeline) -> pl.DataFrame:
    df = tl.df.with_columns(pl.col(pl.Categorical).cast(pl.String))
    return df.sort(df.columns, nulls_last=True)


def _trace() -> Path:
    root = real_root()
    if root is None:
        pytest.skip("TRACEKIT_REAL_TRACES not set")
    return root / "nvidia" / "hta-nccl-parser-a100-2rank" / "nccl_data.json.gz"


def _assigned(monkeypatch: pytest.MonkeyPatch) -> list[dict]:
    """The slices handed to workers from now on (the workers still run)."""
    started: list[dict] = []
    original = workers.Worker.finish

    def spy(self: workers.Worker, request: dict) -> None:
        started.append(request)
        original(self, request)

    monkeypatch.setattr(workers.Worker, "finish", spy)
    return started


@pytest.mark.parametrize("plain", [False, True], ids=["gzip", "plain"])
def test_three_processes_give_the_one_process_timeline(
    plain: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _trace()
    if plain:  # the workers map the file instead of inflating it
        path = tmp_path / "nccl_data.json"
        path.write_bytes(gzip.decompress(_trace().read_bytes()))
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))  # where the workers' tables go
    monkeypatch.setenv("TRACEKIT_PROCESSES", "1")
    serial = tracekit.load(path)
    monkeypatch.delenv("TRACEKIT_PROCESSES")
    monkeypatch.setattr(read, "MIN_BYTES", 1 << 20)
    monkeypatch.setattr(workers.os, "sched_getaffinity", lambda _pid: {0, 1, 2}, raising=False)
    started = _assigned(monkeypatch)
    parallel = tracekit.load(path)
    assert len(started) == 2
    assert _frame(parallel).equals(_frame(serial))
    assert parallel.meta == serial.meta
    assert not list(scratch.iterdir())  # the workers' table files are removed


def test_a_worker_keeps_only_the_text_of_its_slice(monkeypatch: pytest.MonkeyPatch) -> None:
    path = _trace()
    text = gzip.decompress(path.read_bytes())
    monkeypatch.setattr(worker, "CHUNK", 64 << 10)
    for start, stop in [(1000, 5000), (200_000, 900_000), (len(text) - 70_000, len(text) - 3)]:
        kept, piece = slices.file_slice(path, slices.Slice(start, stop), worker.CHUNK)
        assert kept[piece.start : piece.stop] == text[start:stop]
        assert len(kept) < (stop - start) + 2 * (64 << 10)


def test_failed_worker_falls_back_to_one_process(monkeypatch: pytest.MonkeyPatch) -> None:
    path = _trace()
    monkeypatch.setenv("TRACEKIT_PROCESSES", "1")
    serial = tracekit.load(path)
    monkeypatch.delenv("TRACEKIT_PROCESSES")
    monkeypatch.setattr(read, "MIN_BYTES", 1 << 20)
    monkeypatch.setattr(workers.os, "sched_getaffinity", lambda _pid: {0, 1}, raising=False)
    monkeypatch.setattr(workers.Worker, "result", lambda self: None)
    assert _frame(tracekit.load(path)).equals(_frame(serial))


def test_plan_splits_only_between_whole_events() -> None:
    events = [{"ph": "X", "name": f"k{i}", "args": {"grid": [1, 1, 1]}} for i in range(50)]
    data = json.dumps({"schemaVersion": 1, "traceEvents": events, "traceName": "a]b"}).encode()
    planned, header = slices.plan(data, 3)
    assert json.loads(header) == {"schemaVersion": 1, "traceEvents": [], "traceName": "a]b"}
    decoded = [e for s in planned for e in json.loads(slices.slice_text(data, s))]
    assert decoded == events
    assert len(planned) == 3


def test_plan_declines_unexpected_layouts() -> None:
    assert slices.plan(b'[{"ph": "X"}, {"ph": "X"}]', 2) is None  # bare list: no key
    assert slices.plan(b'{"traceEvents": [{"ph": "X"}]}', 2) is None  # one event: no split


def test_pieces_of_a_few_kilobytes_give_the_one_piece_timeline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "nccl_data.json"
    path.write_bytes(gzip.decompress(_trace().read_bytes()))
    monkeypatch.setattr(stream, "read", lambda _path, _options: None)  # read whole, then cut
    monkeypatch.setattr(kineto_events, "PIECE_BYTES", 1 << 40)
    whole = tracekit.load(path)  # under 2 * PIECE_BYTES of JSON: decoded in one piece
    cuts = []
    original = slices.subdivide

    def spy(data, piece, size):
        cuts.append(original(data, piece, size))
        return cuts[-1]

    monkeypatch.setattr(kineto_events, "PIECE_BYTES", 64 << 10)
    monkeypatch.setattr(kineto_events, "subdivide", spy)
    pieces = tracekit.load(path)
    assert len(cuts) == 1 and len(cuts[0]) > 20
    assert _frame(pieces).equals(_frame(whole))
    assert pieces.meta == whole.meta


def _kernels(n: int, name: str, **extra: object) -> list[dict]:
    return [
        {
            "ph": "X",
            "cat": "kernel",
            "name": name,
            "pid": 0,
            "tid": 7,
            "ts": i * 10,
            "dur": 5,
            "args": {"device": 0, "stream": 7, "correlation": i},
            **extra,
        }
        for i in range(n)
    ]


def test_a_cut_inside_a_name_decodes_the_slice_in_one_go(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    events = _kernels(3000, 'odd"}, {"name')  # every event's name reads as an event boundary
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    monkeypatch.setattr(kineto_events, "PIECE_BYTES", 16 << 10)
    tl = tracekit.load(path)
    assert len(tl) == 3000 and tl.meta["warnings"] == []
    assert set(tl.df["name"].cast(pl.String)) == {'odd"}, {"name'}


def test_repairs_and_warnings_of_all_pieces_are_summed_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    events = _kernels(3000, "gemm\udcff")  # invalid UTF-8 once encoded with surrogateescape
    for event in events[::3]:
        del event["dur"]
    events[10]["cat"] = "mystery"
    events[2900]["cat"] = "mystery"
    text = json.dumps({"schemaVersion": 1, "traceEvents": events}, ensure_ascii=False)
    path = tmp_path / "t.json"
    path.write_bytes(text.encode("utf-8", "surrogateescape"))
    whole = tracekit.load(path)
    monkeypatch.setattr(kineto_events, "PIECE_BYTES", 16 << 10)
    whole_file = slices.Slice(0, path.stat().st_size)
    assert len(slices.subdivide(path.read_bytes(), whole_file, 16 << 10)) > 10
    tl = tracekit.load(path)
    assert tl.meta["warnings"] == [
        "invalid UTF-8 in the trace replaced by U+FFFD",
        "unknown categories read as host ranges: mystery (2)",
        "1000 kernel events without dur; read as 0 ns",
    ]
    assert tl.meta == whole.meta
    assert _frame(tl).equals(_frame(whole))


def test_plan_finds_the_events_end_before_later_arrays() -> None:
    events = [{"ph": "X", "name": f"k{i}", "args": {"grid": [1, 1, 1]}} for i in range(50)]
    trailer = {"deviceProperties": [{"id": 0}, {"id": 1}], "logs": ["a ]", "b"]}
    data = json.dumps({"traceEvents": events, **trailer}).encode()
    planned, header = slices.plan(data, 3)
    assert json.loads(header) == {"traceEvents": [], **trailer}
    assert [e for s in planned for e in json.loads(slices.slice_text(data, s))] == events


def _serial_then_three(
    path: Path, monkeypatch: pytest.MonkeyPatch, scratch: Path
) -> tracekit.Timeline:
    """The one-process timeline of ``path``; later loads use three processes."""
    with monkeypatch.context() as one:
        one.setenv("TRACEKIT_PROCESSES", "1")
        serial = tracekit.load(path)
    monkeypatch.delenv("TRACEKIT_PROCESSES", raising=False)
    monkeypatch.setattr(read, "MIN_BYTES", 1 << 20)
    monkeypatch.setattr(workers.os, "sched_getaffinity", lambda _pid: {0, 1, 2}, raising=False)
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    return serial


def _synthetic(path: Path, members: int) -> Path:
    events = [
        {
            "ph": "X",
            "cat": "kernel",
            "name": f"gemm_{i % 9}",
            "pid": 0,
            "tid": 7,
            "ts": 1_000 + i * 10,
            "dur": 4,
            "args": {"device": 0, "stream": 7, "correlation": i, "grid": [i % 5, 1, 1]},
        }
        for i in range(30_000)
    ]
    text = json.dumps({"schemaVersion": 1, "traceEvents": events}, indent=1).encode()
    cuts = [len(text) * k // members for k in range(members + 1)]
    path.write_bytes(b"".join(gzip.compress(text[a:b]) for a, b in itertools.pairwise(cuts)))
    return path


def test_workers_read_a_gzip_file_of_several_members(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _synthetic(tmp_path / "t.json.gz", members=5)
    serial = _serial_then_three(path, monkeypatch, tmp_path)
    started = _assigned(monkeypatch)
    parallel = tracekit.load(path)
    assert len(started) >= 1 and len(parallel) == 30_000
    assert _frame(parallel).equals(_frame(serial))
    assert not list(tmp_path.glob("tracekit-*"))


def test_a_worker_that_fails_leaves_the_trace_to_this_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _synthetic(tmp_path / "t.json.gz", members=1)
    serial = _serial_then_three(path, monkeypatch, tmp_path)

    def broken(self, request):  # the worker reads a message it cannot use and exits 1
        self.folder = tmp_path / "tracekit-worker-broken"
        self.folder.mkdir()
        self.process.stdin.write(b"not a message\n")
        self.process.stdin.close()

    monkeypatch.setattr(workers.Worker, "finish", broken)
    assert _frame(tracekit.load(path)).equals(_frame(serial))
    assert not list(tmp_path.glob("tracekit-*"))


def test_events_end_when_the_last_event_holds_a_list_of_objects() -> None:
    events = [{"ph": "X", "name": f"k{i}"} for i in range(10)]
    events.append({"ph": "X", "name": "last", "args": {"inputs": [{"a": 1}, {"b": 2}, {"c": 3}]}})
    data = json.dumps({"traceEvents": events, "deviceProperties": [{"id": 0}, {"id": 1}]}).encode()
    end = slices.array_end(data, slices.events_start(data))
    assert json.loads(data[slices.events_start(data) - 1 : end + 1]) == events


def test_a_file_that_cannot_be_mapped_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "t.json"
    path.write_bytes(gzip.decompress(_synthetic(tmp_path / "t.json.gz", members=1).read_bytes()))
    monkeypatch.setattr(stream, "read", lambda _path, _options: None)  # read whole
    mapped = tracekit.load(path)
    piece = slices.Slice(1000, 90_000)
    text, where = slices.file_slice(path, piece, worker.CHUNK)
    assert text[where.start : where.stop] == path.read_bytes()[1000:90_000]
    monkeypatch.setattr(io.mmap, "mmap", _no_mapping)
    text, where = slices.file_slice(path, piece, worker.CHUNK)
    assert (
        isinstance(text, bytes) and text[where.start : where.stop] == path.read_bytes()[1000:90_000]
    )
    assert _frame(tracekit.load(path)).equals(_frame(mapped))


def _no_mapping(*args: object, **kwargs: object) -> None:
    raise OSError("this file system cannot map files")
