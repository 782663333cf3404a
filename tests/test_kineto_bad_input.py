"""Kineto bad input: unusable files fail in one line (exit 2); usable oddities become warnings."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import msgspec
import polars as pl

import tracekit
from tests.conftest import run_cli, sha256

BASE = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H200"}]}


def _kernel(ts: object, dur: object, name: str = "gemm", corr: int = 1) -> dict:
    return {
        "ph": "X",
        "cat": "kernel",
        "name": name,
        "pid": 0,
        "tid": 7,
        "ts": ts,
        "dur": dur,
        "args": {"device": 0, "stream": 7, "correlation": corr},
    }


def _write(path: Path, events: list[dict], **top: object) -> Path:
    path.write_text(json.dumps({**BASE, **top, "traceEvents": events}))
    return path


def _one_line_error(path: Path, *needles: str, strict: bool = False) -> None:
    before = sha256(path)
    done = run_cli(*(["--strict"] if strict else []), "summary", str(path))
    assert done.returncode == 2, done.stdout
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    for needle in needles:
        assert needle in lines[0]
    assert sha256(path) == before


def test_truncated_gzip(tmp_path: Path) -> None:
    good = _write(tmp_path / "t.json", [_kernel(i * 10, 5, corr=i) for i in range(20000)])
    blob = gzip.compress(good.read_bytes())
    path = tmp_path / "t.json.gz"
    path.write_bytes(blob[: len(blob) // 2])
    _one_line_error(path, "gzip stream is truncated or corrupt", strict=True)
    kept = tracekit.load(path)  # not strict: the complete events before the cut
    assert 0 < len(kept) < 20000 and "cut short" in kept.meta["warnings"][-1]


def test_truncated_json(tmp_path: Path) -> None:
    path = _write(tmp_path / "t.json", [_kernel(i * 10, 5, corr=i) for i in range(100)])
    text = path.read_text()
    path.write_text(text[: len(text) // 2])
    _one_line_error(path, "not valid JSON", "truncated", strict=True)
    done = run_cli("summary", str(path))
    assert done.returncode == 0 and "cut short" in done.stderr + done.stdout


def test_json_that_is_not_a_trace(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model": "deepseek", "layers": 61}))
    _one_line_error(path, "not a recognised trace")


def test_trace_object_without_events(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"schemaVersion": 1, "deviceProperties": []}))
    _one_line_error(path, "without traceEvents")


def test_missing_and_negative_dur_are_kept_with_warnings(tmp_path: Path) -> None:
    events = [_kernel(0, 5), _kernel(10, None, corr=2), _kernel(20, -3, corr=3)]
    del events[1]["dur"]
    tl = tracekit.load(_write(tmp_path / "t.json", events))
    assert tl.df.sort("ts")["dur"].to_list() == [5000, 0, 0]
    assert tl.meta["warnings"] == [
        "1 kernel events without dur; read as 0 ns",
        "1 kernel events with negative dur; read as 0 ns",
    ]


def test_events_without_ts_are_dropped_with_a_warning(tmp_path: Path) -> None:
    events = [_kernel(0, 5), _kernel(None, 5, corr=2)]
    tl = tracekit.load(_write(tmp_path / "t.json", events))
    assert len(tl) == 1
    assert tl.meta["warnings"] == ["1 kernel events without a usable ts; dropped"]


def test_scientific_notation_and_numeric_strings(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    text = json.dumps({**BASE, "traceEvents": [_kernel(0, 1), _kernel("SCI", "2.5", corr=2)]})
    path.write_text(text.replace('"SCI"', "1.7000001e6"))
    tl = tracekit.load(path)
    row = tl.df.sort("ts").row(1, named=True)
    assert row["ts"] == 1_700_000_100 and row["dur"] == 2500
    assert tl.meta["origin_ns"] == 0


def test_invalid_utf8_in_names_is_replaced(tmp_path: Path) -> None:
    path = _write(tmp_path / "t.json", [_kernel(0, 5, name="NAME")])
    path.write_bytes(path.read_bytes().replace(b"NAME", b"gemm\xff\xfe"))
    tl = tracekit.load(path)
    assert tl.df["name"].cast(pl.String).to_list() == ["gemm\ufffd\ufffd"]
    assert tl.meta["warnings"] == ["invalid UTF-8 in the trace replaced by U+FFFD"]


def test_bare_event_list_and_unknown_categories(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    odd = {"ph": "X", "cat": "my_custom", "name": "x", "pid": 1, "tid": 1, "ts": 3, "dur": 1}
    path.write_text(json.dumps([_kernel(0, 5), odd]))
    tl = tracekit.load(path)
    assert dict(tl.df.group_by(pl.col("kind").cast(pl.String)).len().rows()) == {
        "kernel": 1,
        "range": 1,
    }
    assert tl.meta["warnings"] == ["unknown categories read as host ranges: my_custom (1)"]


def test_missing_and_unknown_categories_typed_and_lenient(tmp_path: Path) -> None:
    def host(i: int, cat: object) -> dict:
        event = {"ph": "X", "name": f"h{i}", "pid": 1, "tid": 1, "ts": 100 + i, "dur": 1}
        return event if cat is None else {**event, "cat": cat}

    mark = {"ph": "i", "name": "mark", "pid": 1, "tid": 1, "ts": 50, "s": "t"}
    flow = {"ph": "f", "cat": "ac2g", "id": 1, "pid": 0, "tid": 7, "ts": 0, "bp": "e"}
    events = [
        _kernel(0, 5),
        host(1, None),
        host(2, "zeta"),
        host(3, "alpha"),
        host(4, "zeta"),
        mark,
        flow,
    ]
    typed = tracekit.load(_write(tmp_path / "typed.json", events))
    lenient_events = [*events, host(5, 7)]  # a number as category: only the lenient decoder
    lenient = tracekit.load(_write(tmp_path / "lenient.json", lenient_events))
    cases = [
        (typed, 4, "zeta (2), <none> (1), alpha (1)"),
        (lenient, 5, "zeta (2), 7 (1), <none> (1), alpha (1)"),
    ]
    for tl, ranges, listing in cases:
        kinds = dict(tl.df.group_by(pl.col("kind").cast(pl.String)).len().rows())
        assert kinds == {"kernel": 1, "range": ranges, "marker": 1}
        assert tl.meta["warnings"][-1] == f"unknown categories read as host ranges: {listing}"
    ranges = lenient.df.filter(pl.col("kind") == "range").sort("ts")
    assert ranges["name"].cast(pl.String).to_list() == ["h1", "h2", "h3", "h4", "h5"]


def test_unexpected_arg_types_are_read_leniently(tmp_path: Path) -> None:
    event = _kernel(0, 5)
    event["args"]["grid"] = {"x": 1}
    event["args"]["correlation"] = 3.0
    tl = tracekit.load(_write(tmp_path / "t.json", [event]))
    assert tl.df["corr"].to_list() == [3]
    assert tl.meta["warnings"] == ["unexpected value types in event args; read leniently"]


def test_unknown_or_missing_phase_reads_leniently(tmp_path: Path) -> None:
    flow = {"ph": "s", "cat": "ac2g", "id": 1, "pid": 0, "tid": 7, "ts": 1, "name": "ac2g"}
    odd = {"ph": "Z", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 2, "dur": 1}
    no_phase = {"cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 2, "dur": 1}
    instant = {
        "ph": "i",
        "cat": "cpu_instant_event",
        "name": "[memory]",
        "pid": 1,
        "tid": 1,
        "ts": 4,
        "s": "t",
    }
    events = [_kernel(0, 5), flow, odd, no_phase, instant, _kernel(10, 2, corr=2)]
    tl = tracekit.load(_write(tmp_path / "t.json", events))
    kinds = dict(tl.df.group_by(pl.col("kind").cast(pl.String)).len().rows())
    assert kinds == {"kernel": 2, "marker": 1}  # the Z-phase and phase-less rows are skipped
    assert tl.df.filter(pl.col("kind") == "kernel")["dur"].to_list() == [5000, 2000]


def test_args_json_keeps_only_present_values(tmp_path: Path) -> None:
    full = _kernel(0, 5, corr=1)
    full["args"].update(
        {
            "grid": [8, 1, 1],
            "block": [128, 1, 1],
            "registers per thread": 32,
            "est. achieved occupancy %": "nan",
            "Collective name": 'all"reduce',
            "dtype": "Float",
            "External id": 9,
        }
    )
    bare = _kernel(10, 5, corr=2)  # no args beyond the ids
    odd = _kernel(20, 5, corr=3)
    odd["args"].update({"est. achieved occupancy %": 37.5, "grid": [1, 2, 3]})
    tl = tracekit.load(_write(tmp_path / "t.json", [full, bare, odd]))
    texts = tl.df.sort("ts")["args"].to_list()
    args = [None if a is None else msgspec.json.decode(a) for a in texts]  # strict: no NaN
    assert args == [
        {
            "external_id": 9,
            "grid": [8, 1, 1],
            "block": [128, 1, 1],
            "registers": 32,
            "collective": 'all"reduce',
            "dtype": "Float",
        },
        None,
        {"grid": [1, 2, 3], "occupancy": 37.5},
    ]


def test_grid_and_block_text_in_every_shape(tmp_path: Path) -> None:
    # The last two are read leniently; the text of the last one looks like a cut between lists.
    shapes = [[8, 1, 1], [], [2**40, 1, 1], None, [[1, 2], 3], ["x],[y", 2]]
    events = []
    for i, grid in enumerate(shapes):
        event = _kernel(i * 10, 5, corr=i + 1)
        event["args"].update({"grid": grid, "block": [128, 1, 1]})
        events.append(event)
    all_lists = tracekit.load(_write(tmp_path / "lists.json", events[:3]))
    grids = [msgspec.json.decode(a)["grid"] for a in all_lists.df.sort("ts")["args"].to_list()]
    assert grids == shapes[:3]
    mixed = tracekit.load(_write(tmp_path / "mixed.json", events))
    texts = [msgspec.json.decode(a) for a in mixed.df.sort("ts")["args"].to_list()]
    assert [t.get("grid") for t in texts] == [*shapes[:3], None, *shapes[4:]]
    lists_only = tracekit.load(_write(tmp_path / "lenient.json", [events[0], events[5]]))
    grids = [msgspec.json.decode(a)["grid"] for a in lists_only.df.sort("ts")["args"].to_list()]
    assert grids == [shapes[0], shapes[5]]
    assert all(t["block"] == [128, 1, 1] for t in texts)


def test_odd_pid_and_tid_values_among_integers(tmp_path: Path) -> None:
    ops = [
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "aten::mm",
            "pid": 1000 + i,
            "tid": 7,
            "ts": i * 10,
            "dur": 5,
        }
        for i in range(5)
    ]
    ops[1]["pid"], ops[2]["tid"], ops[3]["pid"], ops[4]["tid"] = "Spans", "0x1f", 2**70, 3.0
    tl = tracekit.load(_write(tmp_path / "t.json", ops))
    rows = tl.df.sort("ts").select("pid", "tid").rows()
    assert rows == [(1000, 7), (None, 7), (1002, 31), (None, 7), (1004, 3)]


def test_args_json_when_every_row_has_every_key(tmp_path: Path) -> None:
    events = []
    for i in range(3):
        event = _kernel(i * 10, 5, corr=i + 1)
        event["args"].update(
            {
                "External id": 100 + i,
                "grid": [i + 1, 1, 1],
                "block": [64, 1, 1],
                "est. achieved occupancy %": 12.5 * i,
            }
        )
        events.append(event)
    tl = tracekit.load(_write(tmp_path / "t.json", events))
    assert tl.df.sort("ts")["args"].to_list() == [
        f'{{"external_id":{100 + i},"grid":[{i + 1},1,1],"block":[64,1,1],"occupancy":{o}}}'
        for i, o in enumerate(("0", "12.5", "25"))
    ]


def test_instant_args_keep_correlation_and_skip_the_rest(tmp_path: Path) -> None:
    memory = {
        "ph": "i",
        "cat": "cpu_instant_event",
        "name": "[memory]",
        "pid": 1,
        "tid": 1,
        "ts": 4,
        "s": "t",
        "args": {"Addr": 7, "Bytes": 512, "correlation": 33},
    }
    kernel = _kernel(10, 2)
    del kernel["args"]  # the first args of the trace are an instant's: kernels read no args
    tl = tracekit.load(_write(tmp_path / "t.json", [memory, kernel]))
    rows = tl.df.sort("ts").select(pl.col("kind").cast(pl.String), "corr", "args").rows()
    assert rows == [("marker", 33, None), ("kernel", None, None)]


def test_typed_and_lenient_reads_give_the_same_rows(tmp_path: Path) -> None:
    host = [
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": f"op{i}",
            "pid": 4000 + i,
            "tid": 2**40 + i,
            "ts": 1_700_000_000_000_000 + i * 7,
            "dur": i,
            "args": {"External id": i},
        }
        for i in range(50)
    ]
    host[3]["dur"] = None
    host[4]["pid"] = "stream 9"
    events = [*host, *(_kernel(2**50 + i, 3, corr=i) for i in range(50))]
    typed = tracekit.load(_write(tmp_path / "typed.json", events))
    odd = {"ph": "Z", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 2, "dur": 1}
    lenient = tracekit.load(_write(tmp_path / "lenient.json", [*events, odd]))
    assert "unexpected value types in event args; read leniently" in lenient.meta["warnings"]
    assert typed.df.sort("ts", "name").equals(lenient.df.sort("ts", "name"))
    assert typed.df.filter(pl.col("name") == "op4")["pid"].to_list() == [9]


def test_args_json_drops_only_a_non_finite_value(tmp_path: Path) -> None:
    events = []
    for i, occupancy in enumerate((12.5, "nan", "inf")):
        event = _kernel(i * 10, 5, corr=i + 1)
        event["args"].update(
            {"External id": i, "grid": [1, 1, 1], "est. achieved occupancy %": occupancy}
        )
        events.append(event)
    tl = tracekit.load(_write(tmp_path / "t.json", events))
    assert tl.df.sort("ts")["args"].to_list() == [
        '{"external_id":0,"grid":[1,1,1],"occupancy":12.5}',
        '{"external_id":1,"grid":[1,1,1]}',
        '{"external_id":2,"grid":[1,1,1]}',
    ]


def test_timestamps_whose_ns_overflow_are_dropped(tmp_path: Path) -> None:
    stamps = [2**64 - 1, 10**16, 1e30, "1e30", "-9223372036854775808", 5, "7.5"]
    path = _write(tmp_path / "t.json", [_kernel(ts, 1, corr=i) for i, ts in enumerate(stamps)])
    tl = tracekit.load(path)
    assert sorted(tl.df["corr"].to_list()) == [5, 6]  # ts 5 and "7.5" µs: kept
    assert "5 kernel events without a usable ts; dropped" in tl.meta["warnings"]
    assert run_cli("summary", str(path)).returncode == 0


def test_lone_surrogate_escapes_become_replacement_characters(tmp_path: Path) -> None:
    # As json.dumps writes names holding undecodable bytes; a strict decoder rejects them.
    names = ["gemm\udcff", "\ud800x", "\ud83d\ude00 ok", "\\ud800 literal", "\ud800\\udc00"]
    # Epoch µs with a fraction: too coarse as floats, so their JSON text is read again too.
    events = [_kernel(1.7e15 + 0.5 + i * 10, 5, name=n, corr=i) for i, n in enumerate(names)]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({**BASE, "traceEvents": events}), encoding="ascii")
    tl = tracekit.load(path)
    assert tl.df.sort("ts")["name"].cast(pl.String).to_list() == [
        "gemm\ufffd",
        "\ufffdx",
        "\U0001f600 ok",
        "\\ud800 literal",
        "\ufffd\\udc00",
    ]
    assert "lone UTF-16 surrogate escapes in the trace replaced by U+FFFD" in tl.meta["warnings"]
    assert tl.df.sort("ts")["ts"].to_list() == [0, 10_000, 20_000, 30_000, 40_000]
    assert tl.meta["origin_ns"] == 1_700_000_000_000_000_500
    assert run_cli("summary", str(path)).returncode == 0
