"""How steps reach the user: a low-confidence line at the top of every output, phases and
tokens in every format, and a diff that compares decode steps only and refuses to gate on
steps that may be wrong."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from fixtures.nsys_writer import write_nsys_sqlite
from fixtures.scenario import build_scenario
from fixtures.serving import decode, prefill
from tests.conftest import run_cli
from tracekit.export import save
from tracekit.reports.format import fmt_ns
from tracekit.timeline import Timeline, build_table

LOW = "low confidence: steps found by gaps"


def low_confidence_trace(path: Path) -> Path:
    """Seven bursts of three kernels between idle gaps (a benchmark that sleeps between
    requests), the last one's kernels a thousand times longer: the idle-gap method gives one
    window holding nearly all device time (low confidence)."""
    rng = random.Random(5)
    ts = [b * 100_000 + k * 1_000 for b in range(6) for k in range(3)]
    ts += [600_000 + k * 1_000_000 for k in range(3)]
    names = [f"g{rng.randint(0, 10_000)}" for _ in ts]  # no kernel repeats: no benchmark
    columns = {
        "ts": ts,
        "dur": [990] * 18 + [999_000] * 3,
        "kind": ["kernel"] * len(ts),
        "name": names,
        "device": [0] * len(ts),
        "stream": [7] * len(ts),
    }
    return save(Timeline(build_table(columns), {"format": "test"}), path)


@pytest.fixture(scope="module")
def giant(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return low_confidence_trace(tmp_path_factory.mktemp("giant") / "giant.parquet")


@pytest.fixture(scope="module")
def phased(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """vLLM annotations: one prefill step, then five decode steps (Nsight Systems export)."""
    sc = build_scenario(
        steps=6, layers=2, marker="vllm-native", batches=[prefill(2), *[decode(32)] * 5]
    )
    return write_nsys_sqlite(sc.events, tmp_path_factory.mktemp("phased") / "vllm.sqlite")


@pytest.mark.parametrize("command", ["analyze", "summary"])
def test_low_confidence_is_the_first_line_of_the_terminal_output(giant: Path, command: str) -> None:
    done = run_cli("--no-color", command, str(giant), env={"COLUMNS": "200"})
    assert done.returncode == 0, done.stderr
    first = done.stdout.splitlines()[0]
    assert first.startswith(f"⚠ {LOW}") and "step 6 holds 99% of the device time" in first
    assert done.stdout.count(LOW) == 1


def test_low_confidence_heads_markdown_json_and_html(giant: Path, tmp_path: Path) -> None:
    md = run_cli("analyze", str(giant), "--format", "md").stdout.splitlines()
    assert md[0].startswith("## tracekit") and md[2].startswith(f"> ⚠ **{LOW}")
    data = json.loads(run_cli("analyze", str(giant), "--json").stdout)
    assert data["low_confidence"].startswith(LOW)
    assert data["steps"]["confidence"] == "low" and data["steps"]["warnings"]
    out = tmp_path / "r.html"
    assert run_cli("report", str(giant), "-o", str(out)).returncode == 0
    payload = out.read_text()
    assert '"low_confidence":"low confidence: steps found by gaps' in payload  # drawn first:
    # tests/test_report_browser.py::test_low_confidence_is_the_first_thing_on_the_page


def test_diff_refuses_to_gate_on_low_confidence_steps(giant: Path) -> None:
    done = run_cli("diff", str(giant), str(giant))
    assert done.returncode == 2
    [line] = done.stderr.splitlines()
    assert LOW in line and "--allow-low-confidence" in line
    allowed = run_cli("diff", str(giant), str(giant), "--allow-low-confidence", "--format", "json")
    assert allowed.returncode == 0, allowed.stderr
    assert json.loads(allowed.stdout)["verdict"] == "no significant change"


def test_markdown_step_table_holds_phase_tokens_and_time_per_token(phased: Path) -> None:
    md = run_cli("analyze", str(phased), "--format", "md").stdout
    data = json.loads(run_cli("analyze", str(phased), "--json").stdout)
    assert "| rank | dev | step | phase | tokens | dur | per token |" in md
    rows = [line for line in md.splitlines() if line.startswith("| 0 | 0 |")]
    first = data["step_metrics"][0]
    assert rows[0].startswith(
        f"| 0 | 0 | 0 | prefill | 1024 | {fmt_ns(first['dur'])} | {fmt_ns(first['ns_per_token'])} |"
    )


def test_summary_json_says_low_confidence_first(giant: Path) -> None:
    data = json.loads(run_cli("summary", str(giant), "--json").stdout)
    assert list(data)[:2] == ["capture_note", "low_confidence"]  # said first, capture first
    assert data["low_confidence"].startswith(LOW)


def test_phases_and_tokens_in_every_format(phased: Path) -> None:
    term = run_cli("--no-color", "analyze", str(phased), env={"COLUMNS": "200"}).stdout
    assert "phases (marker): decode 5: median" in term and "prefill 1: median" in term
    assert "per tok" in term and "prefill   1024" in term
    md = run_cli("analyze", str(phased), "--format", "md").stdout
    assert "| phase | steps | median | p90 | tokens | per token |" in md
    assert "| decode | 5 |" in md and "| prefill | 1 |" in md
    data = json.loads(run_cli("analyze", str(phased), "--json").stdout)
    assert data["steps"]["phases"] == {"decode": 5, "prefill": 1}
    assert [r["tokens"] for r in data["step_metrics"]] == [1024, 32, 32, 32, 32, 32]
    decode_row = next(p for p in data["phases"] if p["phase"] == "decode")
    durations = sorted(r["dur"] for r in data["step_metrics"] if r["phase"] == "decode")
    assert decode_row["steps"] == 5 and decode_row["median_ns"] == durations[2]


def test_diff_compares_decode_steps_only(phased: Path) -> None:
    done = run_cli("diff", str(phased), str(phased), "--format", "json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["phase"] == "decode" and data["step"]["count"] == {"base": 5, "head": 5}
    assert data["step"]["label"] == "decode step time (median)"
    assert any("left out (base: 1, head: 1)" in w for w in data["warnings"])
