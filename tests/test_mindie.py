"""MindIE msServiceProfiler output: the fixture writer's run (chrome_tracing.json, batch.csv
/ request.csv, their folder) against its ground truth, a real sample where
TRACEKIT_MINDIE_SAMPLE names one, the CLI on it, and bad input."""

from __future__ import annotations

import json
import os
import statistics
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from fixtures import mindie_writer as writer
from tests.conftest import one_line, sha256
from tracekit import analyze, load
from tracekit.cli import app
from tracekit.errors import TraceError
from tracekit.metrics.requests import request_latency
from tracekit.parsers import kineto
from tracekit.parsers.probe import Probe

# A real output (Cztk5380/msserviceprofiler @ d67f99ed, output/chrome_tracing.json) is not
# shipped: the commit that holds it has no license. Point TRACEKIT_MINDIE_SAMPLE at a copy.
REAL = Path(os.environ.get("TRACEKIT_MINDIE_SAMPLE", "/nonexistent/chrome_tracing.json"))
REAL_SHA256 = "2e32cdecf9fd066bdaba527180fe271f419caa2f4aa1f2ee260c20aefcf9c0b5"


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return writer.write_trace(tmp_path_factory.mktemp("mindie") / "chrome_tracing.json")


def _steps(path: Path) -> list[dict]:
    ranges = analyze(load(path)).steps.ranges.sort("rank", "step")
    return ranges.select("phase", "tokens").to_dicts()


def test_trace_is_host_only_service_spans(trace: Path) -> None:
    timeline = load(trace)
    df = timeline.df
    assert timeline.meta["format"] == "mindie"
    assert timeline.meta["producer"]["name"] == "MindIE msServiceProfiler"
    assert "no device work" in timeline.meta["warnings"][0]
    assert set(df["device"].unique().to_list()) == {-1}
    assert set(df["kind"].cast(str).unique().to_list()) == {"range"}
    counts = dict(df.group_by("name").len().iter_rows())
    n_iterations = len(writer.schedule())
    assert counts == {"httpReq": 5, "httpRes": 5, "BatchSchedule": n_iterations,
                      "modelExec": n_iterations}  # fmt: skip
    assert any("counter samples" in w for w in timeline.meta["warnings"])
    # µs with fractions since the epoch -> exact ns since the first span
    assert timeline.meta["origin_ns"] == writer.ORIGIN_US * 1000
    first_exec = writer.schedule()[0].exec_start
    exec_ts = df.filter(df["name"].cast(str) == "modelExec")["ts"].min()
    assert exec_ts == round(first_exec * 1000)
    assert df.filter(df["name"].cast(str) == "modelExec")["tid"].unique().to_list() == [
        writer.EXEC_TID
    ]


def test_steps_phases_tokens_equal_truth(trace: Path) -> None:
    assert _steps(trace) == writer.truth()["steps"]


def test_scheduled_tokens_give_every_step_its_tokens(tmp_path: Path) -> None:
    path = writer.write_trace(tmp_path / "chrome_tracing.json", scheduled=True)
    steps = _steps(path)
    truth = writer.truth(scheduled=True)["steps"]
    assert steps == truth
    assert [s["tokens"] for s in truth][:3] == [
        12,
        7 + 1,
        1 + 1,
    ]  # req-0 prompt; req-1 prompt + req-0; two decodes


def test_request_latency_equals_truth(trace: Path) -> None:
    analysis = analyze(load(trace))
    got = {r["rid"]: r for r in analysis.requests.to_dicts()}
    truth = writer.truth()["requests"]
    assert set(got) == set(truth)
    for rid, want in truth.items():
        assert got[rid]["ttft_ns"] == want["ttft_ns"], rid
        assert got[rid]["output_tokens"] == want["tokens"], rid
        if want["tpot_ns"] is None:
            assert got[rid]["tpot_ns"] is None
        else:
            assert got[rid]["tpot_ns"] == pytest.approx(want["tpot_ns"], abs=1e-6)
    summary = analysis.to_dict()["requests"]
    ttfts = [t["ttft_ns"] for t in truth.values()]
    tpots = [t["tpot_ns"] for t in truth.values() if t["tpot_ns"] is not None]
    assert summary["count"] == 5
    assert summary["ttft_ns"]["median"] == statistics.median(ttfts)
    assert summary["ttft_ns"]["p90"] == pytest.approx(np.percentile(ttfts, 90))
    assert summary["tpot_ns"]["median"] == pytest.approx(statistics.median(tpots))
    assert summary["tpot_ns"]["p90"] == pytest.approx(np.percentile(tpots, 90))


def test_csvs_and_their_folder(tmp_path: Path) -> None:
    batch, _ = writer.write_csvs(tmp_path)
    timeline = load(batch)
    assert timeline.meta["format"] == "mindie"
    assert any("batches and requests only" in w for w in timeline.meta["warnings"])
    assert _steps(batch) == writer.truth()["steps"]
    latency = request_latency(timeline.df)
    truth = writer.truth()["requests"]
    assert dict(zip(latency["rid"], latency["ttft_ns"])) == {
        k: v["ttft_ns"] for k, v in truth.items()
    }
    # the folder: chrome_tracing.json is preferred when it is there
    assert load(tmp_path).meta["source"] == "batch.csv"
    writer.write_trace(tmp_path / "chrome_tracing.json")
    assert load(tmp_path).meta["source"] == "chrome_tracing.json"
    assert _steps(tmp_path) == writer.truth()["steps"]


