"""A Kineto trace is decoded while it is read and inflated: same timeline as reading it whole."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import polars as pl
import pytest

import tracekit
from tests.conftest import real_root, run_cli
from tracekit.parsers import slices
from tracekit.parsers.io import gzip_chunks
from tracekit.parsers.kineto import events as kineto_events
from tracekit.parsers.kineto import stream

DEVICES = [{"id": 0, "name": "NVIDIA H200", "totalGlobalMem": 150_000_000_000, "numSms": 132}]


def _frame(tl: tracekit.Timeline) -> pl.DataFrame:
    df = tl.df.with_columns(pl.col(pl.Categorical).cast(pl.String))
    return df.sort(df.columns, nulls_last=True)


@pytest.fixture
def streamed(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Pieces of 16 KB after a first chunk of 4 KB, columns built every 48 KB, and a record
    per load of whether the stream path took it."""
    taken: list[bool] = []
    real = stream.read

    def spy(path: Path, options_of: object) -> object:
        found = real(path, options_of)
        taken.append(found is not None)
        return found

    monkeypatch.setattr(kineto_events, "PIECE_BYTES", 16 << 10)
    monkeypatch.setattr(kineto_events, "BATCH_BYTES", 48 << 10)
    monkeypatch.setattr(slices, "MAX_TRAILER", 8 << 10)
    monkeypatch.setattr(stream, "_FIRST_CHUNK", 4 << 10)
    monkeypatch.setattr(stream, "read", spy)
    return taken


def _whole(path: Path, monkeypatch: pytest.MonkeyPatch) -> tracekit.Timeline:
    """The timeline read the ordinary way, decoded in one piece."""
    with monkeypatch.context() as patch:
        patch.setattr(stream, "read", lambda _path, _options: None)
        patch.setattr(kineto_events, "PIECE_BYTES", 1 << 40)
        return tracekit.load(path)


def _events(n: int, name: str = "gemm") -> list[dict]:
    events = []
    for i in range(n):
        events.append(
            {
                "ph": "X",
                "cat": "kernel",
                "name": f"{name}_{i % 7}",
                "pid": 0,
                "tid": 7,
                "ts": 1_000 + i * 10,
                "dur": 4,
                "args": {"device": 0, "stream": 7, "correlation": i, "grid": [i % 5, 1, 1]},
            }
        )
        events.append(
            {
                "ph": "f",
                "cat": "ac2g",
                "id": i,
                "pid": 0,
                "tid": 7,
                "ts": 1_000 + i * 10,
                "bp": "e",
                "name": "ac2g",
            }
        )
    return events


def _gz(path: Path, document: object) -> Path:
    path.write_bytes(gzip.compress(json.dumps(document, indent=1).encode()))
    return path


def test_real_trace_in_pieces_equals_reading_it_whole(
    streamed: list[bool], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = real_root()
    if root is None:
        pytest.skip("TRACEKIT_REAL_TRACES not set")
    path = root / "nvidia" / "hta-nccl-parser-a100-2rank" / "nccl_data.json.gz"
    pieces = tracekit.load(path)
    assert streamed == [True]
    whole = _whole(path, monkeypatch)
    assert _frame(pieces).equals(_frame(whole))
    assert pieces.meta == whole.meta


def test_plain_json_is_read_in_pieces_too(
    tmp_path: Path, streamed: list[bool], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "t.pt.trace.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": _events(3000)}, indent=1))
    tl = tracekit.load(path)
    assert streamed == [True]
    assert len(tl) == 3000
    assert _frame(tl).equals(_frame(_whole(path, monkeypatch)))


def test_arrays_after_the_events_are_not_taken_for_their_end(
    tmp_path: Path, streamed: list[bool], monkeypatch: pytest.MonkeyPatch
) -> None:
    devices = [{**DEVICES[0], "id": i} for i in range(40)]  # 4 KB of "}, {" after the events
    document = {
        "schemaVersion": 1,
        "traceEvents": _events(3000),
        "deviceProperties": devices,
        "logs": ["INFO: done ]", "x"],
        "baseTimeNanoseconds": 17 * 10**17,
    }
    path = _gz(tmp_path / "t.json.gz", document)
    pieces = []
    real = stream.TableBuilder.add
    monkeypatch.setattr(stream.TableBuilder, "add", lambda b, t: pieces.append(1) or real(b, t))
    tl = tracekit.load(path)
    assert streamed == [True] and len(pieces) > 20
    assert len(tl) == 3000
    assert tl.meta["devices"][0]["name"] == "NVIDIA H200" and len(tl.meta["devices"]) == 40
    assert tl.meta["origin_ns"] == 17 * 10**17 + 1_000_000
    assert _frame(tl).equals(_frame(_whole(path, monkeypatch)))


