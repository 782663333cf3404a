"""The HTML report in a real browser: headless Chromium (Debian's ``chromium``, driven by
Playwright with ``executable_path``) opens it from a file with networking disabled.

The report compares two traces side by side: an nsys export whose kernel, GPU and file names
carry script injections (tests.conftest.hostile_trace) and the bundled Ascend demo.
"""

from __future__ import annotations

import base64
import json
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import tracekit
from tests.browser import Opened, launched, open_offline
from tests.conftest import HOSTILE_FILE, HOSTILE_GPU, HOSTILE_NAMES, hostile_trace, run_cli
from tracekit.demo import demo_paths
from tracekit.model import ranked


@pytest.fixture(scope="module")
def browser() -> Any:
    yield from launched()


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return [hostile_trace(tmp_path_factory.mktemp("hostile")), demo_paths()[1]]


@pytest.fixture(scope="module")
def report(traces: list[Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("report") / "report.html"
    done = run_cli("report", *map(str, traces), "-o", str(out))
    assert done.returncode == 0, done.stderr
    return out


def open_report(browser: Any, path: Path) -> Opened:
    """Open ``path`` offline and wait for the figures (the page animates as it would)."""
    return open_offline(browser, path, reduced_motion=False)


@pytest.fixture(scope="module")
def opened(browser: Any, report: Path) -> Opened:
    return open_report(browser, report)


def test_opens_offline_without_errors_and_every_plot_is_drawn(opened: Opened) -> None:
    page = opened.page
    assert opened.errors == [] and opened.dialogs == [] and opened.outside == []
    plots = page.eval_on_selector_all(
        ".plot",
        "els => els.map(e => [e.id, e.classList.contains('js-plotly-plot'),"
        " e.querySelectorAll('svg.main-svg').length])",
    )
    # 4 step figures, one overlap matrix per device (2), one Gantt per trace (2) and the
    # roofline chart of the Ascend demo (it records shapes; the nsys trace does not)
    assert len(plots) == 9
    assert all(is_plot and svgs > 0 for _, is_plot, svgs in plots), plots


def _gantt_bars(page: Any, index: int) -> list[Any]:
    return page.evaluate(
        "i => document.getElementById('gantt-' + i).data.map(t => [t.name, t.base, t.x])", index
    )


def test_step_selector_changes_the_gantt(opened: Opened, traces: list[Path]) -> None:
    page = opened.page
    metrics = tracekit.analyze(tracekit.load(traces[0])).step_metrics
    first = int(metrics["step"].min())
    assert page.get_attribute("#gantt-0", "data-step") == str(first)
    before = _gantt_bars(page, 0)
    other = int(metrics["step"].max())
    page.select_option("#step-select-0", str(other))
    page.wait_for_selector(f"#gantt-0[data-step='{other}']")
    after = _gantt_bars(page, 0)
    assert after and after != before
    # the drawn events are the step's own device rows: count and summed duration (µs)
    work = tracekit.analyze(tracekit.load(traces[0])).work.filter(pl.col("step") == other)
    assert sum(len(x) for _, _, x in after) == work.height
    assert sum(sum(x) for _, _, x in after) == pytest.approx(work["dur"].sum() / 1e3)
    page.click("#gantt-0 ~ * button[data-preset='first'], .card button[data-preset='first']")
    page.wait_for_selector(f"#gantt-0[data-step='{first}']")
    assert _gantt_bars(page, 0) == before


def test_step_bars_are_the_step_metrics(opened: Opened, traces: list[Path]) -> None:
    metrics = tracekit.analyze(tracekit.load(traces[1])).step_metrics
    drawn = opened.page.evaluate(
        "() => document.getElementById('plot-time').data"
        ".filter(t => t.xaxis === 'x2').map(t => [t.name, t.x, t.y])"
    )
    by_name = {name: (x, y) for name, x, y in drawn}
    assert by_name["compute"][0] == metrics["step"].to_list()
    assert by_name["compute"][1] == pytest.approx((metrics["compute_ns"] / 1e6).to_list())
    assert by_name["exposed communication"][1] == pytest.approx(
        (metrics["exposed_comm_ns"] / 1e6).to_list()
    )
    assert by_name["idle"][1] == pytest.approx((metrics["idle_ns"] / 1e6).to_list())


def test_hostile_names_render_as_text(opened: Opened) -> None:
    page = opened.page
    # hover the injected communication kernel in the Gantt: plotly draws its name as text
    page.evaluate(
        """() => {
            const gd = document.getElementById('gantt-0');
            const curve = gd.data.findIndex(t => t.customdata.some(c => c[0].includes('onerror')));
            const point = gd.data[curve].customdata.findIndex(c => c[0].includes('onerror'));
            Plotly.Fx.hover(gd, [{curveNumber: curve, pointNumber: point}], 'xy');
        }"""
    )
    hover = page.text_content("#gantt-0 .hovertext")
    assert hover is not None and "deep_ep::<b>x</b><img src=x onerror=alert(2)>dispatch" in hover
    assert opened.dialogs == [] and opened.errors == []
    assert page.evaluate("() => document.querySelectorAll('script').length") == 3
    injected = "img, iframe, object, embed, [onerror], [onload], main b, header b"
    assert page.evaluate(f"() => document.querySelectorAll('{injected}').length") == 0
    text = page.inner_text("body")
    assert HOSTILE_GPU in text and HOSTILE_FILE in text
    assert "deep_ep::<b>x</b><img src=x onerror=alert(2)>dispatch" in text  # finding detail
    titles = page.eval_on_selector_all(
        "#kernel-tables td.name span", "els => els.map(e => e.title)"
    )
    assert set(HOSTILE_NAMES.values()) <= set(titles)
    legend = page.text_content("#plot-durations .legend")
    assert legend is not None and HOSTILE_FILE in legend


def _colours(page: Any, png: bytes) -> tuple[int, float]:
    """Distinct colours and the share of non-white pixels of a PNG, decoded by the browser."""
    data = base64.b64encode(png).decode()
    return tuple(
        page.evaluate(
            """async (data) => {
            const img = new Image(); img.src = 'data:image/png;base64,' + data;
            await img.decode();
            const c = document.createElement('canvas'); c.width = img.width; c.height = img.height;
            const g = c.getContext('2d'); g.drawImage(img, 0, 0);
            const px = g.getImageData(0, 0, c.width, c.height).data, seen = new Set();
            let ink = 0;
            for (let i = 0; i < px.length; i += 4) {
                seen.add((px[i] << 16) | (px[i + 1] << 8) | px[i + 2]);
                if (px[i] + px[i + 1] + px[i + 2] < 720) ink++;
            }
            return [seen.size, ink / (px.length / 4)];
        }""",
            data,
        )
    )


def test_screenshot_is_not_blank(browser: Any, opened: Opened, tmp_path: Path) -> None:
    shot = tmp_path / "report.png"
    opened.page.screenshot(path=str(shot), full_page=True)
    blank = browser.new_page()
    try:
        colours, ink = _colours(blank, shot.read_bytes())
    finally:
        blank.close()
    assert colours > 200 and ink > 0.05, (colours, ink)


def test_payload_parses_with_every_name_intact(report: Path) -> None:
    text = report.read_text()
    _, _, rest = text.partition('<script type="application/json" id="tracekit-data">')
    payload, _, _ = rest.partition("</script>")
    data = json.loads(payload)
    names = set(data["traces"][0]["strings"])
    assert set(HOSTILE_NAMES.values()) <= names
    assert "<img" not in payload and "</script" not in payload


def test_low_confidence_is_the_first_thing_on_the_page(browser: Any, tmp_path: Path) -> None:
    """A trace whose steps were found with low confidence: the note is the first element of
    the page's main part, above the overview, and names the trace."""
    from tests.test_step_outputs import low_confidence_trace

    trace = low_confidence_trace(tmp_path / "giant.parquet")
    out = tmp_path / "low.html"
    assert run_cli("report", str(trace), str(demo_paths()[1]), "-o", str(out)).returncode == 0
    opened = open_report(browser, out)
    assert opened.errors == []
    first = opened.page.evaluate(
        "() => { const m = document.querySelector('main').firstElementChild;"
        " return [m.id, m.children.length, m.innerText]; }"
    )
    assert first[0] == "confidence" and first[1] == 1
    assert first[2].startswith("⚠ giant.parquet: low confidence: steps found by gaps")


def _rows(page: Any, trace: int) -> list[list[str]]:
    """The visible rows of a trace's findings table: rank, data-step and the title."""
    return page.eval_on_selector_all(
        f"#findings-{trace} > table.findings tr.finding-row",
        "rows => rows.map(r => [r.cells[0].textContent, r.dataset.step,"
        " r.querySelector('.title').textContent])",
    )


def _open_finding(page: Any, trace: int, index: int, step: int) -> str:
    """Click a finding's row; wait for the drill-down of its worst step; the focus text."""
    page.click(f"#findings-{trace} tr.finding-row[data-finding='{index}']")
    page.wait_for_selector(f"#gantt-{trace}[data-step='{step}'][data-finding='{index}']")
    assert page.is_visible(f"#finding-focus-{trace}")
    return page.inner_text(f"#finding-focus-{trace}")


def test_finding_rows_are_ranked_and_open_the_worst_step(
    opened: Opened, traces: list[Path]
) -> None:
    page = opened.page
    for trace, path in enumerate(traces):
        found = ranked(tracekit.analyze(tracekit.load(path)).findings)
        rows = _rows(page, trace)
        assert [r[0] for r in rows] == [str(i) for i in range(1, min(len(found), 10) + 1)]
        assert [r[2] for r in rows] == [f.title for f in found[:10]]
        # the section fits in one screen (the viewport is 900 px high)
        height = page.eval_on_selector(
            f"#findings-{trace}", "e => e.getBoundingClientRect().height"
        )
        assert 0 < height <= 900, (trace, height)
    found = ranked(tracekit.analyze(tracekit.load(traces[1])).findings)
    first = next(i for i, f in enumerate(found[:10]) if f.step is not None)
    focus = _open_finding(page, 1, first, found[first].step)  # type: ignore[arg-type]
    assert found[first].title in focus and f"#{first + 1} [{found[first].rule}]" in focus
    assert _gantt_bars(page, 1), "the worst step's events are embedded"
    assert page.eval_on_selector_all("#findings-1 tr.selected", "r => r.length") == 1
    assert opened.errors == [] and opened.dialogs == []


def _longest_names(analysis: tracekit.Analysis, step: int, n: int) -> list[str]:
    rows = analysis.work.filter(pl.col("step") == step).sort("dur", descending=True)
    return list(dict.fromkeys(rows["name"].cast(pl.String).to_list()))[:n]


def test_many_findings_stay_one_screen_and_outline_their_evidence(
    browser: Any, traces: list[Path], tmp_path: Path
) -> None:
    """60 findings per trace, built here (hostile titles and names): ten rows, the rest
    folded; a row opens its worst step with the kernels its evidence names outlined."""
    from tracekit.model import Finding
    from tracekit.reports.html import write_report

    analyses = []
    for path in traces:
        analysis = tracekit.analyze(tracekit.load(path), [])
        steps = sorted(analysis.step_metrics["step"].unique().to_list())
        found = []
        for i in range(60):
            worst = steps[(i * 3) % len(steps)]
            found.append(
                Finding(
                    "fallback",
                    "warning",
                    f"pattern {i} <img src=x onerror=alert(3)>",
                    f"detail {i} <b>not bold</b>",
                    step=worst,
                    rank=0,
                    device=0,
                    evidence={"names": _longest_names(analysis, worst, 2), "why": "not a name"},
                    pattern=f"p{i}",
                    steps=sorted({*steps[: 1 + i % len(steps)], worst}),
                    ranks=[0],
                    impact_ns=1_000 * (60 - i),
                    impact_share=0.001 * (60 - i),
                    advice=f"Fuse the chain {i}: " + "a sentence long enough to wrap. " * 6,
                )
            )
        analyses.append(replace(analysis, findings=found[::-1]))  # not in ranked order
    out = tmp_path / "many.html"
    write_report(analyses, out)
    opened = open_report(browser, out)
    page = opened.page
    assert opened.errors == [] and opened.dialogs == []
    for trace, analysis in enumerate(analyses):
        rows = _rows(page, trace)
        assert [r[2] for r in rows] == [
            f"pattern {i} <img src=x onerror=alert(3)>" for i in range(10)
        ]
        more = page.text_content(f"#findings-{trace} details.more-findings > summary")
        assert more == "50 more findings"
        height = page.eval_on_selector(
            f"#findings-{trace}", "e => e.getBoundingClientRect().height"
        )
        assert 0 < height <= 900, (trace, height)
        # the third finding: its worst step, its names outlined and listed as text
        f = ranked(analysis.findings)[2]
        focus = _open_finding(page, trace, 2, f.step)  # type: ignore[arg-type]
        names = f.evidence["names"]
        listed = page.eval_on_selector_all(
            f"#finding-focus-{trace} .names code", "els => els.map(e => e.textContent)"
        )
        assert listed == names and "pattern 2 <img" in focus
        outlined = page.evaluate(
            "i => document.getElementById('gantt-' + i).data"
            ".filter(t => t.name === 'finding evidence').map(t => t.x.length)",
            trace,
        )
        step_rows = analysis.work.filter(pl.col("step") == f.step)
        assert outlined == [step_rows.filter(pl.col("name").cast(pl.String).is_in(names)).height]
    assert page.evaluate("() => document.querySelectorAll('img, main b, [onerror]').length") == 0
    assert opened.errors == [] and opened.dialogs == []


def test_demo_page_findings_fit_one_screen_per_trace(browser: Any, tmp_path: Path) -> None:
    """`tracekit demo`'s page: each trace's findings section is at most the viewport high."""
    out = tmp_path / "demo.html"
    assert run_cli("demo", "-o", str(out)).returncode == 0
    opened = open_report(browser, out)
    heights = opened.page.eval_on_selector_all(
        ".trace-findings", "els => els.map(e => e.getBoundingClientRect().height)"
    )
    viewport = opened.page.viewport_size["height"]
    assert len(heights) == 2 and all(0 < h <= viewport for h in heights), heights
    assert opened.errors == []


# ---------- the roofline chart ----------
TORCH_NPU = "ascend/msinsight_torchnpu_910B_2rank/text/level1/rank0_ascend_pt"


def _roofline(page: Any, trace: int) -> dict[str, Any]:
    """What the roofline chart of a trace draws: operator points per family (x, y) and the
    roof lines (name, x, y)."""
    return page.evaluate(
        """i => {
            const gd = document.getElementById('roofline-' + i);
            const of = (kind) => gd.data.filter(t => t.meta && t.meta[0] === kind);
            return {
                points: of('operators').map(t => [t.name, t.x, t.y]),
                roofs: of('roof').map(t => [t.name, t.x, t.y]),
                log: [gd.layout.xaxis.type, gd.layout.yaxis.type],
                svg: gd.querySelectorAll('.scatterlayer .point').length,
            };
        }""",
        trace,
    )


def _drawable(analysis: tracekit.Analysis) -> pl.DataFrame:
    """The operators the chart draws: FLOPs and time, so a place on log axes."""
    ops = analysis.roofline.operators.head(200)
    return ops.filter((pl.col("intensity") > 0) & (pl.col("tflops") > 0))


def test_roofline_chart_only_for_the_trace_with_shapes(opened: Opened, traces: list[Path]) -> None:
    page = opened.page
    assert page.eval_on_selector_all("nav a", "els => els.map(e => e.textContent)")[3] == "Roofline"
    card = page.inner_text("#roofline-card-0")  # the nsys trace: no shapes, no chart
    assert "No operator shapes" in card
    assert page.eval_on_selector_all("#roofline-card-0 .plot", "els => els.length") == 0
    demo = tracekit.analyze(tracekit.load(traces[1]))
    drawn = _roofline(page, 1)
    want = _drawable(demo)
    assert sum(len(x) for _, x, _ in drawn["points"]) == want.height > 0
    assert drawn["svg"] >= want.height and drawn["log"] == ["log", "log"]
    # the demo's chip is an Ascend 910B of no named variant: 910B2's roofs, and a warning
    assert drawn["roofs"] and drawn["roofs"][0][0] == "HBM 1,600 GB/s"
    [warning] = demo.roofline.warnings
    assert f"⚠ {warning}" in page.inner_text("#roofline-card-1")
    assert opened.errors == []


def test_roofline_chart_of_the_shaped_fixture(browser: Any, tmp_path: Path) -> None:
    """The fixture's nine operators on an H200: a point each at its hand-computed intensity
    and TFLOP/s, the HBM slope up to the ridge and the bf16, fp8 and vector roofs."""
    from fixtures.kineto_writer import write_kineto_json
    from fixtures.shaped_ops import TORCH_NS, TORCH_OPS, TORCH_TRUTH, torch_events
    from tracekit.reports.format import fmt_ns
    from tracekit.reports.html import write_report

    analysis = tracekit.analyze(
        tracekit.load(write_kineto_json(torch_events(), tmp_path / "t.json"))
    )
    out = tmp_path / "shaped.html"
    write_report([analysis], out)
    opened = open_report(browser, out)
    page = opened.page
    assert opened.errors == [] and opened.dialogs == []
    drawn = _roofline(page, 0)
    drawn_pairs = sorted((x, y) for _, xs, ys in drawn["points"] for x, y in zip(xs, ys))
    truth = sorted(
        (t["flops"] / t["bytes"], t["flops"] / TORCH_NS.get(k, 15_000) / 1e3)
        for k, t in TORCH_TRUTH.items()
    )
    assert len(drawn_pairs) == len(TORCH_OPS) == 9
    for (x, y), (want_x, want_y) in zip(drawn_pairs, truth):
        assert x == pytest.approx(want_x) and y == pytest.approx(want_y)
    roofs = {name: (x, y) for name, x, y in drawn["roofs"]}
    slope = roofs["HBM 4,800 GB/s"]
    assert slope[1][1] == pytest.approx(4800 * slope[0][1] / 1e3)  # GB/s × FLOP/B
    assert slope[1][1] == pytest.approx(1979.0)  # up to the highest roof's ridge
    flat = {y[0]: x[0] for name, x, y in drawn["roofs"] if name != "HBM 4,800 GB/s"}
    assert set(flat) == {1979.0, 989.5, 67.0}
    assert flat[989.5] == pytest.approx(989.5e3 / 4800)  # the ridge point, FLOP/byte
    # hover an operator: its name, shapes and kernel as text
    page.evaluate(
        """() => {
            const gd = document.getElementById('roofline-0');
            const c = gd.data.findIndex(t => t.name === 'norm');
            Plotly.Fx.hover(gd, [{curveNumber: c, pointNumber: 0}], 'xy');
        }"""
    )
    hover = page.text_content("#roofline-0 .hovertext") or ""
    assert "_C::rms_norm" in hover and "64×7168, 64×7168, 7168 bf16" in hover
    assert "vllm::rms_norm_kernel" in hover
    # the step table has the roofline columns, in the page's own formatting
    heads = page.eval_on_selector_all("#steps-table th", "els => els.map(e => e.textContent)")
    assert heads[-4:-1] == ["roofline", "shaped", "bound"]
    cells = page.eval_on_selector_all(
        "#steps-table tr:nth-child(2) td", "els => els.map(e => e.textContent)"
    )
    step = analysis.step_metrics.row(0, named=True)
    assert cells[-4:-1] == [fmt_ns(step["roofline_ns"]), "100.0%", step["bound"]]


@pytest.mark.skipif(not os.environ.get("TRACEKIT_REAL_TRACES"), reason="TRACEKIT_REAL_TRACES")
def test_roofline_chart_of_the_torch_npu_sample(browser: Any, tmp_path: Path) -> None:
    """The torch_npu sample names no device: points without roofs and the warning; with
    --device 910b3 the same points under the 910B3's roofs."""
    from tracekit.reports.html import write_report

    path = Path(os.environ["TRACEKIT_REAL_TRACES"]) / TORCH_NPU
    timeline = tracekit.load(path)
    plain, matched = tracekit.analyze(timeline), tracekit.analyze(timeline, device="910b3")
    out = tmp_path / "npu.html"
    write_report([plain, matched], out)
    opened = open_report(browser, out)
    assert opened.errors == []
    first, second = _roofline(opened.page, 0), _roofline(opened.page, 1)
    count = _drawable(plain).height
    assert count > 0
    for drawn in (first, second):
        assert sum(len(x) for _, x, _ in drawn["points"]) == count
    assert first["roofs"] == [] and "matches no entry" in opened.page.inner_text("#roofline-card-0")
    names = [name for name, _, _ in second["roofs"]]
    assert "HBM 1,600 GB/s" in names and len(names) >= 2
