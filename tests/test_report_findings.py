"""Findings as a ranked, bounded to-do list in every output: the steps text, the terminal and
Markdown lists (top N by impact, then "N more"), the HTML payload (ranked, steps written
out, evidence names that are device events) and the drill-down steps it embeds. Findings are
built here, so these tests hold whatever the rules emit."""

from __future__ import annotations

import io
import random
import re
from dataclasses import replace

import polars as pl
import pytest
from rich.console import Console

import tracekit
from tracekit.demo import demo_paths
from tracekit.model import FOLDED, Finding, ranked
from tracekit.reports import terminal
from tracekit.reports.format import ranked_dicts, step_ranges, steps_text
from tracekit.reports.html_findings import MAX_FINDINGS, SHOWN, page_findings
from tracekit.reports.html_steps import embedded_steps
from tracekit.reports.markdown import findings_table, md_text, render_markdown
from tracekit.reports.steps_terminal import render_analysis, render_findings

EVIL = "<img src=x onerror=alert(1)>|`x`*b*\x1b[31m"
ALL = list(range(40))


def finding(i: int, impact: int, steps: list[int], **extra: object) -> Finding:
    """A pattern finding whose worst step is the last of ``steps``."""
    return Finding(
        rule=extra.pop("rule", "fallback"),  # type: ignore[arg-type]
        severity=extra.pop("severity", "warning"),  # type: ignore[arg-type]
        title=f"pattern {i} {EVIL}",
        detail=f"detail {i}",
        step=steps[-1] if steps else None,
        rank=0,
        device=0,
        pattern=f"p{i}",
        steps=steps,
        ranks=[0],
        impact_ns=impact,
        impact_share=impact / 80_000_000,
        advice=f"Fuse chain {i} {EVIL}.",
        **extra,  # type: ignore[arg-type]
    )


def many(n: int, seed: int = 0) -> list[Finding]:
    """``n`` findings with distinct impacts (finding i costs (n - i) µs), shuffled."""
    out = [finding(i, (n - i) * 1_000, [i % 40, (i + 3) % 40]) for i in range(n)]
    random.Random(seed).shuffle(out)
    return out


def _plain(renderable: object, width: int = 160) -> str:
    out = io.StringIO()
    terminal.print_renderable(renderable, Console(file=out, width=width, color_system=None))
    return out.getvalue()


def test_steps_text_every_step_ranges_and_cut() -> None:
    steps = [3, 4, 5, 9, *range(12, 21)]
    assert steps_text({"steps": steps}, ALL) == "3–5, 9, 12–20 (13 of 40 steps)"
    assert steps_text({"steps": ALL}, ALL) == "every step"
    assert steps_text({"steps": [], "step": 7}, ALL) == "7 (1 of 40 steps)"  # per-step finding
    assert steps_text({"steps": [], "step": None}, ALL) == "whole trace"
    assert steps_text({"steps": [0]}, [0]) == "every step"
    assert step_ranges([4, 0, 1, 2, 7, 6]) == "0–2, 4, 6–7" and step_ranges([]) == ""
    scattered = list(range(0, 100, 2))  # 50 runs: the first ones, then the last
    assert step_ranges(scattered) == "0, 2, 4, 6, 8, 10, 12, …, 98"
    assert steps_text({"steps": scattered}, range(100)).endswith("(50 of 100 steps)")


def test_ranked_dicts_is_the_model_order() -> None:
    folded = replace(finding(97, 10**9, [1]), pattern=FOLDED)  # folds small ones: ranks last
    found = [*many(12), finding(99, 5_000, [1], severity="error"), finding(98, 5_000, [1]), folded]
    want = [(f.rule, f.pattern) for f in ranked(found)]
    assert [(f["rule"], f["pattern"]) for f in ranked_dicts([f.to_dict() for f in found])] == want
    assert want[:3] == [("fallback", "p0"), ("fallback", "p1"), ("fallback", "p2")]
    assert want.index(("fallback", "p99")) < want.index(("fallback", "p98"))  # error first
    assert want[-1] == ("fallback", FOLDED)


def test_terminal_lists_the_top_five_by_impact_then_how_many_more() -> None:
    text = _plain(render_findings([f.to_dict() for f in many(12)], ALL))
    lines = text.splitlines()
    assert lines[0] == "findings: 12, by impact (the most fixing each could save over the trace)"
    numbered = [line for line in lines if re.match(r"^ ?\d+\. ", line)]
    assert [line.split(".")[0].strip() for line in numbered] == ["1", "2", "3", "4", "5"]
    assert numbered[0].startswith(" 1. 12.00 µs (0.0%)") and "[fallback] pattern 0 " in numbered[0]
    assert "pattern 4 " in numbered[4] and "pattern 5 " not in text
    assert lines[2:4] == ["    detail 0", "    steps: 0, 3 (2 of 40 steps); worst: step 3"]
    assert "    → Fuse chain 0 <img src=x onerror=alert(1)>|`x`*b*\ufffd[31m." in lines
    assert lines[-1] == "7 more findings (--format json or tracekit report lists every one)"
    assert "\x1b" not in text