def test_distributed_info_after_the_events_ranks_every_row(
    tmp_path: Path, streamed: list[bool], monkeypatch: pytest.MonkeyPatch
) -> None:
    events = _events(3000)
    events[4]["args"]["rank"] = 9  # read from args only when the trace has no distributedInfo
    document = {"traceEvents": events, "distributedInfo": {"rank": 3, "world_size": 8}}
    path = _gz(tmp_path / "t.json.gz", document)
    tl = tracekit.load(path)
    assert streamed == [True]
    assert tl.df["rank"].unique().to_list() == [3] and tl.meta["ranks"] == [3]
    assert _frame(tl).equals(_frame(_whole(path, monkeypatch)))


def test_bare_list_and_several_gzip_members(
    tmp_path: Path, streamed: list[bool], monkeypatch: pytest.MonkeyPatch
) -> None:
    text = json.dumps(_events(3000)).encode()
    path = tmp_path / "t.json.gz"
    path.write_bytes(gzip.compress(text[:50_000]) + gzip.compress(text[50_000:]))
    tl = tracekit.load(path)
    assert streamed == [True]
    assert len(tl) == 3000
    assert _frame(tl).equals(_frame(_whole(path, monkeypatch)))


def test_a_cut_inside_a_name_reads_the_file_whole(tmp_path: Path, streamed: list[bool]) -> None:
    events = _events(3000, name='odd"}, {"name')
    path = _gz(tmp_path / "t.json.gz", {"schemaVersion": 1, "traceEvents": events})
    tl = tracekit.load(path)
    assert streamed == [False]
    assert len(tl) == 3000 and tl.meta["warnings"] == []


