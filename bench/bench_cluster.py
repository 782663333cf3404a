"""Benchmark: `tracekit cluster` on 64 ranks (>= 5M events in all) with 1 and 2 workers.

    python bench/bench_cluster.py [--ranks 64] [--steps 60] [--runs 5] [--cache DIR]

Run by hand, never as a test. The multi-rank fixture (``fixtures.cluster_scenario``: one
Kineto trace per rank, per-rank clock offsets, rank 5 a persistent straggler) is written
once to ``--cache`` (outside the repository). Then ``analyze_cluster`` runs in fresh
processes, 1 and 2 workers alternating, ``--runs`` times each; every run prints its wall
time, the main process's peak RSS and each worker's peak RSS (largest over the ranks it
analysed). Medians with min–max close the output; the results of both are checked equal.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CACHE = Path("/tmp/tracekit-bench/cluster")
STRAGGLER = 5
DELAY_NS = 250_000


def build(folder: Path, ranks: int, steps: int, layers: int) -> int:
    """Write the cluster once (skipped when ``folder`` holds it); its event count."""
    done = folder / "events.txt"
    if done.is_file():
        return int(done.read_text())
    from fixtures.cluster_scenario import Late, build_cluster
    from fixtures.cluster_writers import write_kineto_cluster

    late = [Late(STRAGGLER, s, DELAY_NS) for s in range(steps)]
    t = time.perf_counter()
    cluster = build_cluster(ranks, steps=steps, layers=layers, late=late)
    events = sum(f.height for f in cluster.events.values())
    write_kineto_cluster(cluster, folder, workers=2)
    done.write_text(str(events))
    print(f"wrote {ranks} ranks, {events:,} events in {time.perf_counter() - t:.1f} s")
    return events


CHILD = """
import json, sys, time
from tracekit.cluster import analyze_cluster
from tracekit.memory import peak_rss
t = time.perf_counter()
c = analyze_cluster(sys.argv[1], workers=int(sys.argv[2]))
wall = time.perf_counter() - t
late = [f.metrics for f in c.findings if f.rule == "stragglers"]
print(json.dumps({
    "wall": wall,
    "main_rss": peak_rss(),
    "worker_rss": max(p["peak_rss"] for p in c.parts),
    "ranks": len(c.ranks), "steps": c.step_metrics.height,
    "stragglers": [(m["rank"], m["persistent"]) for m in late],
    "digest": hash(json.dumps(c.to_dict(), sort_keys=True, default=str)),
}))
"""


def run(folder: Path, workers: int) -> dict:
    """One fresh process: analyse the cluster with ``workers``."""
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(folder), str(workers)],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        env={"PYTHONHASHSEED": "0", "PATH": "/usr/bin:/bin"},
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    """Write the input once, then time 1 and 2 workers alternating."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=64)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--layers", type=int, default=61)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--cache", type=Path, default=CACHE)
    args = parser.parse_args()
    folder = args.cache / f"r{args.ranks}-s{args.steps}-l{args.layers}"
    events = build(folder, args.ranks, args.steps, args.layers)
    print(f"input: {folder} ({args.ranks} ranks, {events:,} events)")
    results: dict[int, list[dict]] = {1: [], 2: []}
    for i in range(args.runs):
        for workers in (1, 2):
            r = run(folder, workers)
            results[workers].append(r)
            main_mib, worker_mib = r["main_rss"] / 2**20, r["worker_rss"] / 2**20
            print(
                f"run {i + 1} workers={workers}: {r['wall']:.2f} s, main peak {main_mib:,.0f}"
                f" MiB, worker peak {worker_mib:,.0f} MiB, {r['ranks']} ranks,"
                f" {r['steps']} rank-steps, stragglers {r['stragglers']}, digest {r['digest']}"
            )
    for workers, rs in results.items():
        walls = [r["wall"] for r in rs]
        worker = [r["worker_rss"] / 2**20 for r in rs]
        print(
            f"workers={workers}: wall median {statistics.median(walls):.2f} s"
            f" ({min(walls):.2f}–{max(walls):.2f}), worker peak median"
            f" {statistics.median(worker):,.0f} MiB (max {max(worker):,.0f})"
        )
    digests = {r["digest"] for rs in results.values() for r in rs}
    print(f"results identical across all runs: {len(digests) == 1}")


if __name__ == "__main__":
    main()