def test_sniffed_as_mindie_not_kineto(trace: Path) -> None:
    assert not kineto.sniff(Probe(trace))
    assert load(trace).meta["format"] == "mindie"


def test_cli_info_and_analyze_json(trace: Path) -> None:
    runner = CliRunner()
    info = runner.invoke(app, ["info", str(trace)])
    assert info.exit_code == 0, info.output
    assert "mindie" in info.output and "msServiceProfiler" in info.output
    result = runner.invoke(app, ["analyze", str(trace), "--format", "json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    doc = data["traces"][0] if "traces" in data else data
    assert doc["steps"]["count"] == len(writer.schedule())
    phases = [s["phase"] for s in writer.truth()["steps"]]
    assert doc["steps"]["phases"] == {p: phases.count(p) for p in set(phases)}
    assert doc["steps"]["phases"] == {"decode": 5, "prefill": 2, "mixed": 2}
    assert doc["requests"]["count"] == 5


@pytest.mark.parametrize("cut", [0.5, 0.9])
def test_cut_json_is_one_line(trace: Path, tmp_path: Path, cut: float) -> None:
    data = trace.read_bytes()
    bad = tmp_path / "chrome_tracing.json"
    bad.write_bytes(data[: int(len(data) * cut)])
    with pytest.raises(TraceError) as exc:
        load(bad)
    one_line(exc, str(bad), "cut short")
    result = CliRunner().invoke(app, ["info", str(bad)])
    assert result.exit_code == 2
    assert "Traceback" not in result.output


def test_empty_file_is_one_line(tmp_path: Path) -> None:
    empty = tmp_path / "chrome_tracing.json"
    empty.write_bytes(b"")
    with pytest.raises(TraceError) as exc:
        load(empty)
    one_line(exc, "empty file")


def test_unrecognised_names_the_parser_option(tmp_path: Path) -> None:
    other = tmp_path / "x.json"
    other.write_text('{"foo": 1}')
    with pytest.raises(TraceError) as exc:
        load(other)
    one_line(exc, "--parser NAME", "mindie", "kineto")


@pytest.mark.skipif(not REAL.exists(), reason="TRACEKIT_MINDIE_SAMPLE not set")
def test_real_sample() -> None:
    assert sha256(REAL) == REAL_SHA256
    timeline = load(REAL)
    assert timeline.meta["format"] == "mindie"
    assert timeline.meta["origin_ns"] == 1727940490718339000
    analysis = analyze(timeline)
    ranges = analysis.steps.ranges
    assert len(analysis.steps) == 250
    assert ranges["phase"].to_list() == ["prefill"] + ["decode"] * 249
    assert ranges["tokens"].to_list() == [None] + [1] * 249
    (request,) = analysis.requests.to_dicts()
    assert request["rid"] == "0"
    assert request["output_tokens"] == 250
    # httpReq at 1727940490718339.0 µs; the prefill modelExec ends at 744636.75 + 29.75 (its
    # ts written "…744636.8": the shortest text of that double)
    assert request["ttft_ns"] == 26_327_500
    events = json.loads(REAL.read_text())["traceEvents"]
    (arrival,) = [e["ts"] for e in events if e["name"] == "httpReq" and e["ph"] == "X"]
    ends = sorted(e["ts"] + e["dur"] for e in events if e["name"] == "modelExec")
    assert request["ttft_ns"] == round((ends[0] - arrival) * 1000)
    assert request["tpot_ns"] == pytest.approx((ends[-1] - ends[0]) * 1000 / 249, abs=1)


def test_merged_msprof_events_are_left_out_with_a_warning(tmp_path: Path) -> None:
    events = writer.trace_events()
    events += [
        {"name": "process_name", "ph": "M", "pid": 999, "args": {"name": "Ascend Hardware"}},
        {"name": "MatMulV2", "ph": "X", "ts": writer.ORIGIN_US + 10.0, "dur": 3.0, "pid": 999,
         "tid": 2, "args": {"Task Type": "AI_CORE"}},
    ]  # fmt: skip
    path = tmp_path / "chrome_tracing.json"
    path.write_text(json.dumps(events))
    timeline = load(path)
    assert "MatMulV2" not in timeline.df["name"].cast(str).to_list()
    assert any(
        "1 events of an msprof" in w and "Ascend Hardware" in w for w in timeline.meta["warnings"]
    )
    assert _steps(path) == writer.truth()["steps"]


def test_a_folder_without_its_files_and_unreadable_times_are_one_line(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(TraceError) as exc:
        load(empty, format="mindie")
    one_line(exc, "holds no msServiceProfiler output", "chrome_tracing.json")
    bad = tmp_path / "request.csv"
    bad.write_text("http_rid,recv_token_size,start_time\n1,10,abc\n")
    with pytest.raises(TraceError) as exc:
        load(bad, format="mindie")
    one_line(exc, "holds no msServiceProfiler spans with times")
