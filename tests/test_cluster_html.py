"""The cluster page (tracekit.reports.cluster_html): its embedded numbers are the cluster's
frames, trace names never reach the markup, the Content-Security-Policy hashes are the
page's scripts, the size stays bounded at 64 ranks × 300 steps, and in a real browser both
heatmaps draw and a click on a rank opens its drill-down.

The synthetic cluster is merged from hand-made parts (``tracekit.cluster.merge``): every
rank reaches one all-reduce per step at the same moment except :data:`LATE_RANK`, which
arrives :data:`DELAY_NS` later, so the others wait exactly that long on it.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from tests.browser import launched, open_offline
from tests.conftest import real_file
from tests.test_page_size import check_scripts
from tracekit.cluster import ClusterAnalysis, Part, merge
from tracekit.cluster.part import DRILL_ROWS
from tracekit.metrics.columns import METRIC_COLUMNS
from tracekit.reports.cluster_html import render_cluster_html, write_cluster_html
from tracekit.reports.cluster_payload import MAX_DRILL_ROWS, MIN_DRILL_ROWS, drill_cap
from tracekit.reports.html_pack import plotly_js

HOSTILE_KERNEL = "gemm<script>alert(1)</script>"
HOSTILE_GROUP = "all_reduce @ pg <img src=x onerror=alert(2)>"
HOSTILE_SOURCE = "rank{}<b>x</b>.json"
ORIGIN = 1_700_000_000_000_000_000
PERIOD, COMPUTE, COMM = 2_000_000, 1_500_000, 200_000
LATE_RANK, DELAY_NS = 2, 300_000
FLOATS = {"ns_per_token", "comm_overlap_ratio", "fallback_share"}


def _metrics(rank: int, steps: int) -> pl.DataFrame:
    delay = DELAY_NS if rank == LATE_RANK else 0
    cols: dict[str, Any] = {c: [0] * steps for c in METRIC_COLUMNS}
    cols.update(
        rank=[rank] * steps,
        device=[rank % 8] * steps,
        step=list(range(steps)),
        phase=["decode"] * steps,
        tokens=[None] * steps,
        start=[s * PERIOD for s in range(steps)],
        dur=[PERIOD - 10_000 * ((s * 7 + rank * 3) % 11) for s in range(steps)],
        compute_ns=[COMPUTE + delay] * steps,
        comm_ns=[COMM + (0 if delay else DELAY_NS)] * steps,
        bubble_ns=[1_000 * rank] * steps,
    )
    schema = {
        c: pl.String if c == "phase" else pl.Float64 if c in FLOATS else pl.Int64
        for c in METRIC_COLUMNS
    }
    frame = pl.DataFrame(cols, schema=schema)
    return frame.with_columns(pl.col("rank", "device").cast(pl.Int32))


def _launches(rank: int, steps: int) -> pl.DataFrame:
    delay = DELAY_NS if rank == LATE_RANK else 0
    starts = [ORIGIN + s * PERIOD + COMPUTE + delay for s in range(steps)]
    return pl.DataFrame(
        {
            "rank": [rank] * steps,
            "device": [rank % 8] * steps,
            "step": list(range(steps)),
            "group": [HOSTILE_GROUP] * steps,
            "kind": ["all_reduce"] * steps,
            "instance": [f"{s}:0" for s in range(steps)],
            "name": ["ncclDevKernel_AllReduce"] * steps,
            "start": starts,
            "end": [ORIGIN + s * PERIOD + COMPUTE + DELAY_NS + COMM for s in range(steps)],
            "bytes": [64 << 20] * steps,
            "group_size": [None] * steps,
        },
        schema_overrides={"rank": pl.Int32, "device": pl.Int32, "group_size": pl.Int64},
    )


def _drill(rank: int, steps: list[int], rows: int) -> pl.DataFrame:
    out = []
    for step in steps:
        for i in range(rows):
            comm = i % 10 == 9
            out.append(
                {
                    "rank": rank,
                    "device": rank % 8,
                    "step": step,
                    "start": ORIGIN + step * PERIOD + i * 500,
                    "dur": 400 + (i * 37) % 300,
                    "kind": "kernel",
                    "name": "ncclDevKernel_AllReduce" if comm else f"{HOSTILE_KERNEL} {i % 5}",
                    "stream": 7 if comm else 0,
                    "is_comm": comm,
                }
            )
    schema = {"rank": pl.Int32, "device": pl.Int32, "step": pl.Int64, "start": pl.Int64}
    schema |= {"dur": pl.Int64, "kind": pl.String, "name": pl.String, "stream": pl.Int64}
    return pl.DataFrame(out, schema={**schema, "is_comm": pl.Boolean})


def synthetic_cluster(ranks: int = 4, steps: int = 6, drill_rows: int = 30) -> ClusterAnalysis:
    """``ranks`` parts of ``steps`` steps; each part embeds its slowest and median steps'
    device rows (``drill_rows`` each)."""
    parts = []
    for rank in range(ranks):
        metrics = _metrics(rank, steps)
        by_dur = metrics.sort("dur", "step")["step"].to_list()
        drilled = sorted({by_dur[-1], by_dur[len(by_dur) // 2]})
        parts.append(
            Part(
                source=HOSTILE_SOURCE.format(rank),
                ranks=[rank],
                events=1_000,
                meta={"format": "kineto", "origin_ns": ORIGIN, "world_size": ranks},
                steps={"method": "marker", "confidence": "high", "count": steps},
                low_confidence=None,
                step_metrics=metrics,
                launches=_launches(rank, steps),
                findings=[],
                checks=[],
                drill=_drill(rank, drilled, drill_rows),
            )
        )
    return merge(parts)


def embedded(page: str) -> dict[str, Any]:
    """The JSON payload of a cluster page."""
    match = re.search(r'<script type="application/json" id="tracekit-data">(.*?)</script>', page)
    assert match is not None
    return json.loads(match.group(1))


@pytest.fixture(scope="module")
def cluster() -> ClusterAnalysis:
    return synthetic_cluster()


@pytest.fixture(scope="module")
def page(cluster: ClusterAnalysis) -> str:
    return render_cluster_html(cluster)


def check_numbers(cluster: ClusterAnalysis, data: dict[str, Any]) -> None:
    """The payload carries the cluster's frames unchanged."""
    metrics = cluster.step_metrics
    series = list(zip(data["series"]["rank"], data["series"]["device"]))
    assert series == sorted(metrics.select("rank", "device").unique().iter_rows())
    assert data["steps"] == sorted(metrics["step"].unique().to_list())
    at = {s: j for j, s in enumerate(data["steps"])}
    cells = {c: 0 for c in ("dur", "sync_wait_ns", "compute_ns", "start")}
    for row in metrics.iter_rows(named=True):
        si = series.index((row["rank"], row["device"]))
        for column in cells:
            assert data["metrics"][column][si][at[row["step"]]] == row[column], column
            cells[column] += 1
    filled = sum(v is not None for row in data["metrics"]["dur"] for v in row)
    assert filled == metrics.height == cells["dur"]
    late = data["late"]
    rows = list(zip(*(late[c] for c in cluster.stragglers.columns)))
    assert rows == list(cluster.stragglers.iter_rows())
    found = [f for f in cluster.findings if f.rule == "stragglers"]
    page_found = data["findings"]["stragglers"]
    assert [(f["title"], f["impact_ns"], f["rank"]) for f in page_found] == [
        (f.title, f.impact_ns, f.rank) for f in found
    ]
    assert [c["name"] for c in data["checks"]] == [c.name for c in cluster.checks]


