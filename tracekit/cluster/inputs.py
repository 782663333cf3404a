"""The inputs of a cluster: which files or folders hold its ranks."""

from __future__ import annotations

from pathlib import Path

from tracekit.errors import TraceError
from tracekit.parsers.kineto import KINETO, is_rank_folder
from tracekit.parsers.kineto.detect import trace_files
from tracekit.runs import find_runs, parser_for

RANK_FOLDER_SUFFIXES = ("_ascend_pt", "_ascend_ms")
REPORTS = (".nsys-rep", ".qdrep")  # left out where their SQLite export sits beside them


def rank_inputs(path: str | Path) -> list[Path]:
    """The inputs to analyse one by one: a folder of torch_npu rank folders
    (``rank0_ascend_pt`` …), of per-rank Kineto files or of any traces (one per rank, e.g.
    Nsight Systems reports) gives one input per entry; a file or a folder that is one trace
    (a merged multi-rank trace, a PROF_ folder) is one input."""
    path = Path(path)
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise TraceError(f"{path}: no such file or folder")
    kids = [c for c in sorted(path.iterdir()) if not c.name.startswith(".")]
    ranks = [c for c in kids if c.is_dir() and c.name.endswith(RANK_FOLDER_SUFFIXES)]
    if len(ranks) > 1:
        return ranks
    if parser_for(path) is KINETO and is_rank_folder(path):
        return trace_files(path)
    runs = find_runs(str(path))
    exported = {p.with_suffix("") for p in runs if p.suffix == ".sqlite"}
    return [p for p in runs if not (p.suffix in REPORTS and p.with_suffix("") in exported)]
