"""The trend page (tracekit.reports.trend_html): its payload is the trend JSON trimmed to
bounds, its size stays bounded at 300 runs (and at 1,000, the older runs aggregated), and in
headless Chromium (Debian's ``chromium`` driven by Playwright, networking off) the step-time
line has one point per run, the category stack one bar group per run, each significant move
a marker that opens its details panel, and hostile run labels and kernel names stay text.

Input: a trend document built here after contract B of issue 33 (:func:`sample_trend`: 6
runs, 2 significant moves) and, where ``tracekit.trend`` and ``fixtures.series`` exist, the
trend of the planted fixture series.
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.browser import Opened, launched, open_offline
from tracekit.errors import TraceError
from tracekit.reports.html_pack import plotly_js
from tracekit.reports.trend_html import (
    MAX_CHANGES,
    MAX_DETAILED,
    MAX_MATCHED,
    MAX_NAME,
    MAX_NAMES,
    MAX_RUNS,
    render_trend_html,
    trend_payload,
)

HOSTILE_LABEL = "nightly-04<img src=x onerror=alert(1)>"
HOSTILE_KERNEL = "act<b>x</b><img src=x onerror=alert(2)>_kernel"
MEDIANS = [10.0e6, 10.05e6, 10.02e6, 8.5e6, 8.52e6, 9.6e6]
STATUSES = ["within threshold", "unchanged", "improvement", "not significant", "regression"]
FALLBACK_TEXT = "fallback chain (3 kernels) replaced by vllm::act_and_mul_kernel"
COMM_TEXT = "all-to-all dispatch/combine slower (+1.05 ms per step)"
CATEGORY_SHARES = {"gemm": 0.5, "attention": 0.2, "comm": 0.1, "norm": 0.05, "activation": 0.15}


def _run(i: int, median: float) -> dict[str, Any]:
    label = HOSTILE_LABEL if i == 3 else f"nightly-{i + 1:02d}"
    cats = {c: median * s for c, s in CATEGORY_SHARES.items()}
    cats["elementwise"] = 0.0  # a category without time: not drawn
    return {
        "index": i,
        "label": label,
        "source": f"/runs/{label}.sqlite",
        "format": "nsys",
        "vendor": "nvidia",
        "date": f"2026-11-0{i + 1}T02:00:00Z",
        "steps": 8,
        "steps_by": "marker",
        "phase": "decode",
        "step_ns": {"median": median, "lo": median - 40_000, "hi": median + 50_000},
        "categories": cats,
        "fallback_ns": 1.4e6 if i < 3 else 0.0,
        "exposed_comm_ns": median * 0.05,
        "efficiency": None,
        "vs_baseline": {"delta_ns": median - MEDIANS[0], "rel": median / MEDIANS[0] - 1},
        "warnings": [f"run {label}: 2 steps dropped as warm-up"] if i == 1 else [],
    }


def _change(kind: str, text: str, delta: float, share: float, **extra: Any) -> dict[str, Any]:
    return {
        "kind": kind,
        "text": text,
        "delta_ns": delta,
        "share": share,
        "matched_by": extra.get("matched_by"),
        "category": extra.get("category"),
        "base_names": extra.get("base_names", []),
        "head_names": extra.get("head_names", []),
    }


def sample_trend() -> dict[str, Any]:
    """A trend document after contract B: 6 runs, an improvement 2→3 (a fallback chain
    replaced, a hostile kernel name among its members) and a regression 4→5."""
    moves = []
    for i, status in enumerate(STATUSES):
        delta = MEDIANS[i + 1] - MEDIANS[i]
        changes: list[dict[str, Any]] = []
        matched: list[dict[str, Any]] = []
        if status == "improvement":
            chain = [HOSTILE_KERNEL, "at::native::mul_kernel", "at::native::sigmoid_kernel"]
            changes = [
                _change(
                    "fallback",
                    FALLBACK_TEXT,
                    -1.46e6,
                    0.96,
                    matched_by="order",
                    category="activation",
                    base_names=chain,
                    head_names=["vllm::act_and_mul_kernel"],
                ),
                _change("kernel", "gemm · aten::mm slightly faster", -0.05e6, 0.033),
            ]
        elif status == "regression":
            changes = [
                _change(
                    "collective",
                    COMM_TEXT,
                    1.05e6,
                    0.972,
                    matched_by="name",
                    category="comm",
                    base_names=["deep_ep::dispatch"],
                    head_names=["deep_ep::dispatch"],
                )
            ]
        elif status == "not significant":
            matched = [
                {
                    "label": "gemm · o_proj",
                    "matched_by": "operator",
                    "base_names": ["sm90_xmma_gemm_bf16"],
                    "head_names": ["nvjet_tst_64x64"],
                    "delta_ns": 2_000.0,
                }
            ]
        moves.append(
            {
                "from": i,
                "to": i + 1,
                "status": status,
                "significant": status in ("improvement", "regression"),
                "delta_ns": delta,
                "rel": delta / MEDIANS[i],
                "lo": delta - 30_000,
                "hi": delta + 30_000,
                "explained_share": sum(c["share"] for c in changes),
                "changes": changes,
                "matched": matched,
                "warnings": [],
            }
        )
    return {
        "kind": "trend",
        "baseline": 0,
        "threshold": 0.05,
        "min_impact": 0.01,
        "confidence": 0.95,
        "ordered_by": "label",
        "runs": [_run(i, m) for i, m in enumerate(MEDIANS)],
        "moves": moves,
        "warnings": ["run nightly-02 found fewer steps than the others"],
    }


def big_trend(runs: int) -> dict[str, Any]:
    """``runs`` runs, every move heavy: 20 changes and 20 matched roles of 20 long, distinct
    names each; every run 12 warnings; every 15th move significant."""
    base = sample_trend()
    name = "void at::native::vectorized_elementwise_kernel<4, at::native::Op<float>>" * 3
    out = []
    for i in range(runs):
        run = _run(i % 6, MEDIANS[i % 6]) | {"index": i, "label": f"build-{i:05d}"}
        run["warnings"] = [f"warning {k} of run {i}: " + "x" * 80 for k in range(12)]
        out.append(run)
    moves = []
    for i in range(runs - 1):
        names = [f"{k}.{i}:{name}" for k in range(20)]
        change = _change(
            "kernel", f"change of move {i}", 1e5, 0.1, base_names=names, head_names=names[::-1]
        )
        role = {"label": "gemm", "matched_by": "order", "delta_ns": 1.0}
        role |= {"base_names": names[::-1], "head_names": names}
        significant = i % 15 == 0
        moves.append(
            {
                "from": i,
                "to": i + 1,
                "status": "regression" if significant else "not significant",
                "significant": significant,
                "delta_ns": 1e6 if significant else 1e4,
                "rel": 0.1,
                "lo": 0.0,
                "hi": 2e6,
                "explained_share": 1.0,
                "changes": [change] * 20,
                "matched": [role] * 20,
                "warnings": [],
            }
        )
    return base | {"runs": out, "moves": moves}


def embedded(page: str) -> dict[str, Any]:
    """The JSON payload of a page."""
    match = re.search(r'<script type="application/json" id="tracekit-data">(.*?)</script>', page)
    assert match is not None
    return json.loads(match.group(1))


# ---------- without a browser ----------
def test_payload_is_the_trend_trimmed() -> None:
    data = sample_trend()
    payload = trend_payload(data)
    assert [r["label"] for r in payload["runs"]] == [r["label"] for r in data["runs"]]
    assert [r["step_ns"] for r in payload["runs"]] == [r["step_ns"] for r in data["runs"]]
    # categories with time, in the taxonomy's order; elementwise (0 in every run) left out
    assert payload["categories"] == ["gemm", "attention", "comm", "norm", "activation"]
    assert payload["runs"][3]["categories"]["gemm"] == pytest.approx(8.5e6 * 0.5)
    assert [m["significant"] for m in payload["moves"]] == [False, False, True, False, True]
    improvement = payload["moves"][2]
    assert improvement["changes"][0]["text"] == FALLBACK_TEXT
    assert improvement["changes"][0]["base_names"][0] == HOSTILE_KERNEL
    assert payload["runs_total"] == 6 and payload["omitted"] is None
    page = render_trend_html(data)
    assert embedded(page) == json.loads(json.dumps(payload))
    text = page.partition('id="tracekit-data">')[2].partition("</script>")[0]
    assert "<img" not in text and "</script" not in text
    title = re.search(r"<title>(.*?)</title>", page)
    assert (
        title is not None and title.group(1) == "tracekit trend: nightly-01 … nightly-06 (6 runs)"
    )


def test_bad_input_is_one_line() -> None:
    with pytest.raises(TraceError, match="not a trend document") as err:
        render_trend_html({"kind": "diff", "runs": []})
    assert "\n" not in str(err.value)


def test_page_size_stays_bounded_at_300_runs() -> None:
    """300 heavy runs (see :func:`big_trend`): every run drawn; the 20 significant moves and
    the 4 most recent others carry their details, trimmed; the rest their top change. The
    page less plotly.js stays under 0.8 MB (it is about 0.76 MB)."""
    data = big_trend(300)
    page = render_trend_html(data)
    payload = embedded(page)
    assert len(payload["runs"]) == 300 and payload["omitted"] is None
    moves = payload["moves"]
    assert len(moves) == 299
    detailed = [k for k, m in enumerate(moves) if m["detailed"]]
    assert len(detailed) == MAX_DETAILED == 24
    assert set(detailed) == set(range(0, 299, 15)) | {295, 296, 297, 298}
    first, minor = moves[0], moves[1]
    assert (len(first["changes"]), first["changes_more"]) == (MAX_CHANGES, 20 - MAX_CHANGES)
    assert (len(first["matched"]), first["matched_more"]) == (MAX_MATCHED, 20 - MAX_MATCHED)
    change = first["changes"][0]
    assert len(change["base_names"]) == MAX_NAMES and change["base_more"] == 20 - MAX_NAMES
    assert len(change["base_names"][0]) == MAX_NAME and change["base_names"][0].endswith("…")
    assert (len(minor["changes"]), minor["changes_more"], minor["matched_more"]) == (1, 19, 20)
    assert (
        minor["changes"][0]["text"] == "change of move 1"
        and "base_names" not in minor["changes"][0]
    )
    assert len(payload["runs"][0]["warnings"]) == 5  # 4 kept + "… and 8 more warnings"
    extra = len(page.encode()) - len(plotly_js().encode())
    print(f"trend page, 300 runs: {len(page.encode()):,} B, {extra:,} B besides plotly.js")
    assert extra < 800_000, extra


def test_more_runs_than_drawn_are_aggregated() -> None:
    """1,000 runs: the baseline and the 299 most recent drawn; the 700 others aggregated,
    with their 47 significant moves listed; the page no larger than at
    300 runs plus the summary."""
    data = big_trend(1000)
    payload = trend_payload(data)
    runs = payload["runs"]
    assert len(runs) == MAX_RUNS
    assert [r["index"] for r in runs[:3]] == [0, 701, 702] and runs[-1]["index"] == 999
    assert [m["from"] for m in payload["moves"]] == list(range(701, 999))
    omitted = payload["omitted"]
    assert omitted["runs"] == 700 and (omitted["first"], omitted["last"]) == (
        "build-00001",
        "build-00700",
    )
    assert (omitted["median_min"], omitted["median_max"]) == (min(MEDIANS), max(MEDIANS))
    assert omitted["significant"] == 47  # moves 0→1, 15→16, …, 690→691
    assert len(omitted["moves"]) == 47
    assert omitted["moves"][0]["to_label"] == "build-00001"
    size = len(render_trend_html(data).encode())
    assert size < len(render_trend_html(big_trend(300)).encode()) + 20_000
    # the baseline inside the recent window: the window is the 300 most recent runs
    late = trend_payload(data | {"baseline": 900})
    assert [r["index"] for r in late["runs"]] == list(range(700, 1000))
    assert late["omitted"]["runs"] == 700
    # 100 runs drawn: 900 aggregated, of their 61 significant moves the 50 largest listed
    small = trend_payload(data, max_runs=100)["omitted"]
    assert (small["runs"], small["significant"], len(small["moves"])) == (900, 61, 50)


# ---------- in a browser ----------
@pytest.fixture(scope="module")
def browser() -> Any:
    yield from launched()


def drawn(page: Any) -> dict[str, Any]:
    """What the chart drew, read from plotly's SVG: per scatter trace (by its meta) the
    drawn points and error bars; per bar trace its bars; the distinct bar-group centres."""
    return page.evaluate(
        """() => {
            const gd = document.getElementById('plot-trend');
            const scatter = {};
            for (const g of gd.querySelectorAll('.scatterlayer .trace')) {
                const t = g.__data__[0].trace;
                const entry = scatter[t.meta] || (scatter[t.meta] = {points: 0, errorbars: 0});
                entry.points += g.querySelectorAll('path.point').length;
                entry.errorbars += g.querySelectorAll('g.errorbar path').length;
            }
            const bars = {}, centres = new Set();
            for (const g of gd.querySelectorAll('.barlayer .trace')) {
                const t = g.__data__[0].trace;
                const paths = [...g.querySelectorAll('g.point path')];
                bars[t.name] = paths.length;
                for (const p of paths) {
                    const r = p.getBoundingClientRect();
                    if (r.height > 0) centres.add(Math.round(r.left + r.width / 2));
                }
            }
            return {scatter, bars, groups: centres.size,
                    ticks: [...gd.querySelectorAll('.xtick text')].map(e => e.textContent)};
        }"""
    )


def click_move(page: Any, move: int) -> str:
    """Click the drawn marker of move ``move`` (its index in the payload); wait for the
    details panel; its text."""
    page.eval_on_selector("#plot-trend", "e => e.scrollIntoView()")
    xy = page.evaluate(
        """k => {
            const gd = document.getElementById('plot-trend');
            for (const g of gd.querySelectorAll('.scatterlayer .trace')) {
                const t = g.__data__[0].trace;
                if (t.meta !== 'move') continue;
                const at = t.customdata.findIndex(c => c[0] === k);
                if (at < 0) continue;
                const r = g.querySelectorAll('path.point')[at].getBoundingClientRect();
                return [r.left + r.width / 2, r.top + r.height / 2];
            }
            return null;
        }""",
        move,
    )
    assert xy is not None, f"no marker for move {move}"
    # plotly counts a click within 300 ms of the last one as half of a double click (which
    # rescales the axes and is no click): a person does not click two markers that fast
    page.wait_for_timeout(400)
    page.mouse.move(xy[0], xy[1])
    page.mouse.click(xy[0], xy[1])
    page.wait_for_selector(f"#move-detail[data-move='{move}']:not([hidden])", timeout=10_000)
    return page.inner_text("#move-detail")


@pytest.fixture(scope="module")
def sample_page(browser: Any, tmp_path_factory: pytest.TempPathFactory) -> Opened:
    out = tmp_path_factory.mktemp("trend") / "trend.html"
    out.write_text(render_trend_html(sample_trend()), "utf-8")
    return open_offline(browser, out)


def test_chart_has_a_point_per_run_and_a_bar_group_per_run(sample_page: Opened) -> None:
    page = sample_page.page
    assert sample_page.errors == [] and sample_page.dialogs == [] and sample_page.outside == []
    seen = drawn(page)
    assert seen["scatter"]["median"] == {"points": 6, "errorbars": 6}
    assert seen["scatter"]["baseline"]["points"] == 1
    assert seen["scatter"]["move"]["points"] == 2  # the two significant moves
    assert seen["bars"] == {c: 6 for c in ("gemm", "attention", "comm", "norm", "activation")}
    assert seen["groups"] == 6
    assert seen["ticks"][3] == HOSTILE_LABEL[:27] + "…"  # cut at 28 characters, as text
    line = page.evaluate(
        "() => document.getElementById('plot-trend').data.find(t => t.meta === 'median')"
    )
    assert line["y"] == pytest.approx([m / 1e6 for m in MEDIANS])
    assert line["error_y"]["array"] == pytest.approx([0.05] * 6)
    assert line["error_y"]["arrayminus"] == pytest.approx([0.04] * 6)
    markers = page.evaluate(
        "() => document.getElementById('plot-trend').data.filter(t => t.meta === 'move')"
        ".map(t => [t.name, t.x, t.y, t.marker.color])"
    )
    assert markers == [
        ["regression (1)", [4.5], [pytest.approx((8.52 + 9.6) / 2)], "#c0392b"],
        ["improvement (1)", [2.5], [pytest.approx((10.02 + 8.5) / 2)], "#2e7d32"],
    ]


def test_marker_hover_explains_and_click_opens_the_details(sample_page: Opened) -> None:
    page = sample_page.page
    page.evaluate(
        """() => {
            const gd = document.getElementById('plot-trend');
            const c = gd.data.findIndex(t => t.meta === 'move' && t.name.startsWith('improvement'));
            Plotly.Fx.hover(gd, [{curveNumber: c, pointNumber: 0}], 'xy');
        }"""
    )
    hover = page.text_content("#plot-trend .hovertext") or ""
    assert "improvement" in hover and FALLBACK_TEXT in hover and "−1.52 ms" in hover
    panel = click_move(page, 2)
    assert FALLBACK_TEXT in panel and "−1.46 ms" in panel and "96.0%" in panel
    assert "order" in panel  # matched_by of the top change
    listed = page.eval_on_selector_all("#move-changes code", "els => els.map(e => e.textContent)")
    assert listed[0] == HOSTILE_KERNEL and "vllm::act_and_mul_kernel" in listed
    assert page.get_attribute("#move-detail", "class") == "improvement"
    panel = click_move(page, 4)
    assert COMM_TEXT in panel and "regression" in panel
    assert sample_page.errors == [] and sample_page.dialogs == []


def test_table_buttons_open_the_details_from_the_keyboard(sample_page: Opened) -> None:
    page = sample_page.page
    buttons = page.eval_on_selector_all("button.open-move", "els => els.map(e => e.dataset.move)")
    assert buttons == ["0", "1", "2", "3", "4"]  # one per move
    page.focus("button.open-move[data-move='3']")
    page.keyboard.press("Enter")
    page.wait_for_selector("#move-detail[data-move='3']:not([hidden])")
    assert page.evaluate("() => document.activeElement.id") == "move-title"
    matched = page.eval_on_selector_all("#move-matched tr td", "els => els.map(e => e.textContent)")
    assert matched[:2] == ["gemm · o_proj", "operator"]
    assert "sm90_xmma_gemm_bf16 → nvjet_tst_64x64" in matched[2]
    page.keyboard.press("Escape")
    assert page.is_hidden("#move-detail")
    assert page.evaluate("() => document.activeElement.dataset.move") == "3"
    # the table of changes: the improvement's two changes, ranked, under one move
    rows = page.eval_on_selector_all(
        "table.moves tr[data-move='2']", "rs => rs.map(r => r.innerText)"
    )
    assert len(rows) == 2 and FALLBACK_TEXT in rows[0] and "gemm · aten::mm" in rows[1]


def test_hostile_names_stay_text(sample_page: Opened) -> None:
    page = sample_page.page
    injected = "main img, main iframe, [onerror], [onload], main b, header b"
    assert page.evaluate(f"() => document.querySelectorAll('{injected}').length") == 0
    assert page.evaluate("() => document.querySelectorAll('script').length") == 3
    text = page.inner_text("#runs-table")
    assert HOSTILE_LABEL in text and "nightly-02: 2 steps dropped as warm-up" in text
    assert HOSTILE_LABEL in page.inner_text("#moves-table")
    assert sample_page.dialogs == [] and sample_page.errors == []
    assert page.inner_text("#alerts") == "⚠ run nightly-02 found fewer steps than the others"


def test_aggregated_runs_are_noted(browser: Any, tmp_path: Path) -> None:
    """400 runs: 300 drawn (one point each, one bar group each), the older 100 noted."""
    data = big_trend(400)
    out = tmp_path / "many.html"
    out.write_text(render_trend_html(data), "utf-8")
    opened = open_offline(browser, out)
    assert opened.errors == [] and opened.dialogs == [] and opened.outside == []
    seen = drawn(opened.page)
    assert seen["scatter"]["median"]["points"] == MAX_RUNS
    assert seen["scatter"]["move"]["points"] == 20  # moves 105→106, …, 390→391
    note = opened.page.inner_text("#omitted-note")
    assert "draws 300 of 400 runs" in note and "100 older runs (build-00001 … build-00100)" in note
    omitted = opened.page.eval_on_selector_all(
        "#omitted-moves tr", "rs => rs.slice(1).map(r => r.cells[0].textContent)"
    )
    assert len(omitted) == 7 and "build-00000 → build-00001" in omitted


# ---------- the planted fixture series, when its helper has landed ----------
def _series_ready() -> bool:
    return all(
        importlib.util.find_spec(m) is not None for m in ("tracekit.trend", "fixtures.series")
    )


@pytest.mark.skipif(not _series_ready(), reason="tracekit.trend / fixtures.series not built yet")
def test_planted_series_page(browser: Any, tmp_path: Path) -> None:
    """The trend of the planted series: a point per run at its median, a bar group per
    run, a marker per significant move, each opening its panel with its top change's text;
    a move with roles matched by other names (the planted rename) lists them in its panel."""
    from fixtures.series import write_series
    from tracekit.trend import trend

    paths, _ = write_series(tmp_path, "planted")
    data = trend(paths).to_dict()
    out = tmp_path / "planted.html"
    out.write_text(render_trend_html(data), "utf-8")
    opened = open_offline(browser, out)
    page = opened.page
    seen = drawn(page)
    assert seen["scatter"]["median"]["points"] == len(data["runs"]) == len(paths) == 6
    assert seen["groups"] == 6
    line = page.evaluate(
        "() => document.getElementById('plot-trend').data.find(t => t.meta === 'median').y"
    )
    assert line == pytest.approx([r["step_ns"]["median"] / 1e6 for r in data["runs"]])
    significant = [k for k, m in enumerate(data["moves"]) if m["significant"]]
    assert significant, "the planted series has significant moves"
    assert seen["scatter"]["move"]["points"] == len(significant)
    for k in significant:
        top = data["moves"][k]["changes"]
        assert top, f"significant move {k} explained by no change"
        assert top[0]["text"] in click_move(page, k)
    renamed = [k for k, m in enumerate(data["moves"]) if m["matched"] and not m["significant"]]
    assert renamed, "the planted rename is matched by role"
    page.focus(f"button.open-move[data-move='{renamed[0]}']")
    page.keyboard.press("Enter")
    page.wait_for_selector(f"#move-detail[data-move='{renamed[0]}']:not([hidden])")
    assert data["moves"][renamed[0]]["matched"][0]["label"] in page.inner_text("#move-matched")
    assert opened.errors == [] and opened.dialogs == [] and opened.outside == []
