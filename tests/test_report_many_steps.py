"""A many-step report in a real browser (headless Chromium, offline): the aggregated step
charts draw the p10–p90 band, the median line and the extreme steps as points, and the page
says what it aggregated. Load time and size are printed, not asserted."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tests.browser import launched, open_offline
from tests.test_report_pages import many_steps
from tracekit.reports.html import write_report
from tracekit.reports.html_bins import EXTREMES


@pytest.fixture(scope="module")
def browser() -> Any:
    yield from launched()


def test_many_step_page_draws_the_band_and_says_what_it_aggregated(
    browser: Any, tmp_path: Path
) -> None:
    analysis = many_steps(50_000)
    out = tmp_path / "many.html"
    size = write_report([analysis], out)
    start = time.perf_counter()
    opened = open_offline(browser, out)
    print(f"50,000-step page: {size / 1e6:.2f} MB, drawn in {time.perf_counter() - start:.2f} s")
    page = opened.page
    assert opened.errors == [] and opened.dialogs == [] and opened.outside == []
    note = page.inner_text("#aggregation-note")
    assert "50,000 steps" in note and "p10–p90" in note and page.is_visible("#aggregation-note")
    traces = page.evaluate(
        "() => document.getElementById('plot-durations').data.map(t =>"
        " [t.name || '', t.fill || '', t.mode, t.x.length])"
    )
    band = [t for t in traces if t[1] == "tonexty"]
    median = [t for t in traces if t[0].startswith("median")]
    points = [t for t in traces if t[2] == "markers"]
    assert len(band) == len(median) == len(points) == 1, traces
    bins = len(
        page.evaluate(
            "() => JSON.parse(document.getElementById('tracekit-data')"
            ".textContent).traces[0].step_bins.bins.count"
        )
    )
    assert band[0][3] == median[0][3] == bins > 100
    assert points[0][3] >= 2 * EXTREMES
    drawn = page.eval_on_selector_all(
        "#plot-durations path.js-fill, #plot-time path.js-fill", "els => els.length"
    )
    assert drawn > 0  # the band and the stacked areas are filled paths in the SVG
    for plot in ("plot-time", "plot-categories", "plot-comm-overlap"):
        n = page.evaluate(f"() => document.getElementById('{plot}').data.length")
        assert n > 0, plot
