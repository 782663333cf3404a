"""Benchmark: ``tracekit.load`` against HolisticTraceAnalysis on the same Kineto trace.

    python bench/kineto_vs_hta.py [--trace PATH] [--scaled-events N] [--repeat N]

Run by hand, never as a test. For the input trace (default: the largest real Kineto
sample, ``$TRACEKIT_REAL_TRACES/nvidia/hta-v100-ddp-allreduce/df_index_resolver.json.gz``)
and for a copy of it tiled in time to at least ``--scaled-events`` events (written once to
``bench/out/`` and reused), both loaders are run ``--repeat`` times, each run in a fresh
``python -c`` subprocess, alternating tracekit and HTA. The medians are printed as a table
with the speed ratio (HTA seconds / tracekit seconds) and the RSS ratio (tracekit / HTA),
and checked against the targets: >= 10x faster than HTA, >= 500k events/s, peak RSS
below HTA's.

What is timed (``time.perf_counter`` around one call, imports excluded):

* tracekit (main environment): ``tracekit.load(path)``, which returns a fully built
  ``Timeline``; ``len(timeline)`` is read afterwards as its row count. The import time
  printed is ``import tracekit`` plus ``tracekit.parsers.registry()``, which imports
  the parser modules that ``load`` would otherwise import lazily on its first call.
* HTA (its own venv, ``bench/out/hta-venv``, ``pip install HolisticTraceAnalysis``):
  ``TraceAnalysis(trace_dir=d)`` where ``d`` is a temporary directory holding only a
  symlink to the trace. HTA parses eagerly: the constructor builds ``Trace`` (which scans
  the directory and reads each file up to its ``"rank": N`` line to map rank -> file) and
  calls ``Trace.load_traces()``, which runs ``parse_traces`` -> ``parse_trace_file``
  (default ``ParserBackend.JSON``: gzip + ``json.loads`` of the whole file, a pandas
  DataFrame of all events, rows without ``dur`` such as flows, instants and metadata
  dropped, ``args`` expanded into the default columns, names/categories encoded in a symbol
  table, fwd/bwd links, kernel<->launch ``index_correlation``, ``iteration`` per event),
  then ``align_and_filter_trace`` (timestamps shifted to 0, GPU kernels of the last
  profiler step dropped) and sets the index; it asserts ``is_parsed``. With a single rank
  HTA does not use its multiprocessing pool. ``t.get_trace(rank)`` is read afterwards as
  its row count, to prove the trace was parsed.

Events/s divides the number of ``traceEvents`` in the file (the same for both loaders) by
the median load time. Peak RSS is the subprocess's own peak (``VmHWM`` of
``/proc/self/status``; ``ru_maxrss`` where there is none, which on Linux also carries the
peak of the process that started it, here this benchmark after it read the trace) plus the
largest ``ru_maxrss`` of its children (``RUSAGE_CHILDREN``): an upper bound of their combined
memory, so that a loader using worker processes is not favoured; it includes the
interpreter and the imported libraries.

Each run also times a fixed pure-Python loop (300k additions) just before the load, the
"CPU probe". On a shared or frequency-scaled machine the same code runs at different speeds
from one second to the next; the probes' spread shows how much the machine varied during the
benchmark. A probe is a snapshot taken before its load, not the speed that load got.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "out"
VENV = OUT / "hta-venv"
DEFAULT_REL = Path("nvidia/hta-v100-ddp-allreduce/df_index_resolver.json.gz")
TILE_GAP_US = 1_000
ID_ARGS = ("correlation", "External id", "Python id", "Python parent id")
FLOW_PHASES = frozenset({"s", "t", "f"})
STEP_RE = re.compile(r"^(ProfilerStep\s*#\s*)(\d+)$")

PRELUDE = """
import json, resource, sys, time
def peak_kib():
    # VmHWM: this process's own peak. ru_maxrss would also count the benchmark's peak,
    # which Linux carries into a child across fork and exec.
    try:
        with open("/proc/self/status") as fh:
            return next(int(l.split()[1]) for l in fh if l.startswith("VmHWM:"))
    except (OSError, StopIteration):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
