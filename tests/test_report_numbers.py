"""`tracekit report` numbers against the analysis: the HTML payload, Markdown and JSON each
carry `Analysis.step_metrics` and the findings (ranked by impact) unchanged; outliers, default
steps, the drill-down events, kernels and the overlap matrix are checked against plain
recomputations."""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path

import polars as pl
import pytest

import tracekit
from tests.conftest import run_cli
from tracekit import stats
from tracekit.demo import demo_paths
from tracekit.metrics.columns import METRIC_COLUMNS
from tracekit.model import ranked
from tracekit.reports.format import fmt_ns, fmt_pct, steps_text
from tracekit.reports.markdown import step_columns

DEMOS = demo_paths()


@pytest.fixture(scope="module")
def analyses() -> list[tracekit.Analysis]:
    return [tracekit.analyze(tracekit.load(path)) for path in DEMOS]


def _plain(value: object) -> object:
    """``value`` as JSON gives it back (tuples become lists)."""
    return json.loads(json.dumps(value))


def embedded(html: str) -> dict:
    """The JSON payload of a report page."""
    match = re.search(r'<script type="application/json" id="tracekit-data">(.*?)</script>', html)
    assert match is not None
    return json.loads(match.group(1))


@pytest.fixture(scope="module")
def payload(tmp_path_factory: pytest.TempPathFactory) -> dict:
    out = tmp_path_factory.mktemp("report") / "both.html"
    done = run_cli(
        "report", *map(str, DEMOS), "-o", str(out), "--steps", "2,6", "--max-events", "40"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "" and "wrote" in done.stderr
    return embedded(out.read_text())


def test_html_steps_are_the_step_metrics(payload: dict, analyses: list) -> None:
    assert [t["overview"]["label"] for t in payload["traces"]] == ["demo.sqlite", "demo_ascend_pt"]
    for trace, analysis in zip(payload["traces"], analyses):
        metrics = analysis.step_metrics
        assert metrics.height == 8
        for column in METRIC_COLUMNS:
            assert trace["steps"][column] == metrics[column].to_list(), column
        totals = trace["overview"]["totals"]
        for key, value in totals.items():
            assert value == metrics[key].sum(), key
        # ranked by impact, each with its fields and how the page writes its steps
        want = _plain([f.to_dict() for f in ranked(analysis.findings)])
        page = trace["findings"]
        assert [{k: f[k] for k in w} for f, w in zip(page, want)] == want
        assert len(page) == trace["findings_total"] == len(analysis.findings)
        assert [f["steps_text"] for f in page] == [steps_text(f, range(8)) for f in want]


def _tukey(values: list[int]) -> list[bool]:
    q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
    low, high = q1 - 1.5 * (q3 - q1), q3 + 1.5 * (q3 - q1)
    return [v < low or v > high for v in values]


def test_outliers_and_default_steps(payload: dict, analyses: list) -> None:
    for trace, analysis in zip(payload["traces"], analyses):
        durations = analysis.step_metrics["dur"].to_list()
        assert trace["steps"]["outlier"] == _tukey(durations)
        order = sorted(range(len(durations)), key=lambda i: (durations[i], i))
        assert trace["defaults"] == {"first": 0, "median": order[3], "slowest": order[-1]}
    # the demo's planted 150 µs bubble makes step 4 the slowest, and an outlier, in both runs
    assert [t["defaults"]["slowest"] for t in payload["traces"]] == [4, 4]
    assert all(t["steps"]["outlier"][4] for t in payload["traces"])


def test_drill_down_events_are_the_longest_of_their_step(payload: dict, analyses: list) -> None:
    for trace, analysis in zip(payload["traces"], analyses):
        embedded_steps = {int(s) for s in trace["gantt"]}
        assert {2, 6} | set(trace["defaults"].values()) <= embedded_steps
        # the rows of the page's findings table open their worst step
        top = ranked(analysis.findings)[: trace["findings_shown"]]
        assert {f.step for f in top if f.step is not None} <= embedded_steps
        for step, part in trace["gantt"].items():
            rows = analysis.work.filter(pl.col("step") == int(step))
            [(_, _, start, dur)] = part["windows"]
            assert (start, dur) == analysis.windows.filter(pl.col("step") == int(step)).select(
                "start", "dur"
            ).row(0)
            assert part["total"] == rows.height and part["shown"] == 40 == len(part["dur"])
            longest = sorted(rows["dur"].to_list(), reverse=True)[:40]
            assert sorted(part["dur"], reverse=True) == longest
            names = {trace["strings"][i] for i in part["name"]}
            assert names <= set(rows["name"].cast(pl.String).to_list())
            own = set(zip(rows["ts"].to_list(), rows["dur"].to_list()))
            assert {(s + start, d) for s, d in zip(part["start"], part["dur"])} <= own


def test_kernels_match_the_summary(payload: dict, analyses: list) -> None:
    for trace, analysis in zip(payload["traces"], analyses):
        top = stats.summary(analysis.timeline, top=25)["top_kernels"]
        mine = trace["kernels"]
        assert [k["name"] for k in mine] == [k["name"] for k in top]
        for a, b in zip(mine, top):
            assert (a["count"], a["total_ns"]) == (b["count"], b["total_ns"])
            assert a["share"] == pytest.approx(b["share"]) and a["mean_ns"] == pytest.approx(
                b["mean_ns"]
            )
        fallback = analysis.work.filter(pl.col("is_fallback"))
        assert sum(k["total_ns"] for k in trace["fallbacks"]) == fallback["dur"].sum()
        assert sum(k["count"] for k in trace["fallbacks"]) == fallback.height == 24


def test_overlap_matrix_sums_the_stream_tables(payload: dict, analyses: list) -> None:
    for trace, analysis in zip(payload["traces"], analyses):
        [matrix] = trace["overlap"]
        streams = matrix["streams"]
        busy = analysis.stream_busy.group_by("stream").agg(pl.col("busy_ns").sum())
        assert dict(busy.iter_rows()) == {s: matrix["ns"][i][i] for i, s in enumerate(streams)}
        pairs = analysis.stream_overlap.group_by("stream_a", "stream_b").agg(
            pl.col("overlap_ns").sum()
        )
        for a, b, ns in pairs.iter_rows():
            i, j = streams.index(a), streams.index(b)
            assert matrix["ns"][i][j] == matrix["ns"][j][i] == ns


def _cell(key: str, value: object) -> str:
    if key in ("comm_overlap_ratio", "shaped_share"):
        return fmt_pct(value)  # type: ignore[arg-type]
    return fmt_ns(value) if key.endswith("_ns") or key == "dur" else str(value)  # type: ignore[arg-type]


def test_markdown_table_is_the_step_metrics(analyses: list) -> None:
    done = run_cli("report", *map(str, DEMOS), "--format", "md")
    assert done.returncode == 0, done.stderr
    sections = done.stdout.split("## tracekit: ")[1:]
    assert len(sections) == 2
    for section, analysis in zip(sections, analyses):
        steps_part = section.split("### Findings")[0]
        rows = [line for line in steps_part.splitlines() if re.match(r"^\| \d", line)]
        rows_of = analysis.step_metrics.to_dicts()
        want = [
            "| " + " | ".join(_cell(k, row[k]) for k in step_columns(rows_of)) + " |"
            for row in rows_of
        ]
        assert rows == want


def test_json_is_the_analysis(analyses: list, tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    done = run_cli("report", *map(str, DEMOS), "--format", "json", "-o", str(out))
    assert done.returncode == 0, done.stderr
    data = json.loads(out.read_text())
    for trace, analysis in zip(data["traces"], analyses):
        assert trace["step_metrics"] == analysis.step_metrics.to_dicts()
        # every finding, ranked by impact, with every field of Finding
        assert trace["findings"] == _plain([f.to_dict() for f in ranked(analysis.findings)])
        assert trace["steps"]["count"] == len(analysis.steps) == 8


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--steps", "99"], "no step 99"),
        (["--steps", "x"], "expected step numbers"),
        (["--format", "pdf"], "choose html, md or json"),
        (["-o", "/nonexistent/dir/r.html"], "existing folder"),
    ],
)
def test_bad_options_are_one_line(args: list[str], needle: str) -> None:
    done = run_cli("report", str(DEMOS[0]), *args)
    assert done.returncode == 2 and needle in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and done.stdout == ""


def test_refuses_to_overwrite_its_input(tmp_path: Path) -> None:
    trace = tmp_path / "t.sqlite"
    trace.write_bytes(DEMOS[0].read_bytes())
    done = run_cli("report", str(trace), "-o", str(trace))
    assert done.returncode == 2 and "overwrite" in done.stderr
    assert trace.read_bytes() == DEMOS[0].read_bytes()


def test_same_name_twice_gets_numbered_labels() -> None:
    done = run_cli("report", str(DEMOS[0]), str(DEMOS[0]), "--format", "json")
    assert done.returncode == 0, done.stderr
    labels = [t["label"] for t in json.loads(done.stdout)["traces"]]
    assert labels == ["demo.sqlite #1", "demo.sqlite #2"]
