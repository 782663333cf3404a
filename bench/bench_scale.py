"""Benchmark: `tracekit report` and `tracekit summary` end to end on 10M events per format.

    python bench/bench_scale.py [--events 10000000] [--formats kineto,nsys,npu-db]
                                [--commands report,summary] [--cache DIR]

Run by hand, never as a test. The faulty scenario (``bench_analysis.timeline``: every fault
planted, tiled in time; for the db export the Ascend decode of ``fixtures.ascend_scenario``)
is written once per format to ``--cache`` (outside the repository):
a Kineto JSON trace, an Nsight Systems SQLite export and a torch_npu db export. Then each
command runs in a fresh process per input, which prints the wall time and the peak RSS after
each phase: read (``tracekit.load``), analyse (``tracekit.analyze``) and render (the HTML page
written for ``report``; the summary's terminal view, to /dev/null, for ``summary``), and the
page size.
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
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

CACHE = Path("/tmp/tracekit-bench/scale")
FORMATS = ("kineto", "nsys", "npu-db")


def build(fmt: str, events: int, cache: Path) -> Path:
    """The input of ``fmt`` with at least ``events`` rows, written once."""
    cache.mkdir(parents=True, exist_ok=True)
    target = {
        "kineto": cache / f"scale-{events}.json",
        "nsys": cache / f"scale-{events}.sqlite",
        "npu-db": cache / f"scale-{events}-npu",
    }[fmt]
    if target.exists():
        return target
    from bench_analysis import timeline

    t = time.perf_counter()
    if fmt == "npu-db":  # an Ascend decode (HCCL, MC², AI CPU), tiled the same way
        from fixtures.ascend_scenario import build_ascend_scenario
        from fixtures.scenario import tile_in_time
        from tracekit.timeline import KINDS

        scenario = build_ascend_scenario(steps=8, layers=8)
        frame = tile_in_time(scenario.events, KINDS, events, 50_000)
    else:
        frame = timeline(events).df.with_columns(pl.col("kind", "name", "engine").cast(pl.String))
    if fmt == "kineto":
        from fixtures.kineto_writer import write_kineto_json

        write_kineto_json(frame, target)
    elif fmt == "nsys":
        from fixtures.nsys_writer import write_nsys_sqlite

        write_nsys_sqlite(frame, target)
    else:
        from fixtures.ascend_db_writer import write_torch_npu_db

        target.mkdir()
        write_torch_npu_db(frame, target, rank=0, device=0)
    print(f"wrote {target} ({frame.height:,} rows) in {time.perf_counter() - t:.0f} s")
    return target


CHILD = """
import json, sys, time
from pathlib import Path
import tracekit
from tracekit.analysis import analyze

from tracekit.memory import peak_rss as rss

path, command, out = sys.argv[1], sys.argv[2], sys.argv[3]
phases, t0 = [], time.perf_counter()
t = time.perf_counter(); tl = tracekit.load(path)
phases.append(("read", time.perf_counter() - t, rss()))
t = time.perf_counter(); analysis = analyze(tl)
phases.append(("analyse", time.perf_counter() - t, rss()))
t = time.perf_counter(); size = 0
if command == "report":
    from tracekit.reports.report import render
    page = render([analysis], "html").encode()
    Path(out).write_bytes(page); size = len(page)
else:  # what `tracekit summary` prints
    from rich.console import Console, Group
    from tracekit import stats
    from tracekit.reports import steps_terminal, terminal
    data, result = stats.summary(tl, top=15), analysis.to_dict()
    console = Console(file=open("/dev/null", "w"), width=120)
    console.print(Group(*steps_terminal.header_lines(result), terminal.render_summary(data, 60),
                        steps_terminal.render_analysis(result, 120, confidence=False)))
phases.append(("render", time.perf_counter() - t, rss()))
print(json.dumps({"rows": len(tl), "phases": phases, "wall": time.perf_counter() - t0,
                  "page": size}))
"""


def run(path: Path, command: str, out: Path) -> dict:
    """One fresh process: read, analyse and render ``path``."""
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(path), command, str(out)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    if done.returncode:
        return {"error": done.stderr.strip().splitlines()[-1:]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    """Write the inputs once, then run each command on each in a fresh process."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=10_000_000)
    # npu-db: the db writer refuses a tiled scenario (HCCL op ids repeat per tile) — to do
    parser.add_argument("--formats", default="kineto,nsys")
    parser.add_argument("--commands", default="report,summary")
    parser.add_argument("--cache", type=Path, default=CACHE)
    args = parser.parse_args()
    for fmt in args.formats.split(","):
        path = build(fmt, args.events, args.cache)
        for command in args.commands.split(","):
            r = run(path, command, args.cache / f"{fmt}-{command}.html")
            if "error" in r:
                print(f"{fmt} {command}: failed: {r['error']}")
                continue
            parts = ", ".join(
                f"{name} {secs:.1f} s (peak {peak / 2**30:.2f} GiB)"
                for name, secs, peak in r["phases"]
            )
            page = f", page {r['page'] / 1e6:.1f} MB" if r["page"] else ""
            print(f"{fmt} {command}: {r['rows']:,} rows, {r['wall']:.1f} s: {parts}{page}")


if __name__ == "__main__":
    main()
