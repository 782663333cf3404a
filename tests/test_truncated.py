"""Kineto traces cut short (a profiler killed while writing, a copy cut off): the events
before the cut are kept, exactly the complete ones, with one warning; ``--strict`` refuses.

The ground truth does not use tracekit's reader: Python's own JSON decoder walks the events
array of the whole text and gives each event's end offset; the events that end before the
cut, closed as a valid trace, are read the ordinary way and must equal what the cut trace
gives."""

from __future__ import annotations

import gzip
import json
import os
import random
import shutil
import zlib
from pathlib import Path

import pytest

import tracekit
from tracekit.errors import TraceError

REAL = os.environ.get("TRACEKIT_REAL_TRACES")
SAMPLES = [
    "nvidia/hta-sampled-world128-multistream/sampled_rank-0.json.gz",
    "nvidia/hta-alexnet-a100/benchmark_result_2869224_1695835535_trace.json.gz",
    "amd/kineto_mi300x_sglang_qwen3_8b_decode",
]
CUTS = 4  # seeded random cut offsets per sample


def _sample(name: str) -> Path:
    if not REAL:
        pytest.skip("TRACEKIT_REAL_TRACES not set")
    path = Path(REAL) / name
    if path.is_dir():
        path = next(p for p in sorted(path.iterdir()) if p.name.endswith((".json", ".json.gz")))
    return path


def _text(path: Path) -> bytes:
    data = path.read_bytes()
    return gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data


def _event_ends(text: bytes) -> tuple[int, list[int]]:
    """Where the events array opens, and the offset after each whole event (Python's
    decoder), up to the end of the events or of the text."""
    decoder = json.JSONDecoder()
    body = text.decode("utf-8", errors="surrogatepass")
    assert body.isascii(), "offsets below are character offsets: keep to ASCII samples"
    bare = body.lstrip().startswith("[")
    start = body.index("[") + 1 if bare else body.index("[", body.index('"traceEvents"')) + 1
    ends, pos = [], start
    while True:
        while pos < len(body) and body[pos] in " \t\r\n,":
            pos += 1
        if pos == len(body) or body[pos] == "]":
            return start, ends
        try:
            _, pos = decoder.raw_decode(body, pos)
        except json.JSONDecodeError:  # the text ends inside this event
            return start, ends
        ends.append(pos)


def _complete_text(text: bytes, cut: int) -> bytes:
    """The events that end at or before ``cut``, closed as valid JSON."""
    start, ends = _event_ends(text)
    kept = [e for e in ends if e <= cut]
    body = text[: kept[-1]] if kept else text[:start]
    return body + (b"]" if text.lstrip().startswith(b"[") else b"]}")


def _complete(text: bytes, cut: int, tmp: Path) -> Path:
    path = tmp / "complete.json"
    path.write_bytes(_complete_text(text, cut))
    return path


def _same(cut: tracekit.Timeline, reference: tracekit.Timeline) -> None:
    assert len(cut) == len(reference)
    assert cut.events.equals(reference.events)
    assert cut.meta["origin_ns"] == reference.meta["origin_ns"]


@pytest.mark.parametrize("name", SAMPLES)
def test_a_cut_json_keeps_exactly_its_complete_events(name: str, tmp_path: Path) -> None:
    text = _text(_sample(name))
    rng = random.Random(name)
    start = text.index(b"[", text.index(b'"traceEvents"'))
    for _ in range(CUTS):
        cut = rng.randrange(start + 200, len(text) - 10)
        path = tmp_path / "cut.json"
        path.write_bytes(text[:cut])
        timeline = tracekit.load(path)
        _same(timeline, tracekit.load(_complete(text, cut, tmp_path)))
        warning = timeline.meta["warnings"][-1]
        assert "cut short" in warning and f"{len(timeline):,} complete events" in warning
        assert timeline.meta["truncated"]["text_bytes"] == cut


