"""Rule registry: plugins through entry points, options, and the analyze / rules commands."""

from __future__ import annotations

import json
from pathlib import Path
from typing import ClassVar

import pytest

import tracekit
from fixtures.nsys_writer import write_nsys_sqlite
from fixtures.scenario import build_scenario
from tests.conftest import run_cli
from tracekit.errors import TraceError
from tracekit.model import Context, Finding
from tracekit.rules import registry
from tracekit.rules.base import Rule


class LongKernels(Rule):
    """Kernels longer than ``min_ns`` (a test plugin)."""

    id: ClassVar[str] = "long-kernels"
    name: ClassVar[str] = "long kernels"
    options: ClassVar[dict] = {"min_ns": 100_000}

    def run(self, ctx: Context) -> list[Finding]:
        long = ctx.work.filter(ctx.work["dur"] >= self.opts["min_ns"])
        return [self.finding("info", f"{long.height} long kernels", "", metrics={"n": long.height})]


class _Point:
    name, value = "long-kernels", "tests.test_rules_registry:LongKernels"

    def load(self) -> type[Rule]:
        return LongKernels


@pytest.fixture
def plugin(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        registry, "entry_points", lambda group: [_Point()] if group == registry.GROUP else []
    )


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    sc = build_scenario(steps=3, layers=2, idle_bubble_ns=100_000)
    return write_nsys_sqlite(sc.events, tmp_path_factory.mktemp("t") / "t.sqlite")


def test_plugin_rule_runs_with_its_options(plugin: None, trace: Path) -> None:
    builtin = [rule.id for rule in registry.BUILTIN]
    assert list(registry.available()) == [*builtin, "long-kernels"]
    timeline = tracekit.load(trace)
    [finding] = tracekit.analyze(timeline, ["long-kernels"]).findings
    kernels = timeline.df.filter(timeline.df["kind"] == "kernel")
    lm_head = kernels.filter(kernels["dur"] >= 100_000).height
    assert finding.metrics == {"n": lm_head} and lm_head > 0  # LM head GEMMs
    opts = {"long-kernels": {"min_ns": 10**9}}
    [none] = tracekit.analyze(timeline, ["long-kernels"], opts).findings
    assert none.metrics == {"n": 0}


def test_option_and_rule_errors(trace: Path) -> None:
    timeline = tracekit.load(trace)
    with pytest.raises(TraceError, match="unknown rule"):
        tracekit.analyze(timeline, ["nope"])
    with pytest.raises(TraceError, match="unknown option"):
        tracekit.analyze(timeline, ["bubbles"], {"bubbles": {"colour": 1}})
    with pytest.raises(TraceError, match="must be int"):
        tracekit.analyze(timeline, ["bubbles"], {"bubbles": {"report_ns": "many"}})
    with pytest.raises(TraceError, match="not selected"):
        tracekit.analyze(timeline, ["bubbles"], {"mc2": {"max_gap_ns": 1}})


def test_analyze_json_and_options_on_the_command_line(trace: Path) -> None:
    done = run_cli("analyze", str(trace), "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["steps"]["method"] == "marker" and data["steps"]["count"] == 3
    [bubble] = [f for f in data["findings"] if f["rule"] == "bubbles"]
    assert {f["rule"] for f in data["findings"] if f["severity"] != "info"} == {"bubbles"}
    assert bubble["metrics"]["largest_bubble_ns"] == bubble["impact_ns"] == 100_000
    assert bubble["steps"] == [1] and bubble["advice"]
    quiet = run_cli(
        "analyze",
        str(trace),
        "--json",
        "-O",
        "bubbles.report_ns=200000",
        "-O",
        "bubbles.report_share=0.5",
    )
    assert [f for f in json.loads(quiet.stdout)["findings"] if f["rule"] == "bubbles"] == []
    bad = run_cli("analyze", str(trace), "-O", "bubbles=1")
    assert bad.returncode == 2 and "RULE.KEY=VALUE" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1


def test_rules_command_documents_every_rule() -> None:
    done = run_cli("rules", "--json")
    assert done.returncode == 0
    docs = {d["id"]: d for d in json.loads(done.stdout)}
    assert list(docs) == list(registry.available())
    for doc in docs.values():
        text = " ".join(doc["doc"].split())
        assert "Triggers:" in text and "Clean:" in text and "Why it matters" in text
        assert all(opt["help"] for opt in doc["options"].values())
    text = run_cli("rules").stdout
    assert "option bubbles.report_ns = 20000" in text


def test_every_rule_has_its_test_file() -> None:
    """Each built-in rule has ``tests/rules/test_<id>.py``: a fixture that triggers it and
    one that must not."""
    folder = Path(__file__).parent / "rules"
    missing = [r.id for r in registry.BUILTIN if not (folder / f"test_{r.id}.py").is_file()]
    assert registry.BUILTIN and missing == []


def test_summary_shows_steps_and_findings(trace: Path) -> None:
    done = run_cli("summary", str(trace), "--json")
    data = json.loads(done.stdout)
    assert len(data["step_metrics"]) == 3 and "bubbles" in {f["rule"] for f in data["findings"]}
    text = run_cli("summary", str(trace)).stdout
    assert "steps (decode step): 3 by marker" in text and "[bubbles]" in text


def test_patterns_file_on_the_command_line(trace: Path, tmp_path: Path) -> None:
    mine = tmp_path / "mine.toml"
    mine.write_text('[[fallback]]\nmatch = "nvjet_hsh_256x128"\n')  # the LM head GEMM
    done = run_cli("analyze", str(trace), "--json", "--rules", "fallback", "--patterns", str(mine))
    [found] = json.loads(done.stdout)["findings"]  # one LM head per step: one pattern
    assert (found["rule"], found["steps"]) == ("fallback", [0, 1, 2])
    assert found["pattern"] == "nvjet_hsh_256x128_64x4_2x1_v_bz_coopA_TNN"
    bad = tmp_path / "bad.toml"
    bad.write_text("[[category]]\nmatch = '('\n")
    done = run_cli("analyze", str(trace), "--patterns", str(bad))
    assert done.returncode == 2 and "bad regular expression" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
