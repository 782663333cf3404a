"""Notebook reprs (issue 33 part 4): ``Analysis``, ``Diff`` and the trend JSON render as small,
self-contained, escaped HTML with their real numbers, and a notebook runs them through a
Jupyter kernel (nbclient)."""

from __future__ import annotations

import html
import re
import statistics
from dataclasses import replace
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import tracekit
from fixtures.nsys_writer import write_nsys_sqlite
from fixtures.scenario import build_scenario
from fixtures.step_truth import step_truth
from tests.conftest import HOSTILE_FILE, HOSTILE_GPU, HOSTILE_NAMES, hostile_trace
from tracekit.analysis import Analysis
from tracekit.demo import demo_paths
from tracekit.diff import Diff, compare
from tracekit.trend.notebook import trend_html

LIMIT = 500_000  # bytes a repr may take
TAGS = {  # every element a repr may hold: no script, img, iframe, object, link …
    "div", "style", "h3", "h4", "p", "br", "span", "table", "thead", "tbody", "tr", "th", "td",
    "svg", "g", "title", "rect", "line", "polyline", "circle", "text",
}  # fmt: skip
ATTRIBUTES = {  # no event handler, src, href or anything else that runs or loads
    "class", "style", "title", "xmlns", "width", "height", "viewBox", "role", "x", "y", "x1",
    "x2", "y1", "y2", "fill", "stroke", "stroke-width", "stroke-dasharray", "points", "cx",
    "cy", "r", "font-size", "text-anchor",
}  # fmt: skip
SHAPE = {"steps": 16, "layers": 2}


def _safe(page: str) -> None:
    """Small, self-contained and inert: only :data:`TAGS`, no event handler, URL or script."""
    assert len(page.encode()) <= LIMIT
    tags = re.findall(r"<[^<>]*>", page)
    names = {re.match(r"</?([a-zA-Z][\w-]*)", t).group(1).lower() for t in tags}  # type: ignore[union-attr]
    assert names <= TAGS, names - TAGS
    # quoted values hold no quote (escaped), so blanking them leaves the attribute names
    bare = [re.sub(r'"[^"]*"', '""', t) for t in tags]
    attributes = {a for t in bare for a in re.findall(r"\s([\w:-]+)=", t)}
    assert attributes <= ATTRIBUTES, attributes - ATTRIBUTES
    assert all(re.fullmatch(r'</?[a-z0-9]+(\s[\w:-]+="")*\s*/?>', t, re.I) for t in bare)
    assert "<script" not in page.lower()


def _bars(page: str) -> int:
    return page.count('<g class="tk-bar">')


def _decode_median(analysis: Analysis) -> float:
    rows = analysis.step_metrics.filter(pl.col("phase") == "decode")
    return statistics.median(rows.group_by("step").agg(pl.col("dur").max())["dur"].to_list())


@pytest.fixture(scope="module")
def demo() -> list[Analysis]:
    return [tracekit.analyze(tracekit.load(p)) for p in demo_paths()]


@pytest.mark.parametrize("index", [0, 1], ids=["nsys", "msprof"])
def test_analysis_repr_shows_summary_checks_findings_and_steps(
    demo: list[Analysis], index: int
) -> None:
    analysis = demo[index]
    page = analysis._repr_html_()
    _safe(page)
    assert len(page) < 40_000  # a few tens of kB, nowhere near the budget
    source = demo_paths()[index].name
    assert f"<h3>tracekit: {source}</h3>" in page
    # 8 decode steps found by their markers; median and p90 of the slowest device per step
    assert "<td>steps</td><td>8 found by marker (confidence high)</td>" in page
    median = _decode_median(analysis)
    assert median == pytest.approx(1_964_025.5 if index == 0 else 1_969_248.0)
    p90 = analysis.summary_frame["p90_ns"][0]
    assert f"<td>8: median {median / 1e6:.2f} ms, p90 {p90 / 1e6:.2f} ms</td>" in page
    sm = analysis.step_metrics
    busy, idle = sm["busy_ns"].sum() / sm["dur"].sum(), sm["idle_ns"].sum() / sm["dur"].sum()
    assert busy + idle == pytest.approx(1.0)
    assert f"<td>{100 * busy:.1f}% / {100 * idle:.1f}%</td>" in page
    # every check with its status, the top findings with their impact and advice
    for check in analysis.checks:
        assert f'tk-badge tk-{"good" if check.status == "pass" else "warn"}"' in page
        assert f"<td>{html.escape(check.name)}</td>" in page
    top = analysis.findings[0]
    assert html.escape(top.title[:80]) in page and f"{top.impact_ns / 1e6:.2f} ms" in page
    assert html.escape(top.advice[:80]) in page
    # one bar per step, its tooltip with the step's wall time
    assert _bars(page) == 8
    first = sm.filter(pl.col("step") == 0)["dur"].max()
    assert f"<title>step 0: wall {first / 1e6:.2f} ms" in page


