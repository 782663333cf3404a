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
from tracekit.demo import demo_paths
from tracekit.reports.format import TOP_TERMINAL


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
        worst = {(f.rule, f.step) for f in analysis.findings}
        assert ("overlap", 4) in worst and ("bubbles", 4) in worst  # exposed all-to-all, bubble
        fallback = [f for f in analysis.findings if f.rule == "fallback"]
        assert {s for f in fallback for s in (f.steps or [f.step])} == set(range(8))
        assert len(analysis.steps) == 8 and analysis.steps.method == "marker"
    names = ascend.work.with_columns(pl.col("name").cast(pl.String))
    fused = names.filter(pl.col("is_fused_comm"))["name"].unique().to_list()
    assert any("MoeDistributeDispatchV2" in n for n in fused)
    assert any("MoeDistributeCombineV2" in n for n in fused)
    fallback = names.filter(pl.col("is_fallback"))
    assert fallback.height == 24 and set(fallback["engine"].cast(pl.String)) == {"ai_cpu"}
    deep_ep = nvidia.work.filter(pl.col("name").cast(pl.String).str.contains("deep_ep::"))
    assert deep_ep.height == 96 and deep_ep["is_comm"].all()


def test_demo_prints_both_traces_and_writes_the_page(tmp_path: Path) -> None:
    out = tmp_path / "demo.html"
    done = run_cli("demo", "-o", str(out))
    assert done.returncode == 0, done.stderr
    assert "demo.sqlite: nsys-sqlite" in done.stdout and "demo_ascend_pt: msprof" in done.stdout
    assert len(re.findall(r"^per step", done.stdout, re.MULTILINE)) == 2
    # per trace, the top findings by impact, then how many more: bounded
    blocks = done.stdout.split("findings: ")[1:]
    assert len(blocks) == 2
    for block, path in zip(blocks, demo_paths()):
        count = len(tracekit.analyze(tracekit.load(path)).findings)
        assert block.startswith(f"{count}, by impact")
        numbered = re.findall(r"^ ?(\d+)\. ", block, re.MULTILINE)
        assert numbered == [str(i) for i in range(1, min(count, TOP_TERMINAL) + 1)]
        if count > TOP_TERMINAL:
            assert (
                f"{count - TOP_TERMINAL} more finding" in block and "tracekit demo --json" in block
            )
    match = re.search(r'id="tracekit-data">(.*?)</script>', out.read_text())
    assert match is not None
    data = json.loads(match.group(1))
    assert [t["overview"]["format"] for t in data["traces"]] == ["nsys-sqlite", "msprof"]
    ascend = data["traces"][1]["kernels"]
    fused = {k["name"] for k in ascend if k["is_fused_comm"]}
    for op in ("MoeDistributeDispatchV2", "MoeDistributeCombineV2"):
        assert any(op in name for name in fused), fused
    assert any(k["is_fallback"] for k in data["traces"][1]["fallbacks"])