def check_safe(page: str) -> None:
    """One CSP that allows exactly the page's three scripts (the loader, the page script and
    the packed plotly.js), by hash, and no network."""
    check_scripts(page)


def test_payload_numbers_are_the_frames(cluster: ClusterAnalysis, page: str) -> None:
    data = embedded(page)
    check_numbers(cluster, data)
    # the late rank made every other rank wait DELAY_NS per step
    assert cluster.stragglers["rank"].to_list() == [LATE_RANK] * 6
    assert data["findings"]["stragglers"][0]["metrics"]["rank"] == LATE_RANK
    others = [r for r in data["ranks"] if r["rank"] != LATE_RANK]
    assert {r["wait_ns"] for r in others} == {DELAY_NS}
    groups = data["groups"]
    assert [(g["group"], g["launches"], g["matched"]) for g in groups] == [(HOSTILE_GROUP, 24, 24)]
    inst = data["instances"]
    assert inst["total"] == 6 and set(inst["rows"]["skew_ns"]) == {DELAY_NS}
    assert set(inst["rows"]["last_rank"]) == {LATE_RANK}


def test_drill_rows_are_the_longest_relative_to_their_window(
    cluster: ClusterAnalysis, page: str
) -> None:
    data = embedded(page)
    drill = data["drill"]
    keys = cluster.drill.select("rank", "device", "step").unique()
    assert len(drill["steps"]) == keys.height == 8 and drill["cap"] == DRILL_ROWS
    names = drill["names"]
    for d in drill["steps"]:
        rank, device = data["series"]["rank"][d["series"]], data["series"]["device"][d["series"]]
        rows = cluster.drill.filter(
            (pl.col("rank") == rank) & (pl.col("device") == device) & (pl.col("step") == d["step"])
        ).sort("start")
        window = cluster.step_metrics.filter(
            (pl.col("rank") == rank) & (pl.col("step") == d["step"])
        )["start"].item()
        assert d["total"] == d["shown"] == rows.height == len(d["start"])
        assert [s + window + ORIGIN for s in d["start"]] == rows["start"].to_list()
        assert d["dur"] == rows["dur"].to_list() and d["comm"] == rows["is_comm"].to_list()
        assert [names[i] for i in d["name"]] == rows["name"].to_list()


