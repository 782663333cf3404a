"""Benchmark: start-up of the ``tracekit`` command (what each command imports).

    python bench/bench_startup.py [--repeat 7] [--peer CHECKOUT]

Run by hand, never as a test. Each command is run in fresh processes, alternating between
this checkout and a ``--peer`` checkout (e.g. ``main`` before the start-up work), and the
wall time of the whole process (interpreter start, imports, the command, exit) is printed as
a median with min–max:

* ``--help``: the command list (typer and rich only);
* ``info demo.sqlite``: read the bundled Nsight Systems demo and print its inventory;
* ``summary demo.sqlite``: read, analyse and print the demo's summary.

The child runs the console entry point (``tracekit.cli:run``) with the checkout first on
``sys.path``, so both checkouts share this interpreter and its installed packages. Each
line also names the heavy third-party modules the command imported (``sys.modules`` at exit).
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
DEMO = ROOT / "tracekit" / "data" / "demo.sqlite"
COMMANDS = {
    "--help": ["--help"],
    "info": ["info", str(DEMO)],
    "summary": ["summary", str(DEMO)],
}
HEAVY = ("polars", "pyarrow", "numpy", "pydantic", "dask", "distributed", "plotly", "pycxxfilt")

CHILD = """
import atexit, json, os, sys
sys.path.insert(0, {root!r})
def _report():
    seen = [m for m in {heavy!r} if m in sys.modules]
    where = sys.modules["tracekit"].__file__
    os.write(2, ("STARTUP " + json.dumps([where, seen]) + "\\n").encode())
atexit.register(_report)
from tracekit.cli import run
sys.exit(run({argv!r}))
"""


def child(checkout: Path, argv: list[str]) -> tuple[float, list[str]]:
    """Wall seconds of one fresh process of ``checkout`` running ``tracekit argv``, and the
    heavy modules it imported."""
    code = CHILD.format(root=str(checkout), heavy=HEAVY, argv=argv)
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=checkout
    )
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{checkout}: tracekit {' '.join(argv)} failed: {done.stderr[-500:]}")
    line = next(x for x in done.stderr.splitlines() if x.startswith("STARTUP "))
    where, seen = json.loads(line.removeprefix("STARTUP "))
    if not Path(where).is_relative_to(checkout):  # an installed tracekit came first
        raise SystemExit(f"{checkout}: ran the tracekit in {where} instead")
    return wall, seen


def spread(values: list[float]) -> str:
    """``median s (min–max)``."""
    return f"{statistics.median(values):.3f} s ({min(values):.3f}–{max(values):.3f})"


def main() -> None:
    """Alternate fresh processes of both checkouts per command; print medians with min–max."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--peer", type=Path, help="another checkout of tracekit")
    args = parser.parse_args()
    checkouts = {"this": ROOT, **({"peer": args.peer.resolve()} if args.peer else {})}
    for checkout in checkouts.values():  # warm the file cache and the bytecode once
        for argv in COMMANDS.values():
            child(checkout, argv)
    for command, argv in COMMANDS.items():
        times: dict[str, list[float]] = {name: [] for name in checkouts}
        heavy: dict[str, list[str]] = {}
        for _ in range(args.repeat):
            for name, checkout in checkouts.items():
                wall, heavy[name] = child(checkout, argv)
                times[name].append(wall)
        for name in checkouts:
            imported = ", ".join(heavy[name]) or "none"
            print(f"{command:8} {name:5} {spread(times[name])}  heavy imports: {imported}")


if __name__ == "__main__":
    main()
