"""Shared test helpers: where the real traces are, and a CLI runner."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

REAL_ENV = "TRACEKIT_REAL_TRACES"


@pytest.fixture(autouse=True, scope="session")
def _cache_dir(tmp_path_factory: pytest.TempPathFactory) -> None:
    """tracekit's cache folder (the packed plotly.js) in the session's temporary folder, not
    the user's ~/.cache; commands run as subprocesses inherit it."""
    os.environ["TRACEKIT_CACHE_DIR"] = str(tmp_path_factory.mktemp("tracekit-cache"))


def real_root() -> Path | None:
    """The folder of real traces named by $TRACEKIT_REAL_TRACES, or None."""
    value = os.environ.get(REAL_ENV)
    return Path(value) if value else None


def real_files(vendor: str, *patterns: str) -> list[pytest.param]:
    """pytest params for the real traces of ``vendor`` matching ``patterns``.

    Without $TRACEKIT_REAL_TRACES this is a single skipped param, so the skip is visible.
    """
    root = real_root()
    if root is None:
        return [pytest.param(None, marks=pytest.mark.skip(reason=f"{REAL_ENV} not set"))]
    files = sorted({p for pat in patterns for p in (root / vendor).glob(pat)})
    if not files:
        return [pytest.param(None, marks=pytest.mark.skip(reason=f"no {patterns} in {root}"))]
    return [pytest.param(p, id=f"{p.parent.name}/{p.name}") for p in files]


def real_file(vendor: str, rel: str) -> Path:
    """One real trace below ``$TRACEKIT_REAL_TRACES/vendor``; the test skips without it."""
    root = real_root()
    if root is None:
        pytest.skip(f"{REAL_ENV} not set")
    path = root / vendor / rel
    if not path.exists():
        pytest.skip(f"{path} missing")
    return path


def one_line(exc: pytest.ExceptionInfo[Exception], *needles: str) -> None:
    """The error is one line (no traceback, no continuation) and names every needle."""
    message = str(exc.value)
    assert "\n" not in message
    for needle in needles:
        assert needle in message, message


def sha256(path: Path) -> str:
    """Digest of a file, to prove that tracekit never changes its input."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def sql_rows(path: Path, query: str) -> list[tuple]:
    """Rows of a query on a SQLite file opened strictly read-only: the tests' ground truth."""
    con = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    try:
        return con.execute(query).fetchall()
    finally:
        con.close()


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run `python -m tracekit ARGS` in a subprocess, as a user would."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "tracekit", *args],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=300,
        check=False,
    )


# Kernel names an attacker could plant in a trace; each keeps its taxonomy role (fallback,
# communication, plain GEMM) so that it reaches every part of the report.
HOSTILE_NAMES = {
    "<unnamed>::silu_kernel": "at::native::elementwise_kernel<script>alert(1)</script>",
    "internode_ll::dispatch": "deep_ep::<b>x</b><img src=x onerror=alert(2)>dispatch",
    "nvjet_hsh_256x128": "\"quotes' & </script><script>alert(3)</script>",
}
HOSTILE_GPU = "<b>H200</b><svg onload=alert(4)>"
HOSTILE_FILE = "run<b>1<img src=y onerror=alert(5)>.sqlite"


def hostile_trace(folder: Path) -> Path:
    """An nsys export of the scenario (4 steps, faults planted) whose kernel names, GPU name
    and file name carry HTML/script injections (:data:`HOSTILE_NAMES`)."""
    import polars as pl

    from fixtures.nsys_writer import write_nsys_sqlite
    from fixtures.scenario import build_scenario

    events = build_scenario(
        steps=4, layers=2, fallback_kernel=True, exposed_all_to_all=True, idle_bubble_ns=80_000
    ).events
    name = pl.col("name")
    for part, hostile in HOSTILE_NAMES.items():
        name = (
            pl.when(pl.col("name").str.contains(part, literal=True))
            .then(pl.lit(hostile))
            .otherwise(name)
        )
    events = events.with_columns(name=name)
    return write_nsys_sqlite(events, folder / HOSTILE_FILE, gpu_name=HOSTILE_GPU)