def cpu_probe_ms():
    # The same fixed pure-Python work in every run: how fast the CPU is right now.
    start = time.perf_counter()
    total = 0
    for i in range(300_000):
        total += i
    return (time.perf_counter() - start) * 1e3
"""

TRACEKIT_SNIPPET = (
    PRELUDE
    + """
t0 = time.perf_counter()
import tracekit
try:
    import tracekit.parsers
    tracekit.parsers.registry()
except Exception:
    pass
t1 = time.perf_counter()
probe = cpu_probe_ms()
start = time.perf_counter()
timeline = tracekit.load(sys.argv[1])
t2 = time.perf_counter()
rows = len(timeline)
print(json.dumps({
    "import_s": t1 - t0,
    "load_s": t2 - start,
    "probe_ms": probe,
    "rows": rows,
    "rss_self_kib": peak_kib(),
    "rss_children_kib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss,
}))
"""
)

HTA_SNIPPET = (
    PRELUDE
    + """
t0 = time.perf_counter()
from hta.trace_analysis import TraceAnalysis
t1 = time.perf_counter()
probe = cpu_probe_ms()
start = time.perf_counter()
analysis = TraceAnalysis(trace_dir=sys.argv[1])
t2 = time.perf_counter()
ranks = analysis.t.get_ranks()
rows = sum(len(analysis.t.get_trace(rank)) for rank in ranks)
print(json.dumps({
    "import_s": t1 - t0,
    "load_s": t2 - start,
    "probe_ms": probe,
    "rows": rows,
    "ranks": ranks,
    "rss_self_kib": peak_kib(),
    "rss_children_kib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss,
}))
"""
)


@dataclass
class Result:
    """The medians of one loader on one trace (or why it has none)."""

    loader: str
    runs: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None

    def median(self, key: str) -> float:
        return statistics.median(float(run[key]) for run in self.runs)

    @property
    def ok(self) -> bool:
        return bool(self.runs) and self.error is None

    @property
    def seconds(self) -> float:
        return self.median("load_s")

    @property
    def rss_mb(self) -> float:
        return statistics.median(
            (int(r["rss_self_kib"]) + int(r["rss_children_kib"])) / 1024 for r in self.runs
        )


# --------------------------------------------------------------------------- HTA venv


def venv_python() -> Path:
    return VENV / "bin" / "python"


def hta_version(python: Path) -> str | None:
    """The installed HolisticTraceAnalysis version in ``python``'s environment, or None."""
    code = (
        "import importlib.metadata as m, hta.trace_analysis; "
        "print(m.version('HolisticTraceAnalysis'), m.version('pandas'))"
    )
    done = subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=False)
    return done.stdout.strip() if done.returncode == 0 and done.stdout.strip() else None


def ensure_hta() -> tuple[Path | None, str]:
    """Create (once) the HTA venv; return its python and 'HTA x (pandas y)' or the failure."""
    python = venv_python()
    if python.exists() and (found := hta_version(python)):
        hta, pandas = found.split()
        return python, f"HolisticTraceAnalysis {hta} (pandas {pandas}), venv reused"
    OUT.mkdir(parents=True, exist_ok=True)
    print(f"creating {VENV} and installing HolisticTraceAnalysis ...")
    pip = [str(python), "-m", "pip", "install", "-q", "HolisticTraceAnalysis"]
    steps = {
        "python -m venv": [sys.executable, "-m", "venv", str(VENV)],
        "pip install HolisticTraceAnalysis": pip,
    }
    for what, cmd in steps.items():
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            lines = [ln for ln in (done.stderr or done.stdout).splitlines() if ln.strip()]
            errors = [ln for ln in lines if "ERROR" in ln] or lines
            return None, f"{what} failed: {errors[-1] if errors else done.returncode}"
    found = hta_version(python)
    if not found:
        return None, "HolisticTraceAnalysis installed but `import hta.trace_analysis` fails"
    hta, pandas = found.split()
    return python, f"HolisticTraceAnalysis {hta} (pandas {pandas}), venv created"


# --------------------------------------------------------------------------- scaled trace