def test_truncated_gzip_is_one_line_either_way(
    tmp_path: Path, streamed: list[bool], monkeypatch: pytest.MonkeyPatch
) -> None:
    whole = _gz(tmp_path / "t.json.gz", {"schemaVersion": 1, "traceEvents": _events(3000)})
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(whole.read_bytes()[: whole.stat().st_size // 2])
    monkeypatch.setenv("TRACEKIT_STRICT", "1")
    with pytest.raises(tracekit.TraceError, match="gzip stream is truncated"):
        tracekit.load(cut)
    assert streamed == [False]
    done = run_cli("--strict", "summary", str(cut))
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1


def test_end_of_a_last_piece_holding_one_event() -> None:
    text = bytearray(
        b'[\n {"ph": "M", "name": "process_sort_index", "args": {"sort_index": 6}}\n ]\n}'
    )
    assert stream._array_end(text, bare=False) == text.rindex(b"]")
    assert stream._array_end(bytearray(b"[ ]\n}"), bare=False) == 2
    assert stream._array_end(bytearray(b'[{"ph": "X"}]  '), bare=True) == 12
    assert stream._array_end(bytearray(b'[{"ph": "X"}, '), bare=True) is None


def test_pieces_are_views_cut_between_events(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kineto_events, "PIECE_BYTES", 256)
    monkeypatch.setattr(slices, "MAX_TRAILER", 64)
    monkeypatch.setattr(stream, "_FIRST_CHUNK", 256)
    separators = [b",", b" ,\n ", b",  ", b"\n,"]  # the comma right after "}" or further on
    events = [b'{"ph": "X", "name": "k%d", "args": {"grid": [%d]}}' % (i, i) for i in range(40)]
    text = b"[" + b"".join(e + separators[i % 4] for i, e in enumerate(events[:-1]))
    text += events[-1] + b"]"
    chunked = (text[i : i + 97] for i in range(0, len(text), 97))
    pending = bytearray()
    names = []
    for piece in stream._pieces(chunked, pending):
        assert isinstance(piece, memoryview) and bytes(piece[:1]) == b"["
        names += [e["name"] for e in json.loads(bytes(piece))]
    assert len(names) > 20 and pending[:1] == b"["
    names += [e["name"] for e in json.loads(bytes(pending))]
    assert names == [f"k{i}" for i in range(40)]


def test_chunks_start_small_and_double(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = json.dumps(_events(3000)).encode()
    data = gzip.compress(text[:200_000]) + gzip.compress(text[200_000:])  # two members
    sizes = [len(chunk) for chunk in gzip_chunks(data, 64 << 10, first=4 << 10)]
    assert sizes[:5] == [4 << 10, 8 << 10, 16 << 10, 32 << 10, 64 << 10]
    assert max(sizes) == 64 << 10 and sum(sizes) == len(text)
    assert len(next(gzip_chunks(data, 64 << 10))) == 64 << 10
    monkeypatch.setattr(stream, "_FIRST_CHUNK", 4 << 10)
    (tmp_path / "t.json").write_bytes(text)
    (tmp_path / "t.json.gz").write_bytes(data)
    for name in ("t.json", "t.json.gz"):  # the reader thread: plain reads and inflating
        reader = stream._Reader(tmp_path / name, 64 << 10)
        reader.start()
        sizes = [len(chunk) for chunk in reader.texts()]
        reader.join()
        assert sizes[:5] == [4 << 10, 8 << 10, 16 << 10, 32 << 10, 64 << 10], name
        assert sum(sizes) == len(text)


def _nccl_kernel(i: int) -> dict:
    return {
        "ph": "X",
        "cat": "kernel",
        "name": "ncclDevKernel_AllReduce",
        "pid": 0,
        "tid": 9,
        "ts": 900_000 + i * 10,
        "dur": 5,
        "args": {
            "device": 0,
            "stream": 9,
            "correlation": 50_000 + i,
            "Collective name": "allreduce",
            "In msg nelems": 1024 * (i + 1),
            "Out msg nelems": 1024 * (i + 1),
            "Group size": 8,
            "dtype": "Float",
        },
    }


def test_values_first_seen_in_a_later_piece_stay_on_their_rows(
    tmp_path: Path, streamed: list[bool], monkeypatch: pytest.MonkeyPatch
) -> None:
    # NCCL details appear only in the middle of the trace, and some kernels without dur sit in
    # the first and the last pieces: columns are built in several batches.
    head, tail = _events(600, "head"), _events(600, "tail")
    for event in (head[0], head[2], tail[-2]):
        del event["dur"]
    nccl = [_nccl_kernel(i) for i in range(5)]
    path = _gz(tmp_path / "t.json.gz", {"traceEvents": head + nccl + tail})
    batches = []
    real = kineto_events.to_table
    monkeypatch.setattr(kineto_events, "to_table", lambda c: batches.append(1) or real(c))
    tl = tracekit.load(path)
    assert streamed == [True] and len(batches) > 3
    df = tl.df
    assert len(df) == 1205
    nccl_rows = df.filter(pl.col("corr") >= 50_000).sort("corr")
    expected = [
        f'{{"collective":"allreduce","in_nelems":{1024 * (i + 1)},'
        f'"out_nelems":{1024 * (i + 1)},"group_size":8,"dtype":"Float"}}'
        for i in range(5)
    ]
    assert nccl_rows["args"].to_list() == expected
    assert df.filter(pl.col("args").str.contains("nelems")).height == 5
    assert df.filter(pl.col("corr") < 50_000)["args"].str.starts_with('{"grid":').all()
    assert "3 kernel events without dur; read as 0 ns" in tl.meta["warnings"]
    assert _frame(tl).equals(_frame(_whole(path, monkeypatch)))


def _op(i: int, **args: object) -> dict:
    return {
        "ph": "X",
        "cat": "cpu_op",
        "name": f"aten::op{i % 5}",
        "pid": 1,
        "tid": 2,
        "ts": 1_000 + i * 10,
        "dur": 3,
        "args": {"External id": i, **args},
    }


def test_a_lenient_piece_reads_odd_values_as_null_in_its_batch_only(
    tmp_path: Path, streamed: list[bool], monkeypatch: pytest.MonkeyPatch
) -> None:
    ops = [_op(i) for i in range(3000)]
    ops[20]["pid"] = True  # an unexpected type: this piece is decoded leniently
    ops[20]["args"]["External id"] = 1.5
    ops[2900]["tid"] = "stream 9"
    path = _gz(tmp_path / "t.json.gz", {"traceEvents": ops})
    tl = tracekit.load(path)
    assert streamed == [True]
    df = tl.df.sort("ts")
    assert df["pid"][20] is None and df["args"][20] is None  # not 1, not {"external_id":1}
    assert df["pid"].null_count() == 1 and df["tid"][2900] == 9
    assert df["args"][21] == '{"external_id":21}'
    assert "unexpected value types in event args; read leniently" in tl.meta["warnings"]
    assert _frame(tl).equals(_frame(_whole(path, monkeypatch)))


def test_nccl_details_are_kept_only_on_rows_with_a_collective_name(
    tmp_path: Path, streamed: list[bool], monkeypatch: pytest.MonkeyPatch
) -> None:
    ops = [_op(i, **({"Group size": 8, "dtype": "Half"} if i % 3 else {})) for i in range(3000)]
    ops[1501]["args"].update({"Collective name": "allreduce", "In msg nelems": 64})
    path = _gz(tmp_path / "t.json.gz", {"traceEvents": ops})
    tl = tracekit.load(path)
    assert streamed == [True]
    df = tl.df.sort("ts")
    assert df.filter(pl.col("args").str.contains("Half"))["ts"].to_list() == [df["ts"][1501]]
    assert df["args"][1501] == (
        '{"external_id":1501,"collective":"allreduce","in_nelems":64,"group_size":8,"dtype":"Half"}'
    )
    assert _frame(tl).equals(_frame(_whole(path, monkeypatch)))


def test_repair_warnings_come_in_one_order_whatever_the_read_path(
    tmp_path: Path, streamed: list[bool], monkeypatch: pytest.MonkeyPatch
) -> None:
    ops = [_op(i) for i in range(3000)]
    ops[5]["dur"] = -2  # repairs of the first batch, before the missing ts of a later one
    del ops[6]["dur"]
    del ops[2900]["ts"]
    path = _gz(tmp_path / "t.json.gz", {"traceEvents": ops})
    tl = tracekit.load(path)
    assert streamed == [True]
    expected = [
        "1 op events without a usable ts; dropped",
        "1 op events without dur; read as 0 ns",
        "1 op events with negative dur; read as 0 ns",
    ]
    assert tl.meta["warnings"] == expected
    assert _whole(path, monkeypatch).meta["warnings"] == expected
