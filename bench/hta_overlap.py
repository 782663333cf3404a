"""Compute-communication overlap: tracekit against HolisticTraceAnalysis on real traces.

    python bench/hta_overlap.py [TRACE ...]

Run by hand (HTA lives in ``bench/out/hta-venv``, created by ``bench/kineto_vs_hta.py``).
For each multi-stream NCCL Kineto trace (default: the ones under
``$TRACEKIT_REAL_TRACES/nvidia``), prints HTA's ``get_comm_comp_overlap`` percentage and
tracekit's |comm ∩ compute| / |comm| computed over the rows HTA keeps (device rows whose
launch started before the last ``ProfilerStep`` began, as HTA's loader filters) and per step
(``step_metrics.comm_overlap_ratio``, the communication-weighted mean over steps).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import tracekit
from tracekit.analysis import analyze
from tracekit.intervals import intersect, lengths, merge
from tracekit.metrics import IS_COMPUTE

VENV_PYTHON = Path(__file__).resolve().parent / "out" / "hta-venv" / "bin" / "python"
DEFAULTS = (
    "nvidia/hta-a100-80gb-world16-multistream/rank0.json.gz",
    "nvidia/hta-nccl-parser-a100-2rank/nccl_data.json.gz",
    "nvidia/hta-trace-diff-a100-world8/control.json.gz",
    "nvidia/hta-v100-ddp-allreduce/df_index_resolver.json.gz",
    "nvidia/hta-sampled-world128-multistream/sampled_rank-0.json.gz",
)
HTA = """
import json, sys
from hta.trace_analysis import TraceAnalysis
df = TraceAnalysis(trace_dir=sys.argv[1]).get_comm_comp_overlap(visualize=False)
print(json.dumps(df["comp_comm_overlap_pctg"].tolist()))
"""


def hta_percent(trace: Path) -> float | None:
    """HTA's overlap percentage for the trace's single rank (None when HTA fails)."""
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / trace.name).symlink_to(trace.resolve())
        done = subprocess.run(
            [str(VENV_PYTHON), "-c", HTA, folder], capture_output=True, text=True, check=False
        )
    lines = done.stdout.strip().splitlines()
    return json.loads(lines[-1])[0] if done.returncode == 0 and lines else None


def tracekit_percent(trace: Path) -> tuple[float | None, float | None]:
    """(HTA's way: whole trace minus the last step; per step, comm-weighted) in percent."""
    analysis = analyze(tracekit.load(trace))
    work, rows = analysis.work, analysis.rows
    # HTA keeps the device rows whose launch started before the last ProfilerStep began.
    steps = rows.filter(pl.col("name").cast(pl.String).str.contains("ProfilerStep"))
    last_start = steps["ts"].max() if steps.height else None
    launches = rows.filter((pl.col("kind").cast(pl.String) == "api") & pl.col("corr").is_not_null())
    launches = launches.select("corr", _launch="ts").unique("corr", keep="first")
    kept = work.join(launches, on="corr", how="inner")
    if last_start is not None:
        kept = kept.filter(pl.col("_launch") < last_start)
    comm, compute = kept.filter(pl.col("is_comm")), kept.filter(IS_COMPUTE)
    comm_ns = lengths(merge(comm, ["rank", "device"]))["ns"].sum()
    both = lengths(intersect(comm, compute, ["rank", "device"]))["ns"].sum()
    whole = 100 * both / comm_ns if comm_ns else None
    m = analysis.step_metrics.filter(pl.col("comm_ns") > 0)
    weighted = (
        (m["comm_overlap_ratio"] * m["comm_ns"]).sum() / m["comm_ns"].sum() if m.height else None
    )
    return whole, None if weighted is None else 100 * weighted


def main() -> None:
    """Print one line per trace."""
    root = Path(os.environ.get("TRACEKIT_REAL_TRACES", "../shared/traces"))
    traces = [Path(a) for a in sys.argv[1:]] or [root / rel for rel in DEFAULTS]
    print(f"{'trace':60} {'HTA %':>8} {'tracekit %':>11} {'per step %':>11}")
    for trace in traces:
        whole, per_step = tracekit_percent(trace)
        hta = hta_percent(trace) if VENV_PYTHON.exists() else None
        fmt = lambda v: "-" if v is None else f"{v:.2f}"  # noqa: E731
        print(f"{str(trace)[-60:]:60} {fmt(hta):>8} {fmt(whole):>11} {fmt(per_step):>11}")


if __name__ == "__main__":
    main()
