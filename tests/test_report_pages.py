"""Report pages stay bounded for any number of steps (tracekit.reports.html_bins): past
MAX_STEP_ROWS step rows the page carries bins of consecutive steps (median, p10–p90, means)
and the extreme steps as points, and the findings' step lists are cut."""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl
import pytest

from fixtures.scenario import build_scenario, tile_in_time
from tracekit.analysis import Analysis, analyze
from tracekit.metrics.columns import METRIC_COLUMNS
from tracekit.reports.html import embed_json, payload, render_html
from tracekit.reports.html_bins import (
    BIN_BUDGET,
    BIN_MEANS,
    EXTREMES,
    MAX_STEP_ROWS,
    bin_width,
    kept_steps,
    step_bins,
)
from tracekit.reports.html_findings import STEP_ITEMS
from tracekit.timeline import KINDS, Timeline, build_table

ROWS_PER_STEP = 38  # timeline rows per step of the one-layer, piecewise-graph scenario


def many_steps(steps: int) -> Analysis:
    """A small model decoding for long: the one-layer scenario (CUDA graphs, ~23 kernels a
    step, every fault planted, 20 % jitter) tiled in time to ``steps`` steps, analysed."""
    sc = build_scenario(
        steps=8,
        layers=1,
        graphs="piecewise",
        fallback_kernel=True,
        exposed_all_to_all=True,
        idle_bubble_ns=100_000,
        unfused_collective=True,
        jitter=0.2,
    )
    tiled = tile_in_time(sc.events, KINDS, steps * ROWS_PER_STEP, 50_000)
    table = build_table({c: tiled[c] for c in tiled.columns})
    return analyze(Timeline(table, {"format": "scenario", "source": f"many-{steps}"}))


@pytest.fixture(scope="module")
def small() -> Analysis:
    return many_steps(10_000)


@pytest.fixture(scope="module")
def large() -> Analysis:
    return many_steps(50_000)


def _metrics(seed: int = 3) -> pl.DataFrame:
    """Synthetic step rows: 2 ranks x 2 devices, prefill and decode steps interleaved
    (phase null for a few), 6,003 steps, durations with heavy tails."""
    rng = np.random.default_rng(seed)
    steps = np.arange(6_003)
    phase = np.where(steps % 7 == 0, "prefill", "decode").astype(object)
    phase[steps % 1000 == 1] = None
    frames = []
    for rank in (0, 1):
        for device in (0, 1):
            n = steps.size
            dur = rng.lognormal(14, 0.3, n).astype(np.int64) + rank * 1000 + device
            cols: dict[str, Any] = {c: rng.integers(0, 10**6, n) for c in METRIC_COLUMNS}
            cols.update(rank=rank, device=device, step=steps, phase=phase, dur=dur)
            cols["comm_overlap_ratio"] = rng.random(n)
            frames.append(pl.DataFrame(cols).with_columns(pl.col("phase").cast(pl.String)))
    return pl.concat(frames, how="vertical_relaxed")


def _groups(metrics: pl.DataFrame) -> dict[tuple[Any, ...], pl.DataFrame]:
    filled = metrics.with_columns(pl.col("phase").fill_null("unknown"))
    return {k: g.sort("step") for k, g in filled.group_by("rank", "device", "phase")}


