"""Nsight Systems reports (``.nsys-rep``/``.qdrep``): exported with ``nsys`` into a temporary
folder, then read as an SQLite export."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path
from shlex import quote

from tracekit.errors import TraceError
from tracekit.parsers.base import Progress
from tracekit.parsers.nsys.read import parse_sqlite
from tracekit.parsers.probe import Probe
from tracekit.timeline import Timeline

REPORT_MAGIC = b"NVIDIA Tegra Profiler Report"
EXPORT_TIMEOUT_S = 3600


def sniff_report(probe: Probe) -> bool:
    """``.nsys-rep`` / ``.qdrep`` reports start with the Tegra profiler magic."""
    return probe.head.startswith(REPORT_MAGIC) or probe.path.suffix in (".nsys-rep", ".qdrep")


def parse_report(path: Path, progress: Progress | None = None) -> Timeline:
    """Export an ``.nsys-rep``/``.qdrep`` with ``nsys`` into a temporary folder and read it."""
    nsys = shutil.which("nsys")
    if nsys is None:
        raise TraceError(
            f"{path}: Nsight Systems reports need `nsys` to decode and it is not on PATH;"
            f" run `nsys export --type sqlite --output {quote(str(path.with_suffix('.sqlite')))}"
            f" {quote(str(path))}` where Nsight Systems is installed, then pass the .sqlite file"
        )
    with tempfile.TemporaryDirectory(prefix="tracekit-nsys-") as tmp:
        out = Path(tmp) / "export.sqlite"
        if progress:
            progress("nsys export")
        cmd = [nsys, "export", "--type", "sqlite", "--output", str(out), str(path.resolve())]
        try:
            done = subprocess.run(
                cmd, capture_output=True, text=True, check=False, timeout=EXPORT_TIMEOUT_S
            )
        except subprocess.TimeoutExpired as exc:
            raise TraceError(
                f"{path}: `nsys export` did not finish within {EXPORT_TIMEOUT_S} s;"
                " export it by hand and pass the .sqlite file"
            ) from exc
        if done.returncode != 0 or not out.exists():
            last = (done.stderr or done.stdout or "no output").strip().splitlines()
            raise TraceError(
                f"{path}: `nsys export` failed (exit {done.returncode}: "
                f"{last[-1] if last else 'no output'}); check the report opens in nsys"
            )
        timeline = parse_sqlite(out, progress)
    timeline.meta["format"] = "nsys-rep"
    timeline.meta["source"] = path.name
    return timeline
