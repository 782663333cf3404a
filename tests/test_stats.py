"""`stats.info` / `stats.summary` on small hand-built timelines: exact busy times."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tracekit import stats
from tracekit.errors import TraceError
from tracekit.export import save
from tracekit.intervals import merge
from tracekit.load import load
from tracekit.timeline import Timeline, build_table


def _timeline(rows: list[dict[str, Any]], **meta: Any) -> Timeline:
    columns = {
        c: [r.get(c) for r in rows]
        for c in ("ts", "dur", "kind", "name", "device", "stream", "pid")
    }
    return Timeline(build_table(columns), {"format": "test", **meta})


def _k(
    ts: int,
    dur: int,
    device: int | None = 0,
    stream: int = 7,
    pid: int | None = 1,
    kind: str = "kernel",
    name: str = "k",
) -> dict[str, Any]:
    return {
        "ts": ts,
        "dur": dur,
        "kind": kind,
        "name": name,
        "device": device,
        "stream": stream,
        "pid": pid,
    }


def test_busy_per_kind_is_merged_per_device_then_summed() -> None:
    # Two GPUs busy over the same 150 ns: 300 ns of kernel time, not 150.
    rows = [_k(0, 100, 0), _k(50, 100, 0), _k(0, 100, 1), _k(50, 100, 1), _k(200, 10, 1)]
    rows.append(_k(120, 40, 0, kind="memcpy"))
    data = stats.summary(_timeline(rows))
    kinds = {k["kind"]: k for k in data["kinds"]}
    assert kinds["kernel"] == {"kind": "kernel", "count": 5, "total_ns": 410, "busy_ns": 310}
    assert kinds["memcpy"] == {"kind": "memcpy", "count": 1, "total_ns": 40, "busy_ns": 40}
    assert [(d["device"], d["busy_ns"], d["span_ns"]) for d in data["devices"]] == [
        (0, 160, 160),
        (1, 160, 210),
    ]


def test_streams_are_keyed_by_device_process_and_stream() -> None:
    # Stream 7 of process 1 and stream 7 of process 2 are different streams.
    rows = [_k(0, 100, pid=1), _k(50, 100, pid=2), _k(60, 100, pid=2), _k(0, 30, pid=None)]
    rows.append(_k(40, 30, pid=None))
    data = stats.summary(_timeline(rows))
    got = [(s["device"], s["pid"], s["stream"], s["count"], s["busy_ns"]) for s in data["streams"]]
    assert got == [(0, 1, 7, 1, 100), (0, 2, 7, 2, 110), (0, None, 7, 2, 60)]
    assert stats.info(_timeline(rows))["streams_per_device"] == {"0": [7]}


def test_rows_without_device_sort_last() -> None:
    rows = [_k(0, 10, None), _k(5, 10, 1), _k(0, 40, 0), _k(100, 5, None, stream=3)]
    data = stats.summary(_timeline(rows))
    assert [(d["device"], d["busy_ns"]) for d in data["devices"]] == [(0, 40), (1, 10), (None, 15)]
    assert [(s["device"], s["stream"]) for s in data["streams"]] == [
        (0, 7),
        (1, 7),
        (None, 3),
        (None, 7),
    ]
    assert data["kinds"][0]["busy_ns"] == 65
    info = stats.info(_timeline(rows, devices=[{"index": 0, "name": "A"}]))
    assert [d["index"] for d in info["devices"]] == [0, 1, None]
    assert list(info["streams_per_device"]) == ["0", "1", "None"]


def test_timestamps_near_2_63_raise_a_trace_error() -> None:
    rows = [_k(0, 10), _k(9_000_000_000_000_000_000, 1_000)]
    with pytest.raises(TraceError, match="too far apart for int64"):
        stats.summary(_timeline(rows))
    wrapped = _timeline([_k(2**63 - 10, 100)]).df  # ts + dur wraps past int64
    with pytest.raises(OverflowError, match="ends before it starts"):
        merge(wrapped)


def test_load_names_the_source_when_the_parser_left_it_empty(tmp_path: Path) -> None:
    path = save(_timeline([_k(0, 10)]), tmp_path / "saved.parquet")
    assert load(path).meta["source"] == "saved.parquet"
    named = save(_timeline([_k(0, 10)], source="original.sqlite"), tmp_path / "named.arrow")
    assert load(named).meta["source"] == "original.sqlite"
