"""Markdown output: the numbers of step_metrics, and trace names that cannot inject HTML or
break the table."""

from __future__ import annotations

import json
import re
from pathlib import Path

import polars as pl
import pytest

import tracekit
from fixtures.nsys_writer import write_nsys_sqlite
from fixtures.scenario import build_scenario
from tests.conftest import run_cli
from tracekit.names import short_name
from tracekit.reports.format import fmt_ns, fmt_pct
from tracekit.reports.markdown import md_text, step_columns

EVIL = (
    'at::native::vectorized_elementwise_kernel|`x`*b*&"q"<script>alert(1)</script> "q" | `x`'
    " </script> *b*"
)


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    sc = build_scenario(steps=3, layers=2, fallback_kernel=True)
    evil = pl.when(pl.col("name").str.contains("at::native")).then(pl.lit(EVIL))
    events = sc.events.with_columns(name=evil.otherwise(pl.col("name")))
    return write_nsys_sqlite(events, tmp_path_factory.mktemp("md") / "t.sqlite")


def test_md_text_escapes_html_and_markdown() -> None:
    text = md_text(EVIL)
    assert "<" not in text and ">" not in text and '"' not in text
    assert "&quot;q&quot;&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert re.search(r"(?<!\\)[|`*\[\]]", text) is None  # every table/markup char escaped
    assert md_text("a\x1b[31mb\nc") == "a\ufffd\\[31mb c"


def test_markdown_numbers_equal_step_metrics(trace: Path) -> None:
    done = run_cli("analyze", str(trace), "--format", "md", "--rules", "fallback")
    assert done.returncode == 0, done.stderr
    md = done.stdout
    metrics = tracekit.analyze(tracekit.load(trace), ["fallback"]).step_metrics.to_dicts()
    steps_part = md.split("### Findings")[0]
    rows = [line for line in steps_part.splitlines() if re.match(r"^\| \d", line)]
    assert len(rows) == len(metrics) == 3
    for line, m in zip(rows, metrics):
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        assert len(cells) == len(step_columns(metrics))
        for cell, key in zip(cells, step_columns(metrics)):
            value = m[key]
            if value is None:
                want = "-"
            elif key == "comm_overlap_ratio":
                want = fmt_pct(value)
            elif key.endswith("_ns") or key in ("dur", "ns_per_token"):
                want = fmt_ns(value)
            else:
                want = str(value)
            assert cell == want, key
    # the evil name, shortened to its function name, escaped in the findings table
    assert "<script" not in md and md_text(short_name(EVIL)) in md
    assert md_text(short_name(EVIL)).endswith(r"kernel\|\`x\`\*b\*&amp;&quot;q&quot;")
    rows = [line for line in md.split("### Findings")[1].splitlines() if line.startswith("| 1 ")]
    assert len(rows) == 1 and len(re.split(r"(?<!\\)\|", rows[0])) == 9
    findings = tracekit.analyze(tracekit.load(trace), ["fallback"]).findings
    table = md.split("### Findings")[1]
    assert 0 < table.count("| fallback (warning) |") == min(len(findings), 10)
    covered = {s for f in findings for s in (f.steps or [f.step])}
    assert covered == {0, 1, 2}  # the fallback chain runs in every step


def test_summary_and_json_formats(trace: Path) -> None:
    md = run_cli("summary", str(trace), "--format", "md").stdout
    assert md.startswith("## tracekit: t.sqlite") and "### Findings" in md
    data = json.loads(run_cli("summary", str(trace), "--format", "json").stdout)
    assert len(data["step_metrics"]) == 3 and "top_kernels" in data
    bad = run_cli("analyze", str(trace), "--format", "html")
    assert bad.returncode == 2 and "choose term, md or json" in bad.stderr


def test_terminal_step_bar_and_no_color(trace: Path) -> None:
    from tracekit.reports.steps_terminal import step_bar

    row = {"dur": 1000, "compute_ns": 500, "exposed_comm_ns": 250, "busy_ns": 875}
    assert step_bar(row, width=8).plain == "████▓▓▒·"
    assert step_bar({"dur": 0}).plain == ""
    colored = run_cli("analyze", str(trace), env={"FORCE_COLOR": "1", "COLUMNS": "160"})
    assert "\x1b[" in colored.stdout and "████" in colored.stdout
    plain = run_cli("--no-color", "analyze", str(trace), env={"FORCE_COLOR": "1"})
    colour = re.compile(r"\x1b\[(?:[0-9;]*;)?(?:3[0-8]|9[0-7])[;m]")  # a foreground colour
    assert colour.search(colored.stdout)
    assert plain.returncode == 0 and not colour.search(plain.stdout)
