"""Benchmark: `tracekit report` and `tracekit summary` end to end on 10M events per format.

    python bench/bench_scale.py [--events 10000000] [--formats kineto,nsys,npu-db,kineto-steps]
                                [--commands report,summary] [--cache DIR]
                                [--repeat N] [--peer CHECKOUT]

Run by hand, never as a test. The faulty scenario (``bench_analysis.timeline``: every fault
planted, tiled in time; for the db export the Ascend decode of ``fixtures.ascend_scenario``)
is written once per format to ``--cache`` (outside the repository):
a Kineto JSON trace, an Nsight Systems SQLite export and a torch_npu db export; and
``kineto-steps``, many tiny steps (a small model decoding for long under one CUDA graph per
step: the one-layer scenario's graph kernels, 13 a step, one ``cudaGraphLaunch``, tiled in
time), a Kineto JSON trace of ``--events`` trace events, ~35 a step: 10M events are ~280,000
steps, ~4.5M timeline rows. Then each
command runs in a fresh process per input, which prints the wall time and the peak RSS after
each phase: read (``tracekit.load``), analyse (``tracekit.analyze``) and render (the HTML page
written for ``report``; the summary's terminal view, to /dev/null, for ``summary``), and the
page size. With ``--peer`` (another checkout, e.g. ``git worktree add /tmp/base main~5``) the
two alternate run by run; ``--repeat`` runs give medians with min–max.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import polars as pl

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

CACHE = Path("/tmp/tracekit-bench/scale")
FORMATS = ("kineto", "nsys", "npu-db")  # the default; kineto-steps on demand
STEP_ROWS = 38  # timeline rows per step of the many-step input


def build(fmt: str, events: int, cache: Path) -> Path:
    """The input of ``fmt`` with at least ``events`` rows (Kineto: trace events), written
    once."""
    cache.mkdir(parents=True, exist_ok=True)
    target = {
        "kineto": cache / f"scale-{events}.json",
        "nsys": cache / f"scale-{events}.sqlite",
        "npu-db": cache / f"scale-{events}-npu",
        "kineto-steps": cache / f"steps-{events}.json",
    }[fmt]
    if target.exists():
        return target
    from bench_analysis import timeline

    t = time.perf_counter()
    if fmt == "npu-db":
        return _npu_db(events, target, t)
    if fmt == "kineto-steps":
        from fixtures.kineto_writer import write_kineto_json

        frame = _strings(many_steps(events * 1000 // _events_per_1000_rows(many_steps(16_000))))
        write_kineto_json(frame, target)
        print(f"wrote {target} ({frame.height:,} rows) in {time.perf_counter() - t:.0f} s")
        return target
    if fmt == "kineto":
        from fixtures.kineto_writer import write_kineto_json

        # a Kineto trace of `events` trace events (the writer adds flow events to the rows)
        frame = timeline(-(-events * 1000 // _events_per_1000_rows(timeline(100_000).df))).df
        write_kineto_json(_strings(frame), target)
    else:
        frame = _strings(timeline(events).df)
        from fixtures.nsys_writer import write_nsys_sqlite

        write_nsys_sqlite(frame, target)
    print(f"wrote {target} ({frame.height:,} rows) in {time.perf_counter() - t:.0f} s")
    return target


def many_steps(rows: int) -> pl.DataFrame:
    """At least ``rows`` timeline rows of a small model decoding for long: one step of
    :func:`_graph_step` tiled in time."""
    from fixtures.scenario import tile_in_time
    from tracekit.timeline import KINDS

    return tile_in_time(_graph_step(), KINDS, rows, 50_000)


def _graph_step() -> pl.DataFrame:
    """The first step of the one-layer scenario (piecewise CUDA graphs, 20 % jitter) as one
    full CUDA graph: its step range, its first ``cudaGraphLaunch`` and the 13 kernels its
    graphs ran on the compute and communication streams, all under that launch's correlation
    id; the shared-expert stream, the eager launches, copies and sync left out."""
    from fixtures.scenario import build_scenario

    events = build_scenario(steps=1, layers=1, graphs="piecewise", jitter=0.2).events
    launches = events.filter(pl.col("name").cast(pl.String) == "cudaGraphLaunch")
    graph_corr = launches["corr"].to_list()
    first = launches.head(1)
    kernels = events.filter(
        pl.col("kind") == "kernel", pl.col("corr").is_in(graph_corr), pl.col("stream") != 13
    )
    step = pl.concat([events.filter(pl.col("kind") == "range"), first, kernels.with_columns(
        corr=pl.lit(first["corr"].item(), pl.Int64))])  # fmt: skip
    return step.sort("ts", maintain_order=True)


def _strings(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.with_columns(pl.col("kind", "name", "engine").cast(pl.String))


def _events_per_1000_rows(frame: pl.DataFrame) -> int:
    """Trace events the Kineto writer makes of 1,000 rows of ``frame``."""
    import tempfile

    from fixtures.kineto_writer import write_kineto_json

    frame = _strings(frame)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "t.json"
        write_kineto_json(frame, path)
        written = len(json.loads(path.read_text())["traceEvents"])
    return written * 1000 // frame.height


# (table, columns shifted by the tile's time span, columns shifted by their id span)
DB_TILES = (
    ("TASK", ("startNs", "endNs"), ("connectionId", "globalTaskId")),
    ("COMPUTE_TASK_INFO", (), ("globalTaskId",)),
    ("COMMUNICATION_TASK_INFO", (), ("globalTaskId", "opId")),
    ("COMMUNICATION_OP", ("startNs", "endNs"), ("connectionId", "opId")),
    ("CANN_API", ("startNs", "endNs"), ("connectionId",)),
    ("PYTORCH_API", ("startNs", "endNs"), ("connectionId",)),
    ("STEP_TIME", ("startNs", "endNs"), ("id",)),
)


def _npu_db(events: int, target: Path, started: float) -> Path:
    """A torch_npu db export of an Ascend decode (HCCL, MC², AI CPU) with at least
    ``events`` timeline rows: one copy written by the fixture writer, then repeated in time
    inside SQLite (ids shifted per copy; the Python writer would hold 10M rows as dicts), its
    ``analysis.db`` left out."""
    import sqlite3

    import tracekit
    from fixtures.ascend_db_writer import write_torch_npu_db
    from fixtures.ascend_scenario import build_ascend_scenario

    target.mkdir()
    out = write_torch_npu_db(build_ascend_scenario(steps=8, layers=8).events, target, rank=0)
    per_tile = len(tracekit.load(out))
    tiles = -(-events // per_tile)
    db = next(out.rglob("ascend_pytorch_profiler_*.db"))
    with sqlite3.connect(db) as con:
        first, last = con.execute("SELECT startTimeNs, endTimeNs FROM SESSION_TIME_INFO").fetchone()
        span = last - first + 50_000
        con.execute(
            "CREATE TEMP TABLE tiles AS WITH RECURSIVE k(n) AS (SELECT 1 UNION ALL SELECT n + 1"
            f" FROM k WHERE n < {tiles - 1}) SELECT n FROM k"
        )
        # an id shifts by one span in every table that holds it (a launch's connectionId in
        # CANN_API and its task's in TASK must still match in each copy)
        spans: dict[str, int] = {}
        for table, _, ids in DB_TILES:
            for c in ids:
                top = con.execute(f"SELECT max({c}) + 1 FROM {table}").fetchone()[0] or 0
                spans[c] = max(spans.get(c, 0), int(top))
        for table, times, ids in DB_TILES:
            columns = [r[1] for r in con.execute(f"PRAGMA table_info({table})")]
            shifted = [
                f"CAST(CAST({c} AS INTEGER) + n * {span} AS TEXT)"
                if table == "PYTORCH_API" and c in times
                else f"{c} + n * {span}"
                if c in times
                else f"{c} + n * {spans[c]}"
                if c in ids
                else c
                for c in columns
            ]
            con.execute(f"INSERT INTO {table} SELECT {', '.join(shifted)} FROM {table}, tiles")
        con.execute(f"UPDATE SESSION_TIME_INFO SET endTimeNs = endTimeNs + {(tiles - 1) * span}")
    con.close()
    # torch_npu's step summary (analysis.db) names 8 steps; the copies would not match it
    next(out.rglob("analysis.db")).unlink()
    print(
        f"wrote {target} ({per_tile:,} rows x {tiles:,}) in {time.perf_counter() - started:.0f} s"
    )
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


def run(path: Path, command: str, out: Path, checkout: Path = ROOT) -> dict:
    """One fresh process of the tracekit in ``checkout``: read, analyse and render ``path``."""
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(path), command, str(out)],
        capture_output=True,
        text=True,
        cwd=checkout,  # `python -c` imports tracekit from the working directory first
    )
    if done.returncode:
        return {"error": done.stderr.strip().splitlines()[-1:]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def _spread(values: list[float], unit: str = "s") -> str:
    """Median and min–max of ``values``."""
    low, high = min(values), max(values)
    if len(values) == 1:
        return f"{values[0]:.1f} {unit}"
    return f"{statistics.median(values):.1f} {unit} ({low:.1f}–{high:.1f})"


def report(label: str, runs: list[dict]) -> str:
    """One line: wall time, each phase's time and the peak RSS, as medians with min–max."""
    good = [r for r in runs if "error" not in r]
    if not good:
        return f"{label}: failed: {runs[0]['error']}"
    names = [name for name, _, _ in good[0]["phases"]]
    parts = [f"{name} {_spread([r['phases'][i][1] for r in good])}" for i, name in enumerate(names)]
    peak = _spread([max(p[2] for p in r["phases"]) / 2**30 for r in good], "GiB")
    page = f", page {good[0]['page'] / 1e6:.1f} MB" if good[0]["page"] else ""
    return (
        f"{label}: {good[0]['rows']:,} rows, {len(good)} run(s): wall "
        f"{_spread([r['wall'] for r in good])}; {'; '.join(parts)}; peak {peak}{page}"
    )


def main() -> None:
    """Write the inputs once, then run each command on each in fresh processes, this
    checkout and the ``--peer`` checkout alternating."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=10_000_000)
    parser.add_argument("--formats", default=",".join(FORMATS))
    parser.add_argument("--commands", default="report,summary")
    parser.add_argument("--cache", type=Path, default=CACHE)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--peer", type=Path, help="another checkout to compare against")
    args = parser.parse_args()
    checkouts = {"this": ROOT, **({"peer": args.peer.resolve()} if args.peer else {})}
    for fmt in args.formats.split(","):
        path = build(fmt, args.events, args.cache)
        for command in args.commands.split(","):
            runs: dict[str, list[dict]] = {name: [] for name in checkouts}
            for _ in range(args.repeat):
                for name, checkout in checkouts.items():
                    out = args.cache / f"{fmt}-{command}-{name}.html"
                    runs[name].append(run(path, command, out, checkout))
            for name in checkouts:
                print(report(f"{fmt} {command} [{name}]", runs[name]), flush=True)


if __name__ == "__main__":
    main()
