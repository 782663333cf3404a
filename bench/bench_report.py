"""Benchmark: `tracekit report` on >= 2M events: the HTML page's size and time.

    python bench/bench_report.py [--events N] [--out FILE]

Run by hand, never as a test. The faulty scenario is tiled to at least ``--events`` rows
(``bench_analysis.timeline``), analysed once, then the report payload is built and the page
written; the time of each phase, the page size and its largest parts are printed.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_analysis import timeline

from tracekit.analysis import analyze
from tracekit.reports.html import embed_json, payload, render_html


def main() -> None:
    """Build the input, analyse it, time the report and print its size."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=2_000_000)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "out" / "report.html")
    args = parser.parse_args()
    tl = timeline(args.events)
    t = time.perf_counter()
    analysis = analyze(tl)
    analysed = time.perf_counter() - t
    t = time.perf_counter()
    data = payload([analysis])
    prepared = time.perf_counter() - t
    t = time.perf_counter()
    page = render_html(data).encode()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(page)
    written = time.perf_counter() - t
    trace = data["traces"][0]
    shown = sum(part["shown"] for part in trace["gantt"].values())
    print(
        f"timeline: {len(tl):,} rows, {analysis.work.height:,} device rows, "
        f"{len(analysis.steps):,} steps"
    )
    print(f"analyze {analysed:.2f} s; report payload {prepared:.2f} s; page {written:.2f} s")
    print(
        f"page {len(page) / 1e6:.1f} MB ({args.out}); drill-down: {len(trace['gantt'])} steps, "
        f"{shown:,} events"
    )
    for key in ("steps", "gantt", "findings", "overlap", "kernels", "strings"):
        print(f"  {key:10} {len(embed_json(trace[key])) / 1e6:6.2f} MB")
    print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