def test_drill_is_capped_longest_first() -> None:
    small = synthetic_cluster(ranks=2, steps=4, drill_rows=400)
    data = embedded(render_cluster_html(small, drill_budget=1_000))
    cap = drill_cap(4, 1_000)
    assert data["drill"]["cap"] == cap == 250
    for d in data["drill"]["steps"]:
        assert d["total"] == 400 and d["shown"] == len(d["dur"]) == cap
        rank = data["series"]["rank"][d["series"]]
        rows = small.drill.filter(pl.col("step") == d["step"], pl.col("rank") == rank)
        assert min(d["dur"]) >= rows["dur"].sort(descending=True)[cap - 1]


def test_many_ranks_keep_the_slowest_steps_within_budget() -> None:
    """More drilled steps than the budget allows at MIN_DRILL_ROWS each: each series'
    slowest step first, the slowest of those first, and never more rows than the budget."""
    many = synthetic_cluster(ranks=12, steps=4, drill_rows=300)
    data = embedded(render_cluster_html(many, drill_budget=3_000))
    drill = data["drill"]
    assert drill["keys"] == 24 and drill["cap"] == MIN_DRILL_ROWS
    assert len(drill["steps"]) == 15 and sum(d["shown"] for d in drill["steps"]) <= 3_000
    slowest = many.step_metrics.filter(pl.col("dur") == pl.col("dur").max().over("rank"))
    shown = {(data["series"]["rank"][d["series"]], d["step"]) for d in drill["steps"]}
    assert set(slowest.select("rank", "step").iter_rows()) <= shown


def test_names_never_reach_the_markup(page: str) -> None:
    assert "<script>alert" not in page and "<img" not in page and "<b>x</b>" not in page
    assert "<title>tracekit cluster: rank0&lt;b&gt;x&lt;/b&gt;.json" in page
    data = embedded(page)
    assert any(n.startswith(HOSTILE_KERNEL) for n in data["drill"]["names"])
    assert data["instances"]["groups"] == [HOSTILE_GROUP]
    assert data["header"]["parts"][0]["source"] == HOSTILE_SOURCE.format(0)
    script = re.findall(r"<script>(.*?)</script>", page, flags=re.S)[1]
    assert "innerHTML" not in script and "insertAdjacentHTML" not in script


def test_csp_hashes_are_the_scripts(page: str) -> None:
    check_safe(page)


def test_64_ranks_by_300_steps_stay_small(tmp_path: Path) -> None:
    big = synthetic_cluster(ranks=64, steps=300, drill_rows=DRILL_ROWS)
    assert big.drill.height == 64 * 2 * DRILL_ROWS
    size = write_cluster_html(big, tmp_path / "big.html")
    page = (tmp_path / "big.html").read_text()
    assert size == len(page.encode())
    besides_plotly = size - len(plotly_js().encode())
    assert besides_plotly < 5_000_000, besides_plotly
    data = embedded(page)
    assert sum(d["shown"] for d in data["drill"]["steps"]) <= MAX_DRILL_ROWS
    assert len(data["metrics"]["dur"]) == 64 and len(data["metrics"]["dur"][0]) == 300


def test_a_cluster_without_steps_still_renders() -> None:
    """Parts with no step and no collective: the page says so instead of failing."""
    part = Part(
        source="empty.json",
        ranks=[0],
        events=0,
        meta={"format": "kineto", "origin_ns": ORIGIN},
        steps={},
        low_confidence="low confidence: no steps found",
        step_metrics=_metrics(0, 0),
        launches=_launches(0, 0),
        findings=[],
        checks=[],
        drill=_drill(0, [], 0),
    )
    cluster = merge([part, replace(part, source="other.json", ranks=[1])])
    page = render_cluster_html(cluster)
    check_safe(page)
    data = embedded(page)
    assert data["steps"] == [] and data["metrics"] == {} and data["drill"]["steps"] == []
    assert data["header"]["ranks"] == 2 and data["header"]["launches"] == 0
    assert [p["low_confidence"] for p in data["header"]["parts"]] == [part.low_confidence] * 2


REAL = {
    "mi300": ("amd", "kineto_mi300_ddp4rank_rccl_FUSED/merged_all_events.json.gz"),
    "ascend": ("ascend", "msinsight_torchnpu_910B_2rank/text/level1"),
    "hta": ("nvidia", "hta-sampled-world128-multistream"),
}


