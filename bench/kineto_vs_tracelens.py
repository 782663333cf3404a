"""Benchmark: `tracekit report` against TraceLens's performance report on one Kineto trace.

    python bench/kineto_vs_tracelens.py [--trace PATH] [--repeat 5] [--tracelens PROGRAM]

Run by hand, never as a test. Each run is one fresh process per tool, the two alternating:
``tracekit report TRACE -o page.html`` (read, analyse, the HTML page) and TraceLens's
``TraceLens_generate_perf_report_pytorch --profile_json_path TRACE --output_csvs_dir DIR``
(its tree, GPU timeline, op and kernel tables as CSV: its lightest output). Wall time and the
peak resident memory of each process tree (its processes' RSS summed, sampled every 10 ms)
are printed per run, then medians with min–max and the ratios. The default trace is
``$TRACEKIT_REAL_TRACES/nvidia/hta-v100-ddp-allreduce/df_index_resolver.json.gz`` (91 MB of
JSON); TraceLens is installed by hand (``pip install`` of AMD-AGI/TraceLens in a venv).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from bench_roofline import spread  # noqa: E402  (bench/ is a folder of scripts)

DEFAULT_REL = Path("nvidia/hta-v100-ddp-allreduce/df_index_resolver.json.gz")
TRACELENS = Path("/work/tl-venv/bin/TraceLens_generate_perf_report_pytorch")


def tree_rss_kib(pid: int) -> int:
    """Resident memory of ``pid`` and its descendants, in KiB (0 once it has exited)."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/status") as fh:
                total += next((int(x.split()[1]) for x in fh if x.startswith("VmRSS:")), 0)
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as fh:
                    todo.extend(int(c) for c in fh.read().split())
        except (OSError, ValueError):
            continue
    return total


def timed(command: list[str]) -> tuple[float, float]:
    """Run ``command``: wall seconds and the peak RSS of its process tree in MB."""
    start = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peak = 0
    while proc.poll() is None:
        peak = max(peak, tree_rss_kib(proc.pid))
        time.sleep(0.01)
    wall = time.perf_counter() - start
    if proc.returncode:
        tail = (proc.stderr.read().decode(errors="replace").strip().splitlines() or [""])[-1]
        raise SystemExit(f"{command[0]} failed ({proc.returncode}): {tail}")
    return wall, peak / 1024


def main() -> None:
    """Alternate the two tools ``--repeat`` times and print the medians and ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    base = Path(os.environ.get("TRACEKIT_REAL_TRACES", ROOT.parent / "shared" / "traces"))
    parser.add_argument("--trace", type=Path, default=base / DEFAULT_REL)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--tracelens", type=Path, default=TRACELENS)
    args = parser.parse_args()
    if not args.tracelens.exists():
        raise SystemExit(f"{args.tracelens}: TraceLens is not installed; pass --tracelens")
    tracekit = shutil.which("tracekit") or str(Path(sys.executable).parent / "tracekit")
    runs: dict[str, list[tuple[float, float]]] = {"tracekit": [], "TraceLens": []}
    with tempfile.TemporaryDirectory(prefix="tk-vs-tl-") as tmp:
        commands = {
            "tracekit": [tracekit, "report", str(args.trace), "-o", f"{tmp}/page.html"],
            "TraceLens": [str(args.tracelens), "--profile_json_path", str(args.trace),
                          "--output_csvs_dir", f"{tmp}/csv"],
        }  # fmt: skip
        for i in range(args.repeat):
            for name, command in commands.items():
                wall, peak = timed(command)
                runs[name].append((wall, peak))
                print(f"  run {i + 1}/{args.repeat} {name:<9} {wall:6.2f} s  {peak:7,.0f} MB")
    for name, values in runs.items():
        walls, peaks = [w for w, _ in values], [p for _, p in values]
        print(f"{name:<9} wall {spread(walls, 's')}  peak {spread(peaks, 'MB')}")
    ours, theirs = runs["tracekit"], runs["TraceLens"]
    speed = statistics.median(w for w, _ in theirs) / statistics.median(w for w, _ in ours)
    memory = statistics.median(p for _, p in ours) / statistics.median(p for _, p in theirs)
    print(f"tracekit is {speed:.1f}x faster (target >= 25x) at {memory:.2f} of TraceLens's memory"
          " (target <= 0.25)")  # fmt: skip


if __name__ == "__main__":
    main()
