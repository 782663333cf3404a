"""Benchmark: load a scaled Nsight Systems SQLite export with ``tracekit.load``.

    python bench/bench_nsys_load.py [--kernels N] [--keep]

Builds the fixture scenario once, tiles it in time with polars until it holds at least
``--kernels`` kernel rows (and as many runtime rows or more), writes it with the fixture
writer into ``bench/out/`` (reused while present), then loads it in a fresh subprocess so
that the writer's memory does not count, and prints seconds, events/s and peak RSS.
The export is removed afterwards unless ``--keep`` is given.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import polars as pl

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "out"
sys.path.insert(0, str(ROOT))

from fixtures.nsys_writer import write_nsys_sqlite  # noqa: E402
from fixtures.scenario import build_scenario, tile_in_time  # noqa: E402

BASE = {"steps": 16, "layers": 61, "fallback_kernel": True, "idle_bubble_ns": 150_000}
TILE_GAP_NS = 5_000_000

LOADER = """
import json, resource, sys, time
try:
    import tracekit
except Exception as exc:
    print(json.dumps({"error": f"tracekit not importable: {exc!r}"})); sys.exit(0)
if not hasattr(tracekit, "load"):
    print(json.dumps({"error": "tracekit.load does not exist yet"})); sys.exit(0)
t0 = time.perf_counter()
timeline = tracekit.load(sys.argv[1])
seconds = time.perf_counter() - t0
print(json.dumps({
    "seconds": seconds,
    "events": len(timeline),
    "max_rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
}))
"""


def tiled_events(kernels: int) -> pl.DataFrame:
    """The base scenario repeated in time until it has at least ``kernels`` kernel rows."""
    return tile_in_time(build_scenario(**BASE).events, ("kernel",), kernels, TILE_GAP_NS)


def build(kernels: int) -> tuple[Path, dict[str, float]]:
    """Write (or reuse) the scaled export; return its path and what writing it took."""
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"nsys_{kernels}.sqlite"
    if path.exists():
        return path, {}
    t0 = time.perf_counter()
    events = tiled_events(kernels)
    t1 = time.perf_counter()
    write_nsys_sqlite(events, path)
    t2 = time.perf_counter()
    counts = dict(events.group_by("kind").len().iter_rows())
    return path, {
        "rows": events.height,
        "kernel rows": counts.get("kernel", 0),
        "runtime rows": counts.get("api", 0),
        "tile (s)": t1 - t0,
        "write (s)": t2 - t1,
        "write rows/s": int(events.height / (t2 - t1)),
    }


def load(path: Path) -> dict[str, float | str]:
    """Run ``tracekit.load(path)`` in a subprocess and return its measurements."""
    done = subprocess.run(
        [sys.executable, "-c", LOADER, str(path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        tail = (done.stderr or done.stdout).strip().splitlines()
        return {"error": tail[-1] if tail else f"exit {done.returncode}"}
    return json.loads(lines[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kernels", type=int, default=2_000_000, help="kernel rows (minimum)")
    parser.add_argument("--keep", action="store_true", help="keep the export in bench/out/")
    args = parser.parse_args(argv)
    path, written = build(args.kernels)
    size_mb = path.stat().st_size / 1e6
    print(f"export  {path.relative_to(ROOT)}  {size_mb:,.0f} MB" + ("" if written else " (cached)"))
    for key, value in written.items():
        print(
            f"  {key:<14} {value:>14,.2f}"
            if isinstance(value, float)
            else f"  {key:<14} {value:>14,}"
        )
    try:
        result = load(path)
    finally:
        if not args.keep:
            path.unlink(missing_ok=True)
    if "error" in result:
        print(f"load    skipped: {result['error']}")
        return 0
    seconds, events = float(result["seconds"]), int(result["events"])
    print(f"{'':2}{'loader':<14} {'events':>12} {'seconds':>9} {'events/s':>12} {'peak RSS':>10}")
    print(
        f"  {'tracekit.load':<14} {events:>12,} {seconds:>9.2f} {events / seconds:>12,.0f}"
        f" {int(result['max_rss_kib']) / 1024:>8,.0f} MB"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