def read_trace(path: Path) -> dict[str, Any]:
    """The whole JSON document of a Kineto trace (.json or .json.gz)."""
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    doc = msgspec.json.decode(raw)
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        raise SystemExit(f"{path}: not a Kineto Chrome trace (no traceEvents list)")
    return doc


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def trace_extent(events: list[dict[str, Any]]) -> tuple[float, float, int, int]:
    """(first ts, last end, largest id + 1, largest ProfilerStep number + 1)."""
    t_min, t_end, top_id, top_step = math.inf, -math.inf, 0, 0
    for ev in events:
        ts = ev.get("ts")
        if isinstance(ts, (int, float)) and ev.get("ph") != "M":
            dur = ev.get("dur")
            t_min = min(t_min, ts)
            t_end = max(t_end, ts + (dur if isinstance(dur, (int, float)) else 0))
        if ev.get("ph") in FLOW_PHASES and is_int(ev.get("id")):
            top_id = max(top_id, ev["id"])
        args = ev.get("args")
        if isinstance(args, dict):
            for key in ID_ARGS:
                if is_int(args.get(key)):
                    top_id = max(top_id, args[key])
        if isinstance(ev.get("name"), str) and (m := STEP_RE.match(ev["name"])):
            top_step = max(top_step, int(m.group(2)))
    if t_min is math.inf:
        raise SystemExit("the input trace has no timestamped events to tile")
    return t_min, t_end, top_id + 1, top_step + 1


def shifted(ev: dict[str, Any], dt: int, did: int, dstep: int) -> dict[str, Any]:
    """A copy of ``ev`` moved ``dt`` µs later, with ids raised by ``did``, steps by ``dstep``."""
    out = dict(ev)
    if isinstance(out.get("ts"), (int, float)):
        out["ts"] = out["ts"] + dt
    if out.get("ph") in FLOW_PHASES and is_int(out.get("id")) and out["id"] > 0:
        out["id"] = out["id"] + did
    args = out.get("args")
    if isinstance(args, dict) and any(key in args for key in ID_ARGS):
        args = dict(args)
        for key in ID_ARGS:
            if is_int(args.get(key)) and args[key] > 0:
                args[key] = args[key] + did
        out["args"] = args
    if dstep and isinstance(out.get("name"), str) and (m := STEP_RE.match(out["name"])):
        out["name"] = f"{m.group(1)}{int(m.group(2)) + dstep}"
    return out


def build_scaled(source: Path, min_events: int) -> tuple[Path, int, str]:
    """Write (or reuse) ``source`` tiled in time to >= ``min_events`` events.

    Returns the path, its event count and a note. Metadata events (``ph == "M"``) are kept
    once; every other event is repeated per tile, shifted by the trace span plus a gap,
    with flow ids, correlation / External id / Python ids and ProfilerStep numbers moved
    so that they stay unique. Header keys keep Kineto's layout (one per line, ``"rank": N``
    with a space) because HTA finds the rank with a regex over the file's lines.
    """
    OUT.mkdir(parents=True, exist_ok=True)
    stem = source.name.split(".")[0]
    path = OUT / f"kineto_{stem}_{min_events}.json.gz"
    sidecar = path.with_suffix(".meta.json")
    if path.exists() and sidecar.exists():
        meta = json.loads(sidecar.read_text())
        if meta.get("source") == str(source) and meta.get("source_size") == source.stat().st_size:
            return path, int(meta["events"]), "cached"
    t0 = time.perf_counter()
    doc = read_trace(source)
    events: list[dict[str, Any]] = doc["traceEvents"]
    meta_events = [ev for ev in events if ev.get("ph") == "M"]
    body = [ev for ev in events if ev.get("ph") != "M"]
    t_min, t_end, id_span, step_span = trace_extent(body)
    span = math.ceil(t_end - t_min) + TILE_GAP_US
    tiles = max(1, math.ceil((min_events - len(meta_events)) / max(1, len(body))))
    keys = list(doc)
    head = {k: doc[k] for k in keys[: keys.index("traceEvents")]}
    tail = {k: doc[k] for k in keys[keys.index("traceEvents") + 1 :]}
    encoder = msgspec.json.Encoder()
    tmp = path.with_name(path.name + ".tmp")
    count = 0
    with gzip.open(tmp, "wb", compresslevel=6) as fh:
        fh.write(b"{\n")
        for key, value in head.items():
            fh.write(f"  {json.dumps(key)}: {json.dumps(value)},\n".encode())
        fh.write(b'  "traceEvents": [\n')
        first = True
        for k in range(tiles):
            chunk = meta_events if k == 0 else []
            chunk = chunk + [shifted(ev, k * span, k * id_span, k * step_span) for ev in body]
            for ev in chunk:
                fh.write(b"  " if first else b",\n  ")
                fh.write(encoder.encode(ev))
                first = False
            count += len(chunk)
        fh.write(b"\n  ]")
        for key, value in tail.items():
            fh.write(f",\n  {json.dumps(key)}: {json.dumps(value)}".encode())
        fh.write(b"\n}\n")
    tmp.replace(path)
    sidecar.write_text(
        json.dumps(
            {
                "source": str(source),
                "source_size": source.stat().st_size,
                "events": count,
                "tiles": tiles,
            }
        )
    )
    note = f"written: {tiles} tiles, span {span:,} us, {time.perf_counter() - t0:.0f} s"
    return path, count, note