def test_analysis_repr_of_5000_steps_bins_to_200_bars(demo: list[Analysis]) -> None:
    base = demo[0]
    sm = base.step_metrics  # 8 steps tiled 625 times: steps 0..4999, copy k 1 µs·k longer
    tiled = pl.concat(
        [
            sm.with_columns(step=pl.col("step") + 8 * k, dur=pl.col("dur") + 1000 * k)
            for k in range(625)
        ]
    )
    page = replace(base, step_metrics=tiled)._repr_html_()
    _safe(page)
    assert _bars(page) == 200  # 25 steps per bar
    assert "5000 steps, 200 bars of up to 25 steps" in page
    dur = dict(zip(sm["step"], sm["dur"]))  # one device: the step's wall time

    def mean(steps: range) -> float:
        return statistics.fmean(dur[s % 8] + 1000 * (s // 8) for s in steps)

    first, last = mean(range(25)), mean(range(4975, 5000))
    assert first == pytest.approx(1_964_528.28)  # (3 × 15,705,562 + 24,000 + 1,972,521) / 25
    assert f"<title>steps 0–24 (25 steps, means): wall {first / 1e6:.2f} ms" in page
    assert f"<title>steps 4975–4999 (25 steps, means): wall {last / 1e6:.2f} ms" in page


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Analysis:
    return tracekit.analyze(tracekit.load(hostile_trace(tmp_path_factory.mktemp("hostile"))))


def test_hostile_names_appear_only_escaped(hostile: Analysis) -> None:
    page = hostile._repr_html_()
    _safe(page)
    assert html.escape(HOSTILE_GPU) in page and html.escape(HOSTILE_FILE) in page
    diff = compare([hostile], [hostile])
    page = diff._repr_html_()
    _safe(page)
    assert "no significant change" in page
    for name in HOSTILE_NAMES.values():  # full kernel keys, in the labels' hover titles
        assert f'title="{html.escape(name)}"' in page
        assert name not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


@pytest.fixture(scope="module")
def gemm_pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Diff, float, float]:
    """A clean base and a head whose GEMMs run 20 % longer (the scenario's truth kept)."""
    tmp = tmp_path_factory.mktemp("pair")
    base_sc, head_sc = build_scenario(**SHAPE), build_scenario(**SHAPE, gemm_scale=1.2)
    base = write_nsys_sqlite(base_sc.events, tmp / "base.sqlite")
    head = write_nsys_sqlite(head_sc.events, tmp / "head.sqlite")
    diff = compare([tracekit.analyze(tracekit.load(base))], [tracekit.analyze(tracekit.load(head))])
    gemm = statistics.fmean(r["cat_gemm_ns"] for r in step_truth(head_sc)) - statistics.fmean(
        r["cat_gemm_ns"] for r in step_truth(base_sc)
    )
    median = statistics.median(r["dur"] for r in step_truth(base_sc))
    return base, head, diff, gemm, median


def test_diff_repr_and_frames_show_the_gemm_regression(
    gemm_pair: tuple[Path, Path, Diff, float, float],
) -> None:
    _, _, diff, gemm_delta, base_median = gemm_pair
    page = diff._repr_html_()
    _safe(page)
    assert gemm_delta == pytest.approx(46_561.5)
    assert f"regression: gemm time per step +20.0% (+{gemm_delta / 1e3:.2f} µs)</div>" in page
    assert base_median == 733_373.5
    step = diff.step.estimate
    assert f'<td>decode step median</td><td class="r">{base_median / 1e3:.2f} µs</td>' in page
    assert f"95% CI +{step.lo / 1e3:.2f} µs … +{step.hi / 1e3:.2f} µs" in page
    # categories: one row each, gemm the regression
    cats = diff.categories_frame
    assert cats.height == len(diff.categories) == 8
    for name in cats["name"]:
        assert f"<td>{name}</td>" in page
    row = cats.filter(pl.col("name") == "gemm").row(0, named=True)
    assert row["status"] == "regression" and row["rel"] == pytest.approx(0.2, abs=5e-4)
    assert row["delta"] == pytest.approx(gemm_delta, abs=1e-6)
    assert cats.filter(pl.col("name") != "gemm")["delta"].abs().max() == 0
    # kernels: one row per change, detail flattened; the GEMM rows' deltas add up to gemm's
    kernels = diff.kernels_frame
    assert kernels.height == len(diff.kernels)
    assert {"name", "label", "base", "head", "delta", "rel", "lo", "hi", "status"} <= set(
        kernels.columns
    )
    assert {"category", "presence"} <= set(kernels.columns)
    moved = kernels.filter(pl.col("delta") != 0)
    assert set(moved["category"]) == {"gemm"} and moved.height == 6
    assert moved["delta"].sum() == pytest.approx(gemm_delta, rel=1e-9)
    assert (moved["rel"] - 0.2).abs().max() < 5e-4
    top = kernels.row(0, named=True)
    assert f"{top['base'] / 1e3:.2f} µs → {top['head'] / 1e3:.2f} µs" in page


def _run(i: int, label: str, median: float, cats: dict[str, float], vendor: str) -> dict[str, Any]:
    return {
        "index": i, "label": label, "source": f"/runs/{label}.sqlite", "format": "nsys",
        "vendor": vendor, "date": f"2026-11-0{i + 1}T02:00:00Z", "steps": 16,
        "steps_by": "marker", "phase": "decode",
        "step_ns": {"median": median, "lo": median - 4_000, "hi": median + 4_000},
        "categories": cats, "fallback_ns": cats.get("elementwise"), "exposed_comm_ns": None,
        "efficiency": None,
        "vs_baseline": {"delta_ns": median - 1_000_000, "rel": median / 1e6 - 1},
        "warnings": [],
    }  # fmt: skip


def _move(
    runs: list[dict[str, Any]], a: int, status: str, changes: list[dict[str, Any]], **more: Any
) -> dict[str, Any]:
    """The move runs[a] -> runs[a + 1] (delta and rel from their medians)."""
    before, after = runs[a]["step_ns"]["median"], runs[a + 1]["step_ns"]["median"]
    delta = after - before
    significant = status in ("regression", "improvement")
    return {
        "from": a, "to": a + 1, "status": status, "significant": significant,
        "delta_ns": delta, "rel": delta / before, "lo": delta - 3_000, "hi": delta + 3_000,
        "explained_share": sum(c["share"] or 0 for c in changes), "changes": changes,
        "matched": more.get("matched", []), "warnings": more.get("warnings", []),
    }  # fmt: skip


HOSTILE = '"><img src=x onerror=alert(1)>'
FALLBACK = {
    "kind": "fallback", "delta_ns": -98_000, "share": 0.98, "matched_by": "order",
    "text": "fallback chain (3 kernels) replaced by vllm::act_and_mul_kernel",
    "category": "activation", "base_names": ["a", "b", "c"], "head_names": ["act_and_mul"],
}  # fmt: skip
COMM = {
    "kind": "collective", "delta_ns": 57_000, "share": 0.95, "matched_by": "name",
    "text": f"all-reduce <script>alert(1)</script>{HOSTILE} slower", "category": "comm",
    "base_names": ["ncclAllReduce"], "head_names": ["ncclAllReduce"],
}  # fmt: skip
RENAME = {
    "label": "gemm · aten::mm", "matched_by": "function", "delta_ns": 0.0,
    "base_names": ["gemm_v1<script>"], "head_names": ["gemm_v2"],
}  # fmt: skip


def trend_data() -> dict[str, Any]:
    """Contract B by hand: 6 runs; a fallback chain replaced in run 3 (improvement), a
    rename in run 4 (no move), a communication regression in run 5."""
    base = {"gemm": 400_000.0, "comm": 200_000.0, "activation": 20_000.0}
    runs = [
        _run(0, "nightly-01", 1_000_000, {**base, "elementwise": 100_000}, "nvidia"),
        _run(1, "nightly-02", 1_001_000, {**base, "elementwise": 100_000}, "nvidia"),
        _run(2, "nightly-03", 900_000, base, "nvidia"),
        _run(3, "nightly-04", 900_500, base, "nvidia"),
        _run(4, "nightly-05", 960_000, {**base, "comm": 257_000}, "nvidia"),
        _run(5, f"nightly-06{HOSTILE}", 960_200, {**base, "comm": 257_000}, "amd"),
    ]
    moves = [
        _move(runs, 0, "unchanged", []),
        _move(runs, 1, "improvement", [FALLBACK]),
        _move(runs, 2, "within threshold", [], matched=[RENAME]),
        _move(runs, 3, "regression", [COMM]),
        _move(runs, 4, "not significant", [], warnings=["vendor switch: nvidia → amd"]),
    ]
    return {
        "kind": "trend", "baseline": 0, "threshold": 0.05, "min_impact": 0.01,
        "confidence": 0.95, "ordered_by": "label", "runs": runs, "moves": moves,
        "warnings": ["run nightly-06 was captured on another platform"],
    }  # fmt: skip


def test_trend_repr_marks_the_two_significant_moves() -> None:
    data = trend_data()
    page = trend_html(data)
    _safe(page)
    assert page.count('<g class="tk-run">') == 6 and page.count('<g class="tk-move">') == 2
    moves = re.findall(r'<g class="tk-move"><title>([^<]*)</title>', page)
    assert moves[0] == html.escape(
        "nightly-02 → nightly-03: improvement -101.00 µs (-10.1%); fallback chain (3 kernels)"
        " replaced by vllm::act_and_mul_kernel (-98.00 µs, 98.0% of the move)"
    )
    assert moves[1].startswith("nightly-04 → nightly-05: regression +59.50 µs (+6.6%); all-reduce")
    assert "95.0% of the move" in moves[1] and "&lt;script&gt;alert(1)&lt;/script&gt;" in moves[1]
    # runs table: 6 rows, baseline marked, median [interval] and change vs baseline
    assert page.count("(baseline)</td>") == 1
    assert "<td>nightly-01 (baseline)</td>" in page
    assert '<td class="r">900.00 µs</td><td class="r">[896.00 µs, 904.00 µs]</td>' in page
    assert '<td class="r">-100.00 µs (-10.0%)</td>' in page
    assert html.escape(f"nightly-06{HOSTILE}") in page
    # moves table: all five, the explained share only on the significant ones
    assert page.count('<span class="tk-badge tk-good">improvement</span>') == 1
    assert page.count('<span class="tk-badge tk-bad">regression</span>') == 1
    assert '<td class="r">98.0%</td>' in page and '<td class="r">95.0%</td>' in page
    assert "nightly-03 → nightly-04: matched by role" in page
    assert "<td>gemm_v1&lt;script&gt;</td><td>gemm_v2</td>" in page
    assert "vendor switch: nvidia → amd" in page
    assert "6 runs, 2 significant move(s)" in page
    assert _bars(page) == 6  # the category stack, one bar per run


NOTEBOOK = [
    "import tracekit\nfrom tracekit.demo import demo_paths\n"
    "a = tracekit.analyze(tracekit.load(demo_paths()[0]))\na",
    "from tracekit.diff import compare\n"
    "d = compare([tracekit.analyze(tracekit.load('base.sqlite'))],"
    " [tracekit.analyze(tracekit.load('head.sqlite'))])\nd",
    "d.kernels_frame.select('label', 'category', 'delta', 'status').head(3)",
]


def test_notebook_runs_the_reprs_in_a_kernel(
    gemm_pair: tuple[Path, Path, Diff, float, float],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import nbclient  # the test extra installs nbclient, nbformat and ipykernel
    import nbformat
    from jupyter_client.manager import KernelManager

    base, head, _, gemm_delta, _ = gemm_pair
    for path in (base, head):
        (tmp_path / path.name).write_bytes(path.read_bytes())
    monkeypatch.chdir(tmp_path)  # the ipc transport writes its socket files here
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(src) for src in NOTEBOOK]
    km = KernelManager(kernel_name="python3", transport="ipc")
    try:
        nbclient.NotebookClient(
            nb, km=km, timeout=120, resources={"metadata": {"path": str(tmp_path)}}
        ).execute()
    finally:  # a kernel manager passed in is the caller's to shut down
        if km.has_kernel:
            km.shutdown_kernel(now=True)
    pages = [c.outputs[-1]["data"]["text/html"] for c in nb.cells]
    assert "<h3>tracekit: demo.sqlite</h3>" in pages[0]
    assert "8 found by marker (confidence high)" in pages[0] and _bars(pages[0]) == 8
    assert f"regression: gemm time per step +20.0% (+{gemm_delta / 1e3:.2f} µs)" in pages[1]
    # the polars frame's own HTML: three GEMM rows, their rise and status
    assert "<table" in pages[2] and pages[2].count("<td>&quot;gemm&quot;</td>") == 3
    assert pages[2].count("&quot;regression&quot;") >= 1
    for page in pages[:2]:
        _safe(page)
