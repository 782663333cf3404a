"""Benchmark: what the roofline adds to ``tracekit.analyze`` on a >= 2M-row Kineto trace whose
operators carry their shapes (the decode scenario with ``record_shapes``, tiled in time).

    python bench/bench_roofline.py [--events 2000000] [--repeat 5] [--peer CHECKOUT]

Run by hand, never as a test. The trace is written once (cached under /tmp/tracekit-bench)
and loaded in each fresh process; each process times ``analyze`` in full and, separately,
the roofline's own stages (``tracekit.metrics.roofline.roofline`` and the ``efficiency`` rule) on
the same rows. With ``--peer`` (a checkout of an older tracekit, without the roofline) the
two checkouts' ``analyze`` alternate, process by process, and both medians are printed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CACHE = Path("/tmp/tracekit-bench")


def build(events: int) -> Path:
    """The shaped scenario tiled to at least ``events`` timeline rows, as Kineto JSON."""
    target = CACHE / f"roofline-{events}.json"
    if target.is_file():
        return target
    sys.path.insert(0, str(ROOT))
    from fixtures.kineto_writer import write_kineto_json
    from fixtures.scenario import build_scenario, tile_in_time
    from tracekit.timeline import KINDS

    sc = build_scenario(steps=8, layers=8, record_shapes=True, fallback_kernel=True)
    # a tile's timeline rows: its events plus the cpu_ops the writer adds per shaped kernel
    per_tile = sc.events.height + len(sc.truth["shaped_ops"])
    tiled = tile_in_time(sc.events, KINDS, events * sc.events.height // per_tile, 50_000)
    CACHE.mkdir(parents=True, exist_ok=True)
    write_kineto_json(tiled, target)
    return target


CHILD = """
import json, sys, time
sys.path.insert(0, {root!r})
import tracekit
timeline = tracekit.load({path!r})
t = time.perf_counter()
analysis = tracekit.analyze(timeline)
out = {{"analyze_s": time.perf_counter() - t, "rows": len(timeline)}}
try:
    from tracekit.metrics.roofline import roofline
    from tracekit.rules.efficiency import Efficiency
except ImportError:
    roofline = None
if roofline is not None:
    t = time.perf_counter()
    roof = roofline(analysis.rows, analysis.work, timeline.meta)
    out["roofline_s"] = time.perf_counter() - t
    out["shaped_rows"] = roof.rows.height
print(json.dumps(out))
"""


def child(checkout: Path, path: Path) -> dict:
    """One fresh process of ``checkout`` loading and analysing ``path``."""
    code = CHILD.format(root=str(checkout), path=str(path))
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=checkout
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def spread(values: list[float], unit: str = "s") -> str:
    """``median unit (min–max)``."""
    return f"{statistics.median(values):.2f} {unit} ({min(values):.2f}–{max(values):.2f})"


def main() -> None:
    """Build the input, alternate fresh processes, print medians with min–max."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=2_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--peer", type=Path, help="a checkout of tracekit without the roofline")
    args = parser.parse_args()
    path = build(args.events)
    this, peer = [], []
    for _ in range(args.repeat):
        this.append(child(ROOT, path))
        if args.peer:
            peer.append(child(args.peer, path))
    print(f"input: {path} ({this[0]['rows']:,} rows, {this[0]['shaped_rows']:,} shaped)")
    analyze = [r["analyze_s"] for r in this]
    roof = [r["roofline_s"] for r in this]
    print(f"analyze (this):      {spread(analyze)}")
    print(f"  roofline stage:    {spread(roof)}")
    shares = [r / (a - r) for r, a in zip(roof, analyze)]
    low, high = min(shares), max(shares)
    print(f"  roofline / rest:   {statistics.median(shares):.1%} ({low:.1%}–{high:.1%})")
    if peer:
        base = [r["analyze_s"] for r in peer]
        print(f"analyze (peer):      {spread(base)}")
        print(f"  this / peer:       {statistics.median(analyze) / statistics.median(base):.2f}")


if __name__ == "__main__":
    main()
