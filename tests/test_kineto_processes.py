"""Large traces are decoded by several processes: same timeline as one process, or fallback."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

import tracekit
from tests.conftest import real_root
from tracekit.parsers.kineto import chunks


def _frame(tl: tracekit.Timeline) -> pl.DataFrame:
    df = tl.df.with_columns(pl.col(pl.Categorical).cast(pl.String))
    return df.sort(df.columns, nulls_last=True)


def _trace() -> Path:
    root = real_root()
    if root is None:
        pytest.skip("TRACEKIT_REAL_TRACES not set")
    return root / "nvidia" / "hta-nccl-parser-a100-2rank" / "nccl_data.json.gz"


def test_three_processes_give_the_one_process_timeline(monkeypatch: pytest.MonkeyPatch) -> None:
    path = _trace()
    monkeypatch.setenv("TRACEKIT_PROCESSES", "1")
    serial = tracekit.load(path)
    monkeypatch.delenv("TRACEKIT_PROCESSES")
    monkeypatch.setattr(chunks, "MIN_BYTES", 1 << 20)
    monkeypatch.setattr(chunks.os, "sched_getaffinity", lambda _pid: {0, 1, 2}, raising=False)
    started = []
    original = chunks.Worker.feed

    def spy(self, data, piece, options):
        started.append(piece)
        original(self, data, piece, options)

    monkeypatch.setattr(chunks.Worker, "feed", spy)
    parallel = tracekit.load(path)
    assert len(started) == 2
    assert _frame(parallel).equals(_frame(serial))
    assert parallel.meta == serial.meta


def test_failed_worker_falls_back_to_one_process(monkeypatch: pytest.MonkeyPatch) -> None:
    path = _trace()
    monkeypatch.setenv("TRACEKIT_PROCESSES", "1")
    serial = tracekit.load(path)
    monkeypatch.delenv("TRACEKIT_PROCESSES")
    monkeypatch.setattr(chunks, "MIN_BYTES", 1 << 20)
    monkeypatch.setattr(chunks.os, "sched_getaffinity", lambda _pid: {0, 1}, raising=False)
    monkeypatch.setattr(chunks.Worker, "result", lambda self: None)
    assert _frame(tracekit.load(path)).equals(_frame(serial))


def test_plan_splits_only_between_whole_events() -> None:
    events = [{"ph": "X", "name": f"k{i}", "args": {"grid": [1, 1, 1]}} for i in range(50)]
    data = json.dumps({"schemaVersion": 1, "traceEvents": events, "traceName": "a]b"}).encode()
    slices, header = chunks.plan(data, 3)
    assert json.loads(header) == {"schemaVersion": 1, "traceEvents": [], "traceName": "a]b"}
    decoded = [e for s in slices for e in json.loads(chunks.slice_text(data, s))]
    assert decoded == events
    assert len(slices) == 3


def test_plan_declines_unexpected_layouts() -> None:
    assert chunks.plan(b'[{"ph": "X"}, {"ph": "X"}]', 2) is None  # bare list: no key
    assert chunks.plan(b'{"traceEvents": [{"ph": "X"}]}', 2) is None  # one event: no split
