"""Benchmark: what role matching adds to ``tracekit.diff.compare``.

    python bench/bench_diff.py [--repeat 5] [--peer CHECKOUT] [--big PATH]

Run by hand, never as a test. Two comparisons, each timed in fresh processes that alternate
with a ``--peer`` checkout (an older tracekit that matched kernels by name only), medians
with min–max:

* ``same``: a 2M-row Kineto trace (``bench_roofline.py``'s, cached under /tmp/tracekit-bench)
  against itself, every name matched: role matching must cost nothing here;
* ``vendors``: the H100 and MI300X traces of one Hugging Face Qwen benchmark
  (``$TRACEKIT_REAL_TRACES``): every stage runs, operators read from the trace.

Only ``compare`` is timed (both sides analysed before the clock starts).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from bench_roofline import build, spread  # noqa: E402  (bench/ is a folder of scripts)

QWEN = "Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"
PAIR = (
    f"nvidia/tracelens-h100-hf-qwen1.5-0.5b/{QWEN}",
    f"amd/kineto_mi300x_hf_qwen1.5_0.5b_eager/{QWEN}",
)

CHILD = """
import json, sys, time
sys.path.insert(0, {root!r})
import tracekit
from tracekit.diff import compare
runs = [tracekit.analyze(tracekit.load(p)) for p in {paths!r}]
t = time.perf_counter()
result = compare([runs[0]], [runs[-1]], allow_low_confidence=True)
print(json.dumps({{"compare_s": time.perf_counter() - t, "rows": len(result.kernels)}}))
"""


def child(checkout: Path, paths: list[str]) -> dict:
    """One fresh process of ``checkout`` comparing ``paths`` (one path: with itself)."""
    code = CHILD.format(root=str(checkout), paths=paths)
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=checkout
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    """Time both comparisons, alternating with the peer, and print the medians."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--peer", type=Path)
    parser.add_argument("--big", default="/tmp/tracekit-bench/roofline-2000000.json")
    args = parser.parse_args()
    if not Path(args.big).is_file():
        args.big = str(build(2_000_000))
    real = Path(os.environ.get("TRACEKIT_REAL_TRACES", ROOT.parent / "shared" / "traces"))
    cases = {"same": [args.big], "vendors": [str(real / p) for p in PAIR]}
    checkouts = {"this": ROOT, **({"peer": args.peer.resolve()} if args.peer else {})}
    for case, paths in cases.items():
        times: dict[str, list[float]] = {name: [] for name in checkouts}
        rows: dict[str, int] = {}
        for _ in range(args.repeat):
            for name, checkout in checkouts.items():
                out = child(checkout, paths)
                times[name].append(out["compare_s"])
                rows[name] = out["rows"]
        for name in checkouts:
            print(f"{case:8} {name:5} compare {spread(times[name])}, {rows[name]} kernel rows")


if __name__ == "__main__":
    main()