def test_bins_cover_every_step_once_with_numpys_percentiles() -> None:
    metrics = _metrics()
    bins = pl.DataFrame(step_bins(metrics))
    width = bin_width(metrics.height)
    assert width == -(-24_012 // BIN_BUDGET) == 25
    assert bins["count"].sum() == metrics.height == 24_012
    assert bins.height <= BIN_BUDGET + 4 * 3  # one partial bin per (rank, device, phase)
    for (rank, device, phase), group in _groups(metrics).items():
        mine = bins.filter(
            (pl.col("rank") == rank) & (pl.col("device") == device) & (pl.col("phase") == phase)
        ).sort("first")
        steps = group["step"].to_numpy()
        dur = group["dur"].to_numpy().astype(float)
        assert mine["count"].sum() == steps.size
        at = 0
        for row in mine.iter_rows(named=True):  # consecutive steps of the phase, in order
            part = slice(at, at + row["count"])
            assert row["count"] == min(width, steps.size - at)
            assert (row["first"], row["last"]) == (steps[part][0], steps[part][-1])
            d = dur[part]
            assert row["median"] == pytest.approx(np.median(d), abs=0.5)
            assert row["p10"] == pytest.approx(np.percentile(d, 10), abs=0.5)
            assert row["p90"] == pytest.approx(np.percentile(d, 90), abs=0.5)
            assert (row["min"], row["max"]) == (d.min(), d.max())
            compute = group["compute_ns"].to_numpy()[part]
            assert row["mean_compute_ns"] == pytest.approx(compute.mean(), abs=0.5)
            ratio = group["comm_overlap_ratio"].to_numpy()[part].mean()
            assert row["mean_comm_overlap_ratio"] == pytest.approx(ratio, abs=1e-4)
            at += row["count"]
        assert at == steps.size
    assert {f"mean_{c}" for c in BIN_MEANS} <= set(bins.columns)


def test_kept_rows_are_the_true_extremes_and_the_asked_steps() -> None:
    metrics = _metrics()
    keep = kept_steps(metrics, [4_444])
    kept = metrics.filter(keep)
    for (rank, device, phase), group in _groups(metrics).items():
        mine = kept.filter(
            (pl.col("rank") == rank)
            & (pl.col("device") == device)
            & (pl.col("phase").fill_null("unknown") == phase)
        )
        order = np.lexsort((group["step"].to_numpy(), group["dur"].to_numpy()))
        steps = group["step"].to_numpy()
        fastest, slowest = set(steps[order[:EXTREMES]]), set(steps[order[-EXTREMES:]])
        asked = {4_444} & set(steps)
        assert set(mine["step"].to_list()) == fastest | slowest | asked
        assert mine["dur"].max() == group["dur"].max() and mine["dur"].min() == group["dur"].min()


def test_many_step_page_is_bounded_and_sublinear(small: Analysis, large: Analysis) -> None:
    sizes = {}
    for analysis in (small, large):
        data = payload([analysis])
        trace = data["traces"][0]
        steps = analysis.step_metrics["step"].n_unique()
        bins = trace["step_bins"]
        assert bins["steps"] == steps and bins["rows"] == analysis.step_metrics.height
        assert sum(bins["bins"]["count"]) == analysis.step_metrics.height  # every step once
        assert len(bins["bins"]["count"]) <= BIN_BUDGET + 1
        assert f"{steps:,} steps" in bins["note"] and "--format json" in bins["note"]
        # kept rows: the 25 slowest and fastest of the one (rank, device, phase), and the
        # drilled-down steps; far under MAX_STEP_ROWS
        kept = trace["steps"]["step"]
        assert 2 * EXTREMES <= len(kept) <= 2 * EXTREMES + len(trace["gantt"]) < MAX_STEP_ROWS
        assert set(map(int, trace["gantt"])) <= set(kept)
        m = analysis.step_metrics  # ties (tiles repeat) by step, the first kept
        fast = m.sort("dur", "step")["step"].head(EXTREMES)
        slow = m.sort(["dur", "step"], descending=[True, False])["step"].head(EXTREMES)
        assert set(fast) | set(slow) <= set(kept)
        for f in trace["findings"]:  # step lists cut, the count kept
            assert len(f["steps"]) <= STEP_ITEMS
            if "steps_total" in f:
                assert f["steps_total"] > STEP_ITEMS and f["steps_text"]
        sizes[steps] = len(embed_json(data))
        page = len(render_html(data).encode())
        print(f"{steps:,} steps: payload {sizes[steps] / 1e3:.0f} kB, page {page / 1e6:.2f} MB")
    assert sorted(sizes) == [10_000, 50_000]
    assert sizes[50_000] < 600_000  # bytes
    assert abs(sizes[50_000] - sizes[10_000]) / sizes[10_000] < 0.05


def test_findings_step_lists_are_cut_with_their_count(large: Analysis) -> None:
    every = [f for f in large.findings if len(f.steps) > STEP_ITEMS]
    assert every, "the tiled scenario has findings in every step"
    page = {(f["rule"], f["pattern"]): f for f in payload([large])["traces"][0]["findings"]}
    for f in every:
        shown = page[(f.rule, f.pattern)]
        assert shown["steps_total"] == len(f.steps)
        assert shown["steps"] == f.steps[:STEP_ITEMS]


def test_small_traces_keep_every_row() -> None:
    analysis = many_steps(40)
    trace = payload([analysis])["traces"][0]
    assert "step_bins" not in trace
    assert trace["steps"]["step"] == analysis.step_metrics["step"].to_list()
