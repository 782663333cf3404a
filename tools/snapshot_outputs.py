"""Snapshot what tracekit produces, to prove a restructuring changes no behaviour.

    python tools/snapshot_outputs.py write OUT     # every real sample + every fixture
    python tools/snapshot_outputs.py compare A B   # exit 1 and list what differs

For every file and folder under ``$TRACEKIT_REAL_TRACES`` (default ``../shared/traces``) and
``tests/data/real`` that loads, it writes the timeline as Parquet (rows and the schema's
metadata) and the outputs of ``analyze``, ``check`` and ``info`` with ``--json``; for
paths that do not load, the error line. For the scenario in every fixture writer's format,
with each planted fault, the same JSON outputs and the Markdown and HTML reports.
``compare`` reads the Parquet files back and compares tables and metadata, and the text
files byte for byte.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pyarrow.parquet as pq
from typer.testing import CliRunner

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import tracekit  # noqa: E402
from fixtures.ascend_db_writer import write_torch_npu_db  # noqa: E402
from fixtures.ascend_scenario import build_ascend_scenario  # noqa: E402
from fixtures.ascend_text_writer import write_torch_npu  # noqa: E402
from fixtures.kineto_writer import write_kineto_json  # noqa: E402
from fixtures.msprof_prof_writer import write_prof  # noqa: E402
from fixtures.nsys_writer import write_nsys_sqlite  # noqa: E402
from fixtures.rocpd_writer import write_rocpd  # noqa: E402
from fixtures.rocprof_csv_writer import write_rocprofv3_csv  # noqa: E402
from fixtures.scenario import build_scenario  # noqa: E402
from tracekit.cli import app  # noqa: E402
from tracekit.errors import TraceError  # noqa: E402

SKIP_SUFFIXES = {".md", ".txt", ".py", ".sh", ".png", ".yaml", ".yml", ".toml", ".html"}
FAULTS = {
    "clean": {},
    "fallback": {"fallback_kernel": True},
    "exposed": {"exposed_all_to_all": True},
    "bubble": {"idle_bubble_ns": 150_000},
    "unfused": {"unfused_collective": True},
}
WRITERS: dict[str, Callable[[object, Path], Path]] = {
    "nsys": lambda sc, d: write_nsys_sqlite(sc.events, d / "t.sqlite"),
    "kineto": lambda sc, d: write_kineto_json(sc.events, d / "t.json"),
    "rocpd": lambda sc, d: write_rocpd(sc.events, d / "t.db"),
    "rocprofv3-csv": lambda sc, d: (write_rocprofv3_csv(sc.events, d / "csv"), d / "csv")[1],
}
ASCEND_WRITERS: dict[str, Callable[[object, Path], Path]] = {
    "torch_npu": lambda sc, d: write_torch_npu(sc.events, d),
    "torch_npu_db": lambda sc, d: write_torch_npu_db(sc.events, d, rank=0),
    "msprof": lambda sc, d: write_prof(sc.events, d),
}


def real_paths() -> Iterator[tuple[str, Path]]:
    roots = [Path(os.environ.get("TRACEKIT_REAL_TRACES", ROOT.parent / "shared" / "traces"))]
    roots.append(ROOT / "tests" / "data" / "real")
    for root in roots:
        for path in sorted(root.rglob("*")):
            rel = path.relative_to(root)
            if any(part.startswith(("_", ".")) for part in rel.parts):
                continue
            if path.is_file() and (path.suffix in SKIP_SUFFIXES or "MANIFEST" in path.name):
                continue
            yield f"{root.name}/{rel}", path


def _cli(*args: str) -> str:
    result = CliRunner().invoke(app, list(args))
    return f"exit {result.exit_code}\n{result.stdout}"


def _write_outputs(out: Path, key: str, trace: Path, html: bool) -> None:
    safe = key.replace("/", "__")
    for command in ("analyze", "check", "info"):
        (out / f"{safe}.{command}.json").write_text(_cli(command, str(trace), "--json"))
    if html:
        (out / f"{safe}.md").write_text(_cli("analyze", str(trace), "--format", "md"))
        page = out / f"{safe}.html"
        _cli("report", str(trace), "-o", str(page))


def write(out: Path) -> None:
    """Write the snapshot of this checkout into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    for key, path in real_paths():
        safe = key.replace("/", "__")
        try:
            timeline = tracekit.load(path)
        except TraceError as exc:
            (out / f"{safe}.error").write_text(str(exc).replace(str(path), "<path>"))
            continue
        pq.write_table(timeline.events, out / f"{safe}.parquet")
        _write_outputs(out, key, path, html=False)
        print(key, timeline.events.num_rows, flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        for fault, knobs in FAULTS.items():
            scenarios = (build_scenario(steps=4, **knobs), build_ascend_scenario(steps=4, **knobs))
            for fmt, writer in [*WRITERS.items(), *ASCEND_WRITERS.items()]:
                scenario = scenarios[fmt in ASCEND_WRITERS]
                folder = Path(tmp) / f"{fmt}-{fault}"
                folder.mkdir()
                trace = writer(scenario, folder)
                _write_outputs(out, f"fixture/{fmt}-{fault}", trace, html=True)
                for page in out.glob(f"fixture__{fmt}-{fault}.*"):
                    page.write_text(page.read_text().replace(tmp, "<tmp>"))
                print(fmt, fault, flush=True)


def compare(a: Path, b: Path) -> int:
    """Print every file that differs between two snapshots; 0 when none does."""
    names = sorted({p.name for p in a.iterdir()} | {p.name for p in b.iterdir()})
    bad = 0
    for name in names:
        pa, pb = a / name, b / name
        if not (pa.exists() and pb.exists()):
            print(f"only in one snapshot: {name}")
            bad += 1
        elif name.endswith(".parquet"):
            ta, tb = pq.read_table(pa), pq.read_table(pb)
            if not (ta.equals(tb) and ta.schema.metadata == tb.schema.metadata):
                print(f"timeline differs: {name}")
                bad += 1
        elif pa.read_bytes() != pb.read_bytes():
            print(f"output differs: {name}")
            bad += 1
    print(f"{len(names)} files compared, {bad} differ")
    return 1 if bad else 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["write"] and len(sys.argv) == 3:
        write(Path(sys.argv[2]))
    elif sys.argv[1:2] == ["compare"] and len(sys.argv) == 4:
        sys.exit(compare(Path(sys.argv[2]), Path(sys.argv[3])))
    else:
        sys.exit(__doc__)