def test_a_cut_gzip_stream_keeps_what_inflates(tmp_path: Path) -> None:
    path = _sample(SAMPLES[1])
    data = path.read_bytes()
    cut = len(data) * 2 // 3
    (tmp_path / "cut.json.gz").write_bytes(data[:cut])
    text = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(data[:cut])  # what inflates
    timeline = tracekit.load(tmp_path / "cut.json.gz")
    _same(timeline, tracekit.load(_complete(text, len(text), tmp_path)))
    assert timeline.meta["truncated"]["gzip_error"]
    analysis = tracekit.analyze(timeline)
    assert any("cut short" in w for w in analysis.steps.warnings)


def test_strict_refuses_a_cut_trace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = _text(_sample(SAMPLES[0]))
    path = tmp_path / "cut.json"
    path.write_bytes(text[: len(text) // 2])
    monkeypatch.setenv("TRACEKIT_STRICT", "1")
    with pytest.raises(TraceError, match="truncated"):
        tracekit.load(path)


def test_a_cut_before_the_first_event_keeps_nothing_and_says_so(tmp_path: Path) -> None:
    path = tmp_path / "cut.json"
    path.write_bytes(b'{"schemaVersion": 1, "traceEvents": [{"ph": "X", "na')
    timeline = tracekit.load(path)
    assert len(timeline) == 0 and "kept its 0 complete events" in timeline.meta["warnings"][-1]


ROCPROF_SET = "amd/rocprofv3_csv_gfx1151_llamacpp_TRIMMED"


def test_a_cut_rocprofv3_csv_keeps_exactly_its_complete_rows(tmp_path: Path) -> None:
    if not REAL:
        pytest.skip("TRACEKIT_REAL_TRACES not set")
    source = Path(REAL) / ROCPROF_SET
    kernels = (source / "decode_kernel_trace.csv").read_bytes()
    api = (source / "decode_hip_api_trace.csv").read_bytes()
    rng = random.Random(ROCPROF_SET)
    header = kernels.index(b"\n") + 1
    for i in range(CUTS):
        cut = rng.randrange(header + 1, len(kernels) - 1)
        while kernels[cut - 1 : cut] == b"\n" or kernels[cut : cut + 1] in (b"\n", b"\r"):
            cut += 1  # a cut inside a row (a row cut just before its line break is whole)
        folder, reference = tmp_path / f"cut{i}", tmp_path / f"ref{i}"
        for where, body in (
            (folder, kernels[:cut]),
            (reference, kernels[: kernels.rfind(b"\n", 0, cut) + 1]),
        ):
            where.mkdir()
            (where / "decode_kernel_trace.csv").write_bytes(body)
            (where / "decode_hip_api_trace.csv").write_bytes(api)
        timeline = tracekit.load(folder / "decode_kernel_trace.csv")
        _same(timeline, tracekit.load(reference / "decode_kernel_trace.csv"))
        rows = kernels[:cut].count(b"\n") - 1
        warning = next(w for w in timeline.meta["warnings"] if "cut short" in w)
        assert f"kept its {rows:,} complete rows" in warning
        assert timeline.meta["truncated"] == {"files": ["decode_kernel_trace.csv"]}


def test_strict_refuses_a_cut_csv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if not REAL:
        pytest.skip("TRACEKIT_REAL_TRACES not set")
    kernels = (Path(REAL) / ROCPROF_SET / "decode_kernel_trace.csv").read_bytes()
    (tmp_path / "decode_kernel_trace.csv").write_bytes(kernels[: len(kernels) // 2 + 3])
    monkeypatch.setenv("TRACEKIT_STRICT", "1")
    with pytest.raises(TraceError, match="ends inside a row"):
        tracekit.load(tmp_path / "decode_kernel_trace.csv")


NPU_RANK = "ascend/msinsight_torchnpu_910B_2rank/text/level1/rank0_ascend_pt"


def test_a_cut_torch_npu_trace_view_keeps_exactly_its_complete_events(tmp_path: Path) -> None:
    if not REAL:
        pytest.skip("TRACEKIT_REAL_TRACES not set")
    source = Path(REAL) / NPU_RANK
    inner = Path("ASCEND_PROFILER_OUTPUT/trace_view.json")
    text = (source / inner).read_bytes()
    rng = random.Random(NPU_RANK)
    for i in range(CUTS):
        cut = rng.randrange(1_000, len(text) - 10)
        folder, reference = tmp_path / f"cut{i}" / source.name, tmp_path / f"ref{i}" / source.name
        for where, body in ((folder, text[:cut]), (reference, _complete_text(text, cut))):
            shutil.copytree(source, where)
            (where / inner).write_bytes(body)
        timeline = tracekit.load(folder)
        _same(timeline, tracekit.load(reference))
        assert timeline.meta["truncated"] == {"files": ["trace_view.json"]}
        assert any("cut short" in w for w in timeline.meta["warnings"])


ASCEND_TABLES = [
    # the op table alone: its rows are the timeline's device rows
    (
        "ascend/msprof_analyze_advisor_testdata/test/ut/advisor/compute_advice/data",
        "kernel_details.csv",
    ),
    # beside the timeline (trace_view.json): its rows enrich the device tasks
    (NPU_RANK, "ASCEND_PROFILER_OUTPUT/kernel_details.csv"),
]


@pytest.mark.parametrize(("sample", "table"), ASCEND_TABLES)
def test_a_cut_ascend_op_table_keeps_exactly_its_complete_rows(
    sample: str, table: str, tmp_path: Path
) -> None:
    if not REAL:
        pytest.skip("TRACEKIT_REAL_TRACES not set")
    source = Path(REAL) / sample
    text = (source / table).read_bytes()
    rng = random.Random(table)
    header = text.index(b"\n") + 1
    for i in range(CUTS):
        # a cut before the last field of a row: one inside the last field leaves every field
        # there, is not told from a whole row and is read as one (the last column of these
        # tables is a hardware counter tracekit does not read; a warning says when it is)
        cut = rng.randrange(header + 1, len(text) - 1)
        while b"," not in text[cut : text.find(b"\n", cut)] or text[cut - 1 : cut] == b"\n":
            cut = rng.randrange(header + 1, len(text) - 1)
        complete = text[: text.rfind(b"\n", 0, cut) + 1]
        traces = []
        for where, body in ((tmp_path / f"cut{i}", text[:cut]), (tmp_path / f"ref{i}", complete)):
            target = where / source.name
            if source.is_dir() and table.count("/"):
                shutil.copytree(source, target)
            else:
                target.mkdir(parents=True)
            (target / table).write_bytes(body)
            traces.append(target if table.count("/") else target / table)
        timeline, reference = (tracekit.load(t) for t in traces)
        _same(timeline, reference)
        rows = complete.count(b"\n") - 1
        name = Path(table).name
        warning = next(w for w in timeline.meta["warnings"] if "cut short" in w)
        assert warning.startswith(f"{name}: the file is cut short: kept its {rows:,} complete")
        assert timeline.meta["truncated"] == {"files": [name]}
        assert "truncated" not in reference.meta


def test_strict_refuses_a_cut_ascend_op_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not REAL:
        pytest.skip("TRACEKIT_REAL_TRACES not set")
    sample, table = ASCEND_TABLES[0]
    text = (Path(REAL) / sample / table).read_bytes()
    (tmp_path / table).write_bytes(text[: len(text) // 2 + 3])
    monkeypatch.setenv("TRACEKIT_STRICT", "1")
    with pytest.raises(TraceError, match="ends inside a row"):
        tracekit.load(tmp_path / table)


def test_an_ascend_op_table_of_its_header_alone_is_not_cut(tmp_path: Path) -> None:
    """A header without a line break (an empty table) reads as the header with one."""
    header = b"Step Id,Model ID,Task ID,Stream ID,Name,Type,Accelerator Core,Start Time(us),"
    header += b"Duration(us),Wait Time(us),Block Dim"
    outcomes = []
    for name, body in (("bare", header), ("ended", header + b"\n")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "kernel_details.csv").write_bytes(body)
        try:
            outcomes.append(("rows", len(tracekit.load(tmp_path / name / "kernel_details.csv"))))
        except TraceError as exc:
            outcomes.append(("error", str(exc).replace(str(tmp_path / name), "")))
    assert outcomes[0] == outcomes[1]
