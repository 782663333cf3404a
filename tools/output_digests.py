"""Digests of what ``analyze`` makes of every real sample and fixture, to prove that a change
made for speed changes no result.

    python tools/output_digests.py write [FILE]    # default tests/data/output_digests.json
    python tools/output_digests.py compare [FILE]  # exit 1 and list what differs

For every path under ``$TRACEKIT_REAL_TRACES`` (default ``../shared/traces``) and
``tests/data/real`` that loads, and for the scenario in every fixture writer's format with
each planted fault (:mod:`snapshot_outputs`), one SHA-256 over: the timeline, the work rows
(step, placement, category and flags of every device row), the rows cut to their windows,
the collectives, and ``Analysis.to_dict()`` (steps, phases, checks, metrics, findings) as
JSON. The digest is version-stable: tables are hashed row-sorted, from their values (not from
Arrow or Parquet bytes), floats rounded to 9 significant digits; paths are left out.
``tests/test_outputs_unchanged.py`` holds the committed file against this checkout.
"""

from __future__ import annotations

import hashlib
import json
import math
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

from snapshot_outputs import ASCEND_WRITERS, FAULTS, WRITERS, real_paths  # noqa: E402

import tracekit  # noqa: E402
from fixtures.ascend_scenario import build_ascend_scenario  # noqa: E402
from fixtures.scenario import build_scenario  # noqa: E402
from tracekit.analysis import analyze  # noqa: E402
from tracekit.errors import TraceError  # noqa: E402

DEFAULT = ROOT / "tests" / "data" / "output_digests.json"
WORK_COLUMNS = ("rank", "device", "step", "placed", "ts", "dur", "name", "category", "is_comm",
                "is_fused_comm", "is_fallback")  # fmt: skip


def _rounded(value: Any) -> Any:
    """JSON-ready ``value`` with every float rounded to 9 significant digits."""
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return str(value)
        return float(f"{value:.9g}")
    if isinstance(value, dict):
        return {str(k): _rounded(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_rounded(v) for v in value]
    return value


def table_digest(frame: pl.DataFrame) -> str:
    """SHA-256 of a table's values, rows sorted, independent of chunking and of the Arrow
    encoding (dictionary or not)."""
    digest = hashlib.sha256()
    columns = []
    for name, dtype in frame.schema.items():
        column = pl.col(name)
        if dtype.is_float():
            column = column.round_sig_figs(9)
        elif not dtype.is_numeric() and dtype != pl.Boolean:
            column = column.cast(pl.String)
        columns.append(column)
    canonical = frame.select(columns)
    canonical = canonical.sort(canonical.columns, nulls_last=True, maintain_order=True)
    digest.update(",".join(canonical.columns).encode())
    for name in canonical.columns:
        series = canonical[name]
        digest.update(series.is_null().to_numpy().tobytes())
        if series.dtype == pl.String:
            digest.update("\x00".join(series.fill_null("").to_list()).encode())
        else:
            digest.update(series.fill_null(0).cast(pl.Float64).to_numpy().tobytes())
    return digest.hexdigest()


def digest_of(path: Path) -> str:
    """One digest of everything tracekit makes of ``path``; its error line when it does not
    load (the path left out)."""
    try:
        timeline = tracekit.load(path)
        analysis = analyze(timeline)
    except TraceError as exc:
        # the line names the file (and files beside it) as given: not where the samples are
        return "error: " + str(exc).replace(str(path), "<path>").replace(str(path.parent), "<dir>")
    result = analysis.to_dict()
    result.pop("source", None)
    work = analysis.work.select(c for c in WORK_COLUMNS if c in analysis.work.columns)
    parts = [
        table_digest(pl.from_arrow(timeline.events)),  # type: ignore[arg-type]
        table_digest(work),
        table_digest(analysis.in_windows.select(*("rank", "device", "step", "ts", "dur"))),
        table_digest(analysis.collectives),
        json.dumps(_rounded(result), sort_keys=True, default=str).replace(str(path), "<path>"),
    ]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def cases() -> Iterator[tuple[str, Path]]:
    """(key, path) of every real sample, then of every fixture (written to a temporary
    folder that lives while the iteration runs)."""
    yield from real_paths()
    with tempfile.TemporaryDirectory() as tmp:
        for fault, knobs in FAULTS.items():
            scenarios = (build_scenario(steps=4, **knobs), build_ascend_scenario(steps=4, **knobs))
            for fmt, writer in [*WRITERS.items(), *ASCEND_WRITERS.items()]:
                folder = Path(tmp) / f"{fmt}-{fault}"
                folder.mkdir()
                yield f"fixture/{fmt}-{fault}", writer(scenarios[fmt in ASCEND_WRITERS], folder)


def main(argv: list[str]) -> int:
    """``write`` or ``compare`` the digests file."""
    if not argv or argv[0] not in ("write", "compare") or len(argv) > 2:
        sys.exit(__doc__)
    target = Path(argv[1]) if len(argv) == 2 else DEFAULT
    found = {}
    for key, path in cases():
        found[key] = digest_of(path)
        print(key, found[key][:12], flush=True)
    if argv[0] == "write":
        target.write_text(json.dumps(found, indent=1, sort_keys=True) + "\n")
        return 0
    want = json.loads(target.read_text())
    differ = sorted(k for k in want.keys() | found.keys() if want.get(k) != found.get(k))
    for key in differ:
        print(f"differs: {key}")
    print(f"{len(found)} outputs, {len(differ)} differ")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