@pytest.mark.parametrize("name", list(REAL))
def test_real_cluster_pages(name: str, tmp_path: Path) -> None:
    from tracekit.cluster import analyze_cluster

    cluster = analyze_cluster(real_file(*REAL[name]), workers=1)
    out = tmp_path / f"{name}.html"
    size = write_cluster_html(cluster, out)
    page = out.read_text()
    data = embedded(page)
    check_numbers(cluster, data)
    check_safe(page)
    assert size - len(plotly_js().encode()) < 1_000_000
    warned = [c["name"] for c in data["checks"] if c["status"] != "pass"]
    if name == "mi300":
        assert data["findings"]["stragglers"][0]["metrics"]["rank"] == 3
        assert data["findings"]["stragglers"][0]["metrics"]["persistent"] is True
        # the small broadcasts' ends differ, and shapes come with no device model: said so
        assert warned == ["ranks.matching", "roofline.devices"]
    if name == "hta":  # matching fails there and the page says so first
        assert {"ranks.clocks", "ranks.matching"} <= set(warned)
        assert data["header"]["matched"] == 0 and data["header"]["world_size"] == 128


# ---------- in a real browser ----------
@pytest.fixture(scope="module")
def browser() -> Any:
    yield from launched()


CELL_CENTRE = """([id, x, y]) => {
    const gd = document.getElementById(id), box = gd.getBoundingClientRect();
    const xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis;
    return [box.left + xa._offset + xa.l2p(x), box.top + ya._offset + ya.l2p(y)];
}"""


def settle(page: Any) -> None:
    """Wait until the page stops scrolling (a smooth scroll moves it for a while)."""
    last = None
    for _ in range(40):
        now = page.evaluate("() => window.scrollY")
        if now == last:
            return
        last = now
        page.wait_for_timeout(100)


def test_browser_heatmaps_and_rank_drill_down(
    browser: Any, cluster: ClusterAnalysis, tmp_path: Path
) -> None:
    out = tmp_path / "cluster.html"
    write_cluster_html(cluster, out)
    opened = open_offline(browser, out)
    page, errors, dialogs, outside = opened.page, opened.errors, opened.dialogs, opened.outside
    # both heatmaps are drawn, from the step metrics (ms)
    for plot_id, column in (("plot-heat-dur", "dur"), ("plot-heat-wait", "sync_wait_ns")):
        drawn = page.evaluate(
            "id => { const gd = document.getElementById(id); return [gd.data[0].type,"
            " gd.data[0].z, gd.querySelectorAll('svg.main-svg .hm, svg.main-svg image').length]; }",
            plot_id,
        )
        assert drawn[0] == "heatmap" and drawn[2] > 0, plot_id
        want = cluster.step_metrics.sort("rank", "step")
        flat = [v for row in drawn[1] for v in row]
        assert flat == pytest.approx((want[column] / 1e6).to_list()), plot_id
    assert page.is_hidden("#rank-detail")
    # a click on a rank's row opens its steps and the Gantt of its slowest embedded step
    page.click("#rank-table tr[data-series='1']")
    page.wait_for_selector("#rank-detail[data-series='1'][data-drawn='1']")
    step = int(page.get_attribute("#rank-detail", "data-step"))
    bars = page.evaluate("() => document.getElementById('plot-gantt').data.map(t => t.x.length)")
    rows = cluster.drill.filter((pl.col("rank") == 1) & (pl.col("step") == step))
    assert sum(bars) == rows.height
    steps_shown = page.eval_on_selector_all("#rank-steps tr[data-step]", "r => r.length")
    assert steps_shown == cluster.step_metrics.filter(pl.col("rank") == 1).height
    # a click on a heatmap cell opens that rank and step
    drilled = cluster.drill.filter(pl.col("rank") == LATE_RANK)["step"].max()
    page.evaluate("() => document.getElementById('plot-heat-dur').scrollIntoView()")
    settle(page)
    x, y = page.evaluate(CELL_CENTRE, ["plot-heat-dur", drilled, LATE_RANK])
    page.mouse.click(x, y)
    page.wait_for_selector(
        f"#rank-detail[data-series='{LATE_RANK}'][data-step='{drilled}'][data-drawn='1']"
    )
    assert page.text_content("#rank-title") == f"rank {LATE_RANK} · step {drilled}"
    # names are text: the hostile source is readable, nothing was injected
    assert HOSTILE_SOURCE.format(0) in page.inner_text("#overview-table")
    injected = "img, iframe, object, embed, [onerror], [onload]"
    assert page.evaluate(f"() => document.querySelectorAll('{injected}').length") == 0
    assert errors == [] and dialogs == [] and outside == []
    page.context.close()
