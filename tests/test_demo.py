"""`tracekit demo`: the bundled traces are what the fixture writers produce, carry the planted
faults on both vendors, and the command prints both and writes their page."""

from __future__ import annotations

import json
import re
from pathlib import Path

import polars as pl

import tracekit
from fixtures.make_demo import ASCEND_NAME, make_ascend_demo
from tests.conftest import run_cli
from tracekit.demo import demo_paths, step_ranges


def test_bundled_ascend_demo_is_what_make_demo_writes(tmp_path: Path) -> None:
    bundled = demo_paths()[1]
    fresh = make_ascend_demo(tmp_path)
    assert fresh.name == bundled.name == ASCEND_NAME
    files = sorted(p.relative_to(bundled) for p in bundled.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(fresh) for p in fresh.rglob("*") if p.is_file())
    for rel in files:
        assert (bundled / rel).read_bytes() == (fresh / rel).read_bytes(), rel


def test_both_demos_carry_the_planted_faults() -> None:
    nvidia, ascend = (tracekit.analyze(tracekit.load(p)) for p in demo_paths())
    for analysis in (nvidia, ascend):
        rules = {(f.rule, f.step) for f in analysis.findings}
        assert ("overlap", 4) in rules and ("bubbles", 4) in rules  # exposed all-to-all, bubble
        assert {s for r, s in rules if r == "fallback"} == set(range(8))
        assert len(analysis.steps) == 8 and analysis.steps.method == "marker"
    names = ascend.work.with_columns(pl.col("name").cast(pl.String))
    fused = names.filter(pl.col("is_fused_comm"))["name"].unique().to_list()
    assert any("MoeDistributeDispatchV2" in n for n in fused)
    assert any("MoeDistributeCombineV2" in n for n in fused)
    fallback = names.filter(pl.col("is_fallback"))
    assert fallback.height == 24 and set(fallback["engine"].cast(pl.String)) == {"ai_cpu"}
    deep_ep = nvidia.work.filter(pl.col("name").cast(pl.String).str.contains("deep_ep::"))
    assert deep_ep.height == 96 and deep_ep["is_comm"].all()


def test_step_ranges() -> None:
    assert step_ranges([4, 0, 1, 2, 7, 6]) == "0-2, 4, 6-7"
    assert step_ranges([]) == ""


def test_demo_prints_both_traces_and_writes_the_page(tmp_path: Path) -> None:
    out = tmp_path / "demo.html"
    done = run_cli("demo", "-o", str(out))
    assert done.returncode == 0, done.stderr
    assert "demo.sqlite: nsys-sqlite" in done.stdout and "demo_ascend_pt: msprof" in done.stdout
    assert done.stdout.count("per step") == 2 and "[fallback] 8×" in done.stdout
    match = re.search(r'id="tracekit-data">(.*?)</script>', out.read_text())
    assert match is not None
    data = json.loads(match.group(1))
    assert [t["overview"]["format"] for t in data["traces"]] == ["nsys-sqlite", "msprof"]
    ascend = data["traces"][1]["kernels"]
    fused = {k["name"] for k in ascend if k["is_fused_comm"]}
    for op in ("MoeDistributeDispatchV2", "MoeDistributeCombineV2"):
        assert any(op in name for name in fused), fused
    assert any(k["is_fallback"] for k in data["traces"][1]["fallbacks"])
