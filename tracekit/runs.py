"""Which traces one side of a diff holds: a file, a folder or a glob of repeated runs."""

from __future__ import annotations

import glob
from pathlib import Path

from tracekit.errors import TraceError
from tracekit.parsers import registry
from tracekit.parsers.base import Parser
from tracekit.parsers.probe import Probe

GLOB_CHARS = frozenset("*?[")


def parser_for(path: Path) -> Parser | None:
    """The parser that recognises ``path`` (file or folder), or None."""
    probe = Probe(path)
    return next((p for p in registry() if p.sniff(probe)), None)


def _one_trace(folder: Path) -> bool:
    """A folder that a parser reads as one trace (a PROF_ folder, a rocprofv3 CSV set, the
    per-rank files of one Kineto run) rather than a folder of runs."""
    from tracekit.parsers.kineto import KINETO, is_rank_folder

    parser = parser_for(folder)
    return parser is not None and (parser is not KINETO or is_rank_folder(folder))


def find_runs(spec: str) -> list[Path]:
    """The runs of one side, in name order.

    ``spec`` is a trace file; a folder that is one trace; a folder whose entries (files or
    folders) are runs, each a trace; or a glob (quote it in the shell) whose every match is
    a run.
    """
    path = Path(spec)
    if path.is_file():
        return [path]
    if path.is_dir():
        if _one_trace(path):
            return [path]
        entries = [p for p in sorted(path.iterdir()) if not p.name.startswith(".")]
        runs = [p for p in entries if (p.is_file() and p.stat().st_size) or p.is_dir()]
        runs = [p for p in runs if parser_for(p) is not None]
        if not runs:
            raise TraceError(f"{spec}: folder holds no trace tracekit reads; pass traces of runs")
        return runs
    if GLOB_CHARS & set(spec):
        matches = [Path(m) for m in sorted(glob.glob(spec, recursive=True))]
        if not matches:
            raise TraceError(f"{spec}: the pattern matches no file or folder")
        return matches
    raise TraceError(f"{spec}: no such file, folder or pattern")
