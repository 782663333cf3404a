"""Benchmark: load a scaled rocprofv3 CSV set and a rocpd database with ``tracekit.load``.

    python bench/bench_rocprof_load.py [--kernels N] [--no-args] [--clean]

Builds the fixture scenario once and tiles it in time with polars until it holds at least
``--kernels`` kernel dispatches (hipMemsetAsync blit kernels included), then writes it with
the fixture writers into ``bench/out/`` (``rocprofv3_<N>/`` and ``rocpd_<N>.db``; reused
while present, ``--clean`` removes them afterwards). Each output is then loaded in a fresh
subprocess, so that the writer's memory does not count, and the script prints the writers'
wall/CPU seconds, then load seconds, events/s and peak RSS (VmHWM) per output. When
``tracekit.load`` cannot read the output yet (the parser is not wired into the registry),
it calls the parser object directly and says so.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import polars as pl

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "out"
sys.path.insert(0, str(ROOT))

from fixtures.rocpd_writer import write_rocpd  # noqa: E402
from fixtures.rocprof_csv_writer import write_rocprofv3_csv  # noqa: E402
from fixtures.scenario import build_scenario, tile_in_time  # noqa: E402

BASE = {"steps": 16, "layers": 61, "fallback_kernel": True, "idle_bubble_ns": 150_000}
TILE_GAP_NS = 5_000_000

# argv: path, module, parser object name. Prints one JSON line.
LOADER = """
import importlib, json, resource, sys, time
from pathlib import Path
path, module, name = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
how = "tracekit.load"
t0 = time.perf_counter()
try:
    import tracekit
    timeline = tracekit.load(path)
except Exception as exc:
    why = str(exc).strip().splitlines()[0][:160] if str(exc).strip() else type(exc).__name__
    try:
        parser = getattr(importlib.import_module(module), name)
    except Exception as exc2:
        print(json.dumps({"error": f"tracekit.load failed ({why}); no {module}.{name}: {exc2!r}"}))
        sys.exit(0)
    how = f"{module}.{name}.parse (tracekit.load: {why})"
    t0 = time.perf_counter()
    timeline = parser.parse(path)
seconds = time.perf_counter() - t0
# VmHWM, not ru_maxrss: Linux carries the parent's high-water mark across fork + exec
hwm = [int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM")]
print(json.dumps({
    "how": how,
    "seconds": seconds,
    "events": len(timeline),
    "kernels": int((timeline.df["kind"].cast(str) == "kernel").sum()),
    "warnings": timeline.meta.get("warnings", []),
    "max_rss_kib": hwm[0] if hwm else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
}))
"""


def tiled_events(kernels: int) -> pl.DataFrame:
    """The base scenario repeated in time until it has at least ``kernels`` dispatches."""
    return tile_in_time(build_scenario(**BASE).events, ("kernel", "memset"), kernels, TILE_GAP_NS)


def _size_mb(path: Path) -> float:
    files = path.rglob("*") if path.is_dir() else [path]
    return sum(p.stat().st_size for p in files if p.is_file()) / 1e6


def build(kernels: int, api_args: bool) -> list[tuple[str, Path, str, str, dict]]:
    """Write (or reuse) both outputs; return (label, path, module, parser, write figures)."""
    OUT.mkdir(parents=True, exist_ok=True)
    csv_dir = OUT / f"rocprofv3_{kernels}"
    db = OUT / f"rocpd_{kernels}{'' if api_args else '_noargs'}.db"
    events: pl.DataFrame | None = None
    figures: dict[str, dict] = {"csv": {}, "rocpd": {}}
    if db.exists() and db.stat().st_size == 0:  # an interrupted or foreign empty file
        db.unlink()
    if not (csv_dir / "bench_kernel_trace.csv").exists() or not db.exists():
        t0 = time.perf_counter()
        events = tiled_events(kernels)
        counts = dict(events.group_by("kind").len().iter_rows())
        kernels_n, memsets = counts.get("kernel", 0), counts.get("memset", 0)
        took = time.perf_counter() - t0
        print(f"scenario  {events.height:,} rows, {kernels_n:,} kernels + {memsets:,} memsets,")
        print(f"          tiled in {took:.1f} s")
    if not (csv_dir / "bench_kernel_trace.csv").exists():
        shutil.rmtree(csv_dir, ignore_errors=True)
        t0, c0 = time.perf_counter(), time.process_time()
        write_rocprofv3_csv(events, csv_dir, "bench")
        figures["csv"] = {"write (s)": time.perf_counter() - t0, "cpu": time.process_time() - c0}
    if not db.exists():
        t0, c0 = time.perf_counter(), time.process_time()
        write_rocpd(events, db, api_args=api_args)
        figures["rocpd"] = {"write (s)": time.perf_counter() - t0, "cpu": time.process_time() - c0}
    return [
        ("rocprofv3 CSV", csv_dir, "tracekit.parsers.rocprof", "ROCPROFV3_CSV", figures["csv"]),
        ("rocpd", db, "tracekit.parsers.rocprof.rocpd", "ROCPD", figures["rocpd"]),
    ]


def load(path: Path, module: str, name: str) -> dict:
    """Load ``path`` in a subprocess and return its measurements."""
    done = subprocess.run(
        [sys.executable, "-c", LOADER, str(path), module, name],
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
    parser.add_argument("--kernels", type=int, default=2_000_000, help="dispatches (minimum)")
    parser.add_argument("--no-args", action="store_true", help="rocpd without rocpd_arg rows")
    parser.add_argument("--clean", action="store_true", help="remove the outputs afterwards")
    args = parser.parse_args(argv)
    outputs = build(args.kernels, not args.no_args)
    header = f"  {'output':<14} {'MB':>7} {'write s/cpu':>10} {'events':>11} {'kernels':>10}"
    print(header + f" {'load s':>7} {'events/s':>11} {'peak RSS':>9}")
    notes = []
    for label, path, module, name, written in outputs:
        result = load(path, module, name)
        write = written.get("write (s)")
        took = f"{write:.1f}/{written['cpu']:.0f}" if write is not None else "cached"
        cells = f"  {label:<14} {_size_mb(path):>7,.0f} {took:>10}"
        if "error" in result:
            print(f"{cells}  load failed: {result['error']}")
            continue
        seconds, events = float(result["seconds"]), int(result["events"])
        rss = int(result["max_rss_kib"]) / 1024
        print(
            f"{cells} {events:>11,} {result['kernels']:>10,} {seconds:>7.2f}"
            f" {events / seconds:>11,.0f} {rss:>7,.0f} MB"
        )
        if result["how"] != "tracekit.load":
            notes.append(f"{label}: loaded with {result['how']}")
        if result["warnings"]:
            notes.append(f"{label}: warnings {result['warnings']}")
    for note in notes:
        print(f"  note: {note}")
    if not any(w for *_, w in outputs):
        print("  (outputs reused from bench/out/; write times not measured)")
    if args.clean:
        for _, path, *_ in outputs:
            shutil.rmtree(path) if path.is_dir() else path.unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
