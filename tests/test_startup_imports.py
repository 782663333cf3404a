"""Start-up: each command imports only what it uses (issue 34, item 2).

Every case runs the console entry point (``tracekit.cli:run``) in a fresh interpreter and
reads ``sys.modules`` at exit; no wall-clock assert (``bench/bench_startup.py`` times it).
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

import tracekit
from tracekit.export import save
from tracekit.timeline import build_table

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "tracekit" / "data" / "demo.sqlite"
WATCHED = ("dask", "distributed", "plotly", "pycxxfilt", "polars", "pyarrow", "numpy")
NEVER = {"dask", "distributed", "plotly", "pycxxfilt"}  # for --help and info on the demo
MANGLED = "_ZN4vllm18act_and_mul_kernelIN3c108BFloat16EXadL_ZNS_11silu_kernelIS2_EET_RKS4_EELb1EEEvPS4_PS5_i"  # noqa: E501
CHILD = """
import atexit, json, os, sys
sys.path.insert(0, {root!r})
atexit.register(lambda: os.write(2, ("IMPORTED " + json.dumps(
    [m for m in {watched!r} if m in sys.modules]) + "\\n").encode()))
{body}
"""


def imported(body: str) -> tuple[set[str], subprocess.CompletedProcess[str]]:
    """The watched modules a fresh interpreter holds after running ``body``."""
    code = CHILD.format(root=str(ROOT), watched=WATCHED, body=body)
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    line = [x for x in done.stderr.splitlines() if x.startswith("IMPORTED ")]
    assert line, done.stderr[-2000:]
    return set(json.loads(line[-1].removeprefix("IMPORTED "))), done


def cli(*argv: str) -> tuple[set[str], subprocess.CompletedProcess[str]]:
    """``tracekit argv`` through the console entry point: the modules it imported."""
    return imported(f"from tracekit.cli import run\nsys.exit(run({list(argv)!r}))")


def test_help_imports_no_data_library() -> None:
    """``tracekit --help`` lists the commands without polars, pyarrow, numpy, Dask, plotly or
    the demangler."""
    modules, done = cli("--help")
    assert done.returncode == 0, done.stderr
    assert "info" in done.stdout and "cluster" in done.stdout and "trend" in done.stdout
    assert modules == set()


@pytest.mark.parametrize("command", ["rules", "formats"])
def test_listing_commands_import_no_dask_plotly_or_demangler(command: str) -> None:
    """Commands that read no trace import none of the heavy optional pieces."""
    modules, done = cli(command)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip()
    assert not modules & NEVER


def test_info_on_the_demo_reads_it_without_dask_plotly_or_demangler() -> None:
    """``tracekit info demo.sqlite`` needs the readers (pyarrow, polars) but no Dask client,
    no plotly and no demangler (the demo has no mangled name)."""
    modules, done = cli("info", str(DEMO), "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["events"] == 2328  # the demo's rows, as `tracekit.load` reads them
    assert {"polars", "pyarrow"} <= modules  # the control: the watch sees real imports
    assert not modules & NEVER


def test_summary_on_the_demo_imports_no_dask_or_plotly() -> None:
    """``summary`` analyses the demo in this process: still no Dask and no plotly."""
    with sqlite3.connect(DEMO) as db:  # ground truth: the demo's decode-step NVTX ranges
        (marked,) = db.execute(
            "SELECT count(*) FROM NVTX_EVENTS WHERE text LIKE 'decode_step_%'"
        ).fetchone()
    modules, done = cli("summary", str(DEMO), "--json")
    assert done.returncode == 0, done.stderr
    steps = json.loads(done.stdout)["steps"]
    assert (steps["method"], steps["count"]) == ("marker", marked) and marked == 8
    assert not modules & {"dask", "distributed", "plotly", "pycxxfilt"}


def test_a_mangled_name_imports_the_demangler_and_is_demangled(tmp_path: Path) -> None:
    """The demangler is imported where a mangled name is present, and it demangles it."""
    table = build_table({"ts": [0, 10], "dur": [5, 5], "kind": ["kernel"] * 2,
                         "name": [MANGLED, "main"], "device": [0, 0]})  # fmt: skip
    path = save(tracekit.Timeline(table, {"format": "fixture"}), tmp_path / "m.parquet")
    modules, done = imported(
        "import tracekit\n"
        "import polars as pl\n"
        f"names = tracekit.load({str(path)!r}).df['name'].cast(pl.String).to_list()\n"
        "print(json.dumps(names))"
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [
        "void vllm::act_and_mul_kernel<c10::BFloat16, &c10::BFloat16 vllm::silu_kernel<c10::"
        "BFloat16>(c10::BFloat16 const&), true>(c10::BFloat16*, c10::BFloat16 const*, int)",
        "main",
    ]
    assert "pycxxfilt" in modules
    assert not modules & {"dask", "distributed", "plotly"}


def test_import_tracekit_is_light_and_load_stays_the_function() -> None:
    """``import tracekit`` holds no data library; ``tracekit.load`` is the reader function
    even after the ``tracekit.load`` module is imported."""
    modules, done = imported(
        "import tracekit\n"
        "light = sorted(m for m in ('polars', 'pyarrow', 'numpy') if m in sys.modules)\n"
        "import tracekit.load, tracekit.timeline\n"
        "print(json.dumps([light, callable(tracekit.load), tracekit.load.__module__,\n"
        "    tracekit.Timeline is tracekit.timeline.Timeline]))"
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [[], True, "tracekit", True]
    assert {"polars", "pyarrow"} <= modules
