"""Benchmark: ``tracekit.analyze`` (taxonomy, steps, metrics, all four rules, the checks) on
>= 2M events.

    python bench/bench_analysis.py [--events N] [--repeat N]

Run by hand, never as a test. The scenario (every fault planted) is tiled in time until the
timeline holds at least ``--events`` rows (host and device), then analysed ``--repeat`` times
in this process; the median time per phase and in total, rows per second and the peak RSS
are printed.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import time
from pathlib import Path

import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fixtures.scenario import build_scenario, tile_in_time
from tracekit.analysis.pipeline import place_steps
from tracekit.metrics.steps import clipped, step_metrics
from tracekit.model import Context
from tracekit.rules.registry import select
from tracekit.steps import windows

try:
    from tracekit.checks import run_checks
    from tracekit.taxonomy import classified
except ImportError:  # an older tracekit, compared against: no checks, no guesses
    from tracekit.taxonomy import classify

    run_checks = None  # type: ignore[assignment]

    def classified(df: pl.DataFrame, vendor: str) -> tuple[pl.DataFrame, None]:  # type: ignore[misc]
        return classify(df, vendor), None


from tracekit.timeline import KINDS, Timeline, build_table


def timeline(events: int) -> Timeline:
    """The faulty scenario tiled to at least ``events`` rows."""
    sc = build_scenario(steps=8, layers=8, fallback_kernel=True, exposed_all_to_all=True,
                        idle_bubble_ns=100_000, unfused_collective=True)  # fmt: skip
    tiled = tile_in_time(sc.events, KINDS, events, 50_000)
    return Timeline(build_table({c: tiled[c] for c in tiled.columns}), {"format": "scenario"})


def run_once(tl: Timeline) -> dict[str, float]:
    """Seconds per phase of one analysis (the phases of ``tracekit.analyze``)."""
    times: dict[str, float] = {}
    t = time.perf_counter()
    rows, guessed = classified(tl.df, "nvidia")
    times["taxonomy"] = time.perf_counter() - t
    t = time.perf_counter()
    steps, work = place_steps(rows, tl.meta)
    wins = windows(work)
    times["steps"] = time.perf_counter() - t
    t = time.perf_counter()
    in_windows = clipped(work, wins)
    metrics = step_metrics(work, wins, in_windows=in_windows, ranges=steps.ranges)
    times["metrics"] = time.perf_counter() - t
    ctx = Context(rows, work, in_windows, wins, metrics, steps, tl.meta)
    findings = 0
    for rule in select(None):
        t = time.perf_counter()
        found = rule.run(ctx)
        times[f"rule {rule.id} ({len(found)} findings)"] = time.perf_counter() - t
        findings += len(found)
    if run_checks is not None:  # tracekit before its checks: no such phase
        t = time.perf_counter()
        checks = run_checks(rows, work, wins, metrics, steps, tl.meta, guessed, in_windows)
        times[f"checks ({len(checks)})"] = time.perf_counter() - t
    times["total"] = sum(times.values())
    times["_steps"] = len(steps)
    times["_findings"] = findings
    return times


def main() -> None:
    """Build the input once, analyse it ``--repeat`` times, print the medians."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=2_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    tl = timeline(args.events)
    dev = tl.df.filter(pl.col("kind").cast(pl.String).is_in(["kernel", "memcpy", "memset"]))
    print(f"timeline: {len(tl):,} rows ({dev.height:,} device rows)")
    runs = [run_once(tl) for _ in range(args.repeat)]
    print(f"steps: {runs[0]['_steps']:,}; findings: {runs[0]['_findings']:,}")
    for key in runs[0]:
        if not key.startswith("_"):
            print(f"  {key:40} {statistics.median(r[key] for r in runs):7.2f} s")
    total = statistics.median(r["total"] for r in runs)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"median total {total:.2f} s = {len(tl) / total:,.0f} rows/s; peak RSS {peak:,.0f} MB")


if __name__ == "__main__":
    main()