# --------------------------------------------------------------------------- measuring


def run_snippet(python: Path, snippet: str, arg: str, timeout: float) -> dict[str, Any]:
    """Run ``snippet`` in a fresh ``python -c``; its last stdout line is a JSON result."""
    try:
        done = subprocess.run(
            [str(python), "-c", snippet, arg],
            capture_output=True,
            text=True,
            cwd=tempfile.gettempdir(),
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        tail = [ln for ln in (done.stderr or done.stdout).strip().splitlines() if ln.strip()]
        why = tail[-1] if tail else ""
        if done.returncode < 0:
            why = f"killed by signal {-done.returncode} {why}".strip()
        return {"error": why or f"exit {done.returncode}"}
    return json.loads(lines[-1])


def measure(
    trace: Path, hta_python: Path | None, repeat: int, timeout: float
) -> tuple[Result, Result]:
    """Alternate ``repeat`` tracekit and HTA runs on ``trace``."""
    ours, theirs = Result("tracekit"), Result("HTA")
    if hta_python is None:
        theirs.error = "not installed"
    with tempfile.TemporaryDirectory(prefix="hta-trace-") as trace_dir:
        (Path(trace_dir) / trace.name).symlink_to(trace.resolve())
        for i in range(repeat):
            todo: list[tuple[Result, Path, str, str]] = [
                (ours, Path(sys.executable), TRACEKIT_SNIPPET, str(trace.resolve()))
            ]
            if hta_python is not None:
                todo.append((theirs, hta_python, HTA_SNIPPET, trace_dir))
            for result, python, snippet, arg in todo:
                if result.error:
                    continue
                run = run_snippet(python, snippet, arg, timeout)
                if "error" in run:
                    result.error = run["error"]
                    print(f"  run {i + 1}/{repeat} {result.loader:<8} failed: {run['error']}")
                    continue
                result.runs.append(run)
                rss = (run["rss_self_kib"] + run["rss_children_kib"]) / 1024
                print(
                    f"  run {i + 1}/{repeat} {result.loader:<8} load {run['load_s']:7.2f} s"
                    f"  import {run['import_s']:5.2f} s  rows {run['rows']:>10,}"
                    f"  peak RSS {rss:7,.0f} MB  CPU probe {run['probe_ms']:5.1f} ms"
                )
    return ours, theirs


def count_events(path: Path) -> int:
    return len(read_trace(path)["traceEvents"])


# --------------------------------------------------------------------------- report


def print_table(rows: list[tuple[str, int, Result, Result]]) -> list[str]:
    """Print the result table; return the target verdicts."""
    head = (
        f"{'trace':<26} {'events':>10} {'loader':<9} {'seconds':>8} {'events/s':>10}"
        f" {'peak RSS MB':>11} {'import s':>8} {'rows':>10}"
    )
    print(head)
    print("-" * len(head))
    verdicts: list[str] = []
    for label, events, ours, theirs in rows:
        for res in (ours, theirs):
            if res.ok:
                print(
                    f"{label:<26} {events:>10,} {res.loader:<9} {res.seconds:>8.2f}"
                    f" {events / res.seconds:>10,.0f} {res.rss_mb:>11,.0f}"
                    f" {res.median('import_s'):>8.2f} {int(res.median('rows')):>10,}"
                )
            else:
                print(f"{label:<26} {events:>10,} {res.loader:<9} {'failed: ' + str(res.error)}")
        if ours.ok and theirs.ok:
            speed = theirs.seconds / ours.seconds
            rss = ours.rss_mb / theirs.rss_mb
            print(
                f"{'':<26} {'':>10} {'ratio':<9} HTA/tracekit time {speed:.1f}x,"
                f" tracekit/HTA peak RSS {rss:.2f}"
            )
            verdicts.append(f"{label}: >= 10x faster than HTA: {_ok(speed >= 10)} ({speed:.1f}x)")
            verdicts.append(
                f"{label}: peak RSS below HTA's: {_ok(rss < 1)}"
                f" ({ours.rss_mb:,.0f} vs {theirs.rss_mb:,.0f} MB)"
            )
        probes = [
            f"{res.loader} {_spread([run['probe_ms'] for run in res.runs])}"
            for res in (ours, theirs)
            if res.ok
        ]
        if probes:
            print(f"{'':<26} {'':>10} {'CPU probe':<9} ms, median (min-max): {', '.join(probes)}")
        if ours.ok:
            rate = events / ours.seconds
            verdicts.append(f"{label}: >= 500k events/s: {_ok(rate >= 500_000)} ({rate:,.0f})")
    return verdicts


def _spread(values: list[float]) -> str:
    return f"{statistics.median(values):.1f} ({min(values):.1f}-{max(values):.1f})"


def _ok(flag: bool) -> str:
    return "PASS" if flag else "FAIL"


def default_trace() -> Path:
    """$TRACEKIT_REAL_TRACES/<DEFAULT_REL>, else the README's ../shared/traces layout."""
    root = os.environ.get("TRACEKIT_REAL_TRACES")
    base = Path(root) if root else ROOT.parent / "shared" / "traces"
    return base / DEFAULT_REL


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--trace", type=Path, default=None, help="Kineto trace (.json/.json.gz)")
    parser.add_argument(
        "--scaled-events",
        type=int,
        default=2_000_000,
        help="minimum events of the tiled trace (0 skips it)",
    )
    parser.add_argument("--repeat", type=int, default=3, help="runs per loader and trace")
    parser.add_argument(
        "--timeout", type=float, default=1800, help="seconds allowed per subprocess run"
    )
    args = parser.parse_args(argv)
    trace: Path = args.trace or default_trace()
    if not trace.is_file():
        parser.error(f"{trace}: no such file (set $TRACEKIT_REAL_TRACES or pass --trace)")
    repeat = max(1, args.repeat)

    hta_python, hta_note = ensure_hta()
    print(f"HTA       {hta_note}" if hta_python else f"HTA       unavailable: {hta_note}")
    print(f"tracekit  {sys.executable} (Python {sys.version.split()[0]}), {os.cpu_count()} CPUs")

    inputs = [(trace.name, trace, count_events(trace), "input")]
    if args.scaled_events > 0:
        scaled, scaled_events, note = build_scaled(trace, args.scaled_events)
        inputs.append((f"scaled x{scaled_events / inputs[0][2]:.1f}", scaled, scaled_events, note))

    rows: list[tuple[str, int, Result, Result]] = []
    for label, path, events, note in inputs:
        size_mb = path.stat().st_size / 1e6
        print(f"\n{label}: {path} ({events:,} events, {size_mb:,.0f} MB, {note})")
        ours, theirs = measure(path, hta_python, repeat, args.timeout)
        rows.append((label, events, ours, theirs))

    print(f"\nmedian of {repeat} run(s); events = traceEvents in the file; HTA: {hta_note}")
    verdicts = print_table(rows)
    print()
    for line in verdicts:
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