def test_terminal_list_is_bounded_however_many_findings() -> None:
    small = _plain(render_findings([f.to_dict() for f in many(6)], ALL))
    large = _plain(render_findings([f.to_dict() for f in many(3_000)], ALL))
    assert len(large.splitlines()) == len(small.splitlines())
    assert large.splitlines()[-1].startswith("2995 more findings")
    assert _plain(render_findings([], ALL)).strip() == "findings: none"


def test_markdown_table_of_the_top_ten_escaped() -> None:
    lines = findings_table([f.to_dict() for f in many(15)], ALL)
    assert lines[:2] == [
        "| # | rule | finding | steps | impact | share | advice |",
        "|---:|---|---|---|---:|---:|---|",
    ]
    rows = lines[2:12]
    assert [row.split(" | ")[0] for row in rows] == [f"| {i}" for i in range(1, 11)]
    assert all(len(re.split(r"(?<!\\)\|", row)) == 9 for row in rows)  # no cell broken by a name
    first = rows[0]
    assert f"| fallback (warning) | **{md_text('pattern 0 ' + EVIL)}**<br>detail 0 |" in first
    assert "| 0, 3 (2 of 40 steps)<br>worst: step 3 | 15.00 µs | 0.0% |" in first
    assert "<img" not in "\n".join(lines) and "&lt;img" in first
    assert lines[12:] == ["", "5 more findings (--format json lists every one)"]
    assert findings_table([], ALL) == ["No findings."]


@pytest.fixture(scope="module")
def demo() -> tracekit.Analysis:
    """The bundled nsys demo without rules: the tests give it their own findings."""
    return tracekit.analyze(tracekit.load(demo_paths()[0]), [])


def test_analysis_outputs_rank_constructed_findings(demo: tracekit.Analysis) -> None:
    data = demo.to_dict()
    data["findings"] = [f.to_dict() for f in many(30)]
    data["findings"].append(finding(100, 10**9, list(range(8)), rule="bubbles").to_dict())
    text = _plain(render_analysis(data, 160))
    top = text.split("findings: 31")[1].splitlines()
    assert top[1].startswith(" 1. 1.000 s (1250.0%)") and "[bubbles] pattern 100" in top[1]
    assert top[3] == "    steps: every step; worst: step 7"
    assert top[-1].startswith("26 more findings")
    md = render_markdown(data)
    assert (
        "| 1 | bubbles (warning) | **pattern 100 " in md and "| every step<br>worst: step 7 |" in md
    )
    assert "21 more findings" in md


def test_html_findings_are_ranked_with_steps_and_event_names(demo: tracekit.Analysis) -> None:
    kernel = str(demo.work.filter(pl.col("step") == 3)["name"].cast(pl.String)[0])
    found = many(MAX_FINDINGS + 20)
    top = ranked(found)[0]
    top.evidence = {"names": [kernel, "not a kernel"], "kernels": [{"name": kernel, "ns": 1}]}
    listed = page_findings(found, demo.work, list(range(8)))
    assert len(listed) == MAX_FINDINGS
    assert [f["pattern"] for f in listed] == [f.pattern for f in ranked(found)][:MAX_FINDINGS]
    assert listed[0]["names"] == [kernel] and all(f["names"] == [] for f in listed[1:])
    assert listed[0]["steps_text"] == "0, 3 (2 of 8 steps)"
    assert listed[0]["worst_text"] == "worst: step 3" and listed[0]["impact_ns"] == 220_000


def test_worst_steps_of_the_top_findings_are_embedded(demo: tracekit.Analysis) -> None:
    metrics = demo.step_metrics
    found = [finding(i, 1_000 * (10 - i), [i % 8]) for i in range(8)]
    chosen = embedded_steps(metrics, found, [], limit=3, top=SHOWN)
    assert set(range(8)) <= set(chosen)  # beyond the limit: every worst step of the top ten
    low = [finding(0, 10, [6]), *(finding(i, 1_000, [1]) for i in range(1, 11))]
    assert 6 not in embedded_steps(metrics, low, [], limit=3, top=SHOWN)  # 11th by impact
