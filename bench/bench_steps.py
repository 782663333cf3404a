"""Benchmark: period finding (``tracekit.steps.find_steps``) on >= 1M device kernels.

    python bench/bench_steps.py [--kernels N] [--runs N] [--layers N]

Run by hand, never as a test. Builds a DeepSeek-like decode with no markers and no graph
launches (per step an input copy, the embedding, ``--layers`` layers of 14 kernels with
dispatch / combine on a second stream, final norm, LM head, two sampling kernels and the
copy of the sampled tokens back) until it holds ``--kernels`` device rows, in two shapes:
``idle`` (the host schedules between steps, 30-50 µs idle) and ``back-to-back`` (no idle
time between tokens). Each run is a fresh process that loads the rows from a cache file and
times ``find_steps`` once; the median (min-max) over ``--runs`` runs is printed with the
steps found, which must equal the steps built.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

LAYER = (("rmsnorm", "norm", 7), ("qkv_a", "gemm", 7), ("q_b", "gemm", 7),
         ("mla_decode", "attention", 7), ("mla_combine", "attention", 7), ("o_proj", "gemm", 7),
         ("allreduce_rmsnorm", "comm", 7), ("router", "gemm", 7), ("topk", "moe", 7),
         ("dispatch", "comm", 21), ("w13", "moe", 7), ("silu_and_mul", "activation", 7),
         ("w2", "moe", 7), ("combine", "comm", 21))  # fmt: skip
HEAD = (("Memcpy HtoD (Pinned -> Device)", "memory", 7), ("embedding", "other", 7))
TAIL = (
    ("final_norm", "norm", 7),
    ("lm_head", "gemm", 7),
    ("top_k_mask", "sampling", 7),
    ("top_p_sample", "sampling", 7),
    ("Memcpy DtoH (Device -> Pinned)", "memory", 7),
)
CACHE = Path(tempfile.gettempdir()) / "tracekit-bench-steps"


def build(kernels: int, layers: int, idle: bool, seed: int = 0) -> tuple[pl.DataFrame, int]:
    """Device rows of a markerless decode of at least ``kernels`` rows; and its step count."""
    step = [*HEAD, *(LAYER * layers), *TAIL]
    steps = -(-kernels // len(step))
    rng = np.random.default_rng(seed)
    n = steps * len(step)
    names = np.array([s[0] for s in step] * steps)
    dur = rng.integers(2_000, 40_000, n)
    gap = rng.integers(300, 1_500, n)
    if idle:
        gap[:: len(step)] = rng.integers(30_000, 50_000, steps)
    ts = np.cumsum(dur + gap) - (dur + gap)[0]
    frame = pl.DataFrame(
        {
            "ts": ts,
            "dur": dur,
            "kind": np.where(np.char.startswith(names, "Memcpy"), "memcpy", "kernel"),
            "name": names,
            "device": np.zeros(n, np.int32),
            "stream": np.array([s[2] for s in step] * steps, np.int64),
            "rank": np.zeros(n, np.int32),
            "corr": np.full(n, None),
            "category": np.array([s[1] for s in step] * steps),
        },
        schema_overrides={"corr": pl.Int64},
    )
    return frame.with_columns(pl.col("kind", "name", "category").cast(pl.Categorical)), steps


def child(path: Path) -> None:
    """One timed run in this fresh process: print JSON seconds and steps found."""
    from tracekit.steps import find_steps

    rows = pl.read_parquet(path)
    t = time.perf_counter()
    steps = find_steps(rows)
    seconds = time.perf_counter() - t
    print(json.dumps({"seconds": seconds, "method": steps.method, "steps": len(steps)}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernels", type=int, default=1_000_000)
    parser.add_argument("--layers", type=int, default=61)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--child", type=Path)
    args = parser.parse_args()
    if args.child:
        child(args.child)
        return
    CACHE.mkdir(exist_ok=True)
    for shape in ("idle", "back-to-back"):
        path = CACHE / f"{shape}-{args.kernels}-{args.layers}.parquet"
        frame, built = build(args.kernels, args.layers, shape == "idle")
        if not path.exists():
            frame.write_parquet(path)
        times, found = [], set()
        for _ in range(args.runs):
            out = subprocess.run(
                [sys.executable, __file__, "--child", str(path)],
                check=True,
                capture_output=True,
                text=True,
            )
            result = json.loads(out.stdout)
            times.append(result["seconds"])
            found.add((result["method"], result["steps"]))
        print(
            f"{shape:>12}: {frame.height:,} kernels, {built} steps built; found {sorted(found)};"
            f" find_steps {statistics.median(times):.2f} s ({min(times):.2f}-{max(times):.2f})"
            f" over {args.runs} fresh processes"
        )


if __name__ == "__main__":
    main()
