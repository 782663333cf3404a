"""`.nsys-rep` / `.qdrep`: a one-line hint without nsys; export via nsys when it is there."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest

from tests.conftest import real_files, run_cli, sha256

REPORTS = real_files("nvidia", "*/*.nsys-rep", "*/*.qdrep")
DEMO = Path(__file__).resolve().parents[1] / "tracekit" / "data" / "demo.sqlite"


def _path_without_nsys(tmp_path: Path) -> str:
    bin_dir = tmp_path / "bin-empty"
    bin_dir.mkdir(exist_ok=True)
    return str(bin_dir)


@pytest.mark.parametrize("path", REPORTS)
def test_report_without_nsys_gives_export_hint(path: Path, tmp_path: Path) -> None:
    before = sha256(path)
    done = run_cli("info", str(path), env={"PATH": _path_without_nsys(tmp_path)})
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    # the command runs from where tracekit was run: the paths as given, not bare names
    export = f"nsys export --type sqlite --output {path.with_suffix('.sqlite')} {path}`"
    assert export in lines[0]
    assert sha256(path) == before


def _fake_nsys(bin_dir: Path, log: Path) -> None:
    """A stand-in `nsys` that 'exports' the bundled demo to the --output path."""
    script = bin_dir / "nsys"
    script.write_text(
        f"#!{sys.executable}\n"
        "import shutil, sys\n"
        "args = sys.argv[1:]\n"
        f"open({str(log)!r}, 'w').write(' '.join(args))\n"
        "out = args[args.index('--output') + 1]\n"
        f"shutil.copy({str(DEMO)!r}, out)\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)


def test_report_with_nsys_exports_to_a_temporary_folder(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "nsys-args.txt"
    _fake_nsys(bin_dir, log)
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    report = inputs / "run.nsys-rep"
    report.write_bytes(b"NVIDIA Tegra Profiler Report 2024@6@2@25 fake body")
    done = run_cli(
        "info", str(report), "--json", env={"PATH": f"{bin_dir}{os.pathsep}/usr/bin:/bin"}
    )
    assert done.returncode == 0, done.stderr
    assert '"format": "nsys-rep"' in done.stdout
    assert '"source": "run.nsys-rep"' in done.stdout
    args = log.read_text().split()
    assert args[:3] == ["export", "--type", "sqlite"]
    output = Path(args[args.index("--output") + 1])
    assert output.parent != inputs and not output.parent.exists()  # temp folder, removed
    assert os.listdir(inputs) == ["run.nsys-rep"]


def test_failing_nsys_export_is_one_line(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "nsys"
    script.write_text("#!/bin/sh\necho 'Importer error: bad report' >&2\nexit 1\n")
    script.chmod(0o755)
    report = tmp_path / "broken.qdrep"
    report.write_bytes(b"garbage")
    done = run_cli("summary", str(report), env={"PATH": f"{bin_dir}{os.pathsep}/usr/bin:/bin"})
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "nsys export` failed" in lines[0] and "bad report" in lines[0]
