"""Benchmark: load a scaled torch_npu text export (>= 1M device tasks) with ``tracekit.load``,
and time msprof-analyze on the same folder.

    python bench/bench_msprof_load.py [--tasks N] [--runs 3] [--one-process] [--analyze] [--clean]

Builds the Ascend decode scenario (``fixtures.ascend_scenario``: MC² dispatch/combine with
their Aicpu side, AI CPU tasks, HCCL all-to-all and all-reduce) once, tiles it in time until it
holds at least ``--tasks`` device tasks (kernels, copies, HCCL operators and plane tasks), and
writes it with ``fixtures.ascend_text_writer`` into ``bench/out/ascend_pt_<N>/`` (reused while
present; ``--clean`` removes it afterwards). Each load runs in a fresh subprocess, ``--runs``
times; the script prints per run the input events (trace events + table rows, counted as the
Kineto benchmark counts ``traceEvents``), the timeline rows, seconds and events/s, then the best
and the median. A timeline JSON over 128 MB is decoded by several processes (one per core, at
most 8); ``--one-process`` sets ``TRACEKIT_PROCESSES=1`` to time the single-process path.

``--analyze`` also times msprof-analyze, installed only for this comparison in
``bench/out/msprof-analyze-venv`` (``pip install msprof-analyze``), on the same folder: its
cheapest analysis of a text export (``cluster -m communication_time``; the cluster recipes that
read the task tables, such as ``compute_op_sum``, accept only db exports) and the one that reads
the device tasks (``advisor computation``). Output goes to a temporary folder.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import polars as pl

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "out"
sys.path.insert(0, str(ROOT))

from fixtures.ascend_scenario import build_ascend_scenario  # noqa: E402
from fixtures.ascend_text_writer import write_torch_npu  # noqa: E402
from fixtures.scenario import tile_in_time  # noqa: E402

BASE = {"steps": 8, "layers": 61, "unfused_collective": True, "hccl_all_to_all_layers": 3}
DEVICE_KINDS = ("kernel", "memcpy", "sync", "comm")
TILE_GAP_NS = 5_000_000
VENV = OUT / "msprof-analyze-venv"

LOADER = """
import json, sys, time
from pathlib import Path
t0 = time.perf_counter()
import tracekit
timeline = tracekit.load(Path(sys.argv[1]))
seconds = time.perf_counter() - t0
hwm = [int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM")]
import msgspec
out = Path(sys.argv[1]) / "ASCEND_PROFILER_OUTPUT"
trace = msgspec.json.decode((out / "trace_view.json").read_bytes(), type=list[msgspec.Raw])
tables = sum(sum(1 for _ in open(p)) - 1 for p in out.glob("*.csv"))
df = timeline.df
print(json.dumps({"seconds": seconds, "rows": len(timeline), "inputs": len(trace) + tables,
                  "device": int(df["kind"].cast(str).is_in(DEVICE_KINDS).sum()),
                  "warnings": timeline.meta["warnings"], "max_rss_kib": hwm[0]}))
""".replace("DEVICE_KINDS", repr(DEVICE_KINDS))


def build(tasks: int) -> Path:
    """The scaled torch_npu folder (written once, reused while present)."""
    folder = OUT / f"ascend_pt_{tasks}"
    found = list(folder.glob("*_ascend_pt")) if folder.exists() else []
    if found:
        return found[0]
    shutil.rmtree(folder, ignore_errors=True)
    t0 = time.perf_counter()
    events = tile_in_time(build_ascend_scenario(**BASE).events, DEVICE_KINDS, tasks, TILE_GAP_NS)
    print(
        f"scenario: {events.height:,} rows, "
        f"{events.filter(pl.col('kind').is_in(DEVICE_KINDS)).height:,} device tasks "
        f"({time.perf_counter() - t0:.1f} s)",
        flush=True,
    )
    t0 = time.perf_counter()
    path = write_torch_npu(events, folder, overlap=False)
    size = sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 1e6
    print(f"written {path.relative_to(ROOT)}: {size:,.0f} MB in {time.perf_counter() - t0:.1f} s")
    return path


def load_runs(path: Path, runs: int, one_process: bool = False) -> list[dict]:
    results = []
    env = {**os.environ, **({"TRACEKIT_PROCESSES": "1"} if one_process else {})}
    for run in range(runs):
        done = subprocess.run(
            [sys.executable, "-c", LOADER, str(path)],
            capture_output=True,
            text=True,
            cwd=ROOT,
            check=False,
            env=env,
        )
        if done.returncode:
            raise SystemExit(f"load failed: {done.stderr.strip().splitlines()[-1]}")
        result = json.loads(done.stdout.strip().splitlines()[-1])
        result["rate"] = result["inputs"] / result["seconds"]
        results.append(result)
        print(
            f"tracekit run {run + 1}: {result['inputs']:,} input events (trace events + table"
            f" rows) -> {result['rows']:,} timeline rows ({result['device']:,} device) in"
            f" {result['seconds']:.2f} s = {result['rate']:,.0f} events/s"
            f" ({result['rows'] / result['seconds']:,.0f} rows/s),"
            f" peak RSS {result['max_rss_kib'] / 1024:,.0f} MiB",
            flush=True,
        )
    return results


ANALYSES = {
    # the cheapest analysis msprof-analyze runs on a text export: its cluster recipes that
    # read the task tables (compute_op_sum …) accept only db exports
    "cluster -m communication_time": ["cluster", "-m", "communication_time"],
    # the one that reads the device tasks of a text export (kernel_details.csv, trace_view.json)
    "advisor computation": ["advisor", "computation"],
}


def analyze_runs(path: Path, runs: int) -> dict[str, list[float]] | None:
    """Seconds of each of :data:`ANALYSES` on ``path`` (output in a temporary folder); None
    when msprof-analyze is not installed in the bench venv."""
    exe = VENV / "bin" / "msprof-analyze"
    if not exe.exists():
        print(
            f"msprof-analyze: not installed ({exe} missing); run "
            f"`python -m venv {VENV} && {VENV}/bin/pip install msprof-analyze`"
        )
        return None
    times: dict[str, list[float]] = {}
    for label, argv in ANALYSES.items():
        for run in range(runs):
            with tempfile.TemporaryDirectory() as tmp:
                target = path
                if argv[0] == "cluster":  # a folder of ranks; it skips symlinked ones
                    target = Path(tmp) / "cluster"
                    target.mkdir()
                    shutil.copytree(path, target / path.name, copy_function=os.link)
                command = [str(exe), *argv, "-d", str(target), "-o", str(Path(tmp) / "out")]
                t0 = time.perf_counter()
                done = subprocess.run(
                    command, capture_output=True, text=True, check=False, timeout=1800
                )
                seconds = time.perf_counter() - t0
            tail = (done.stdout + done.stderr).strip().splitlines()[-1:]
            print(
                f"msprof-analyze {label} run {run + 1}: exit {done.returncode} in"
                f" {seconds:.2f} s; {' | '.join(tail)[:200]}",
                flush=True,
            )
            times.setdefault(label, []).append(seconds)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--one-process", action="store_true")
    parser.add_argument("--analyze", action="store_true")
    parser.add_argument("--clean", action="store_true")
    args = parser.parse_args()
    path = build(args.tasks)
    results = load_runs(path, args.runs, args.one_process)
    rates = [r["rate"] for r in results]
    print(
        f"tracekit: best {max(rates):,.0f} events/s, median {statistics.median(rates):,.0f}"
        f" events/s ({min(r['seconds'] for r in results):.2f} s best,"
        f" {statistics.median(r['seconds'] for r in results):.2f} s median)"
    )
    if args.analyze:
        for label, times in (analyze_runs(path, args.runs) or {}).items():
            print(
                f"msprof-analyze {label}: best {min(times):.2f} s, "
                f"median {statistics.median(times):.2f} s"
            )
    if args.clean:
        shutil.rmtree(path.parent, ignore_errors=True)


if __name__ == "__main__":
    main()
