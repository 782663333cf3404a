"""Which paths are Kineto traces: :func:`sniff` (a file, or a folder holding some) and the
trace files of a folder, with the rank each one's name gives."""

from __future__ import annotations

import re
from pathlib import Path

from tracekit.parsers.probe import Probe

_MARKERS = (b'"schemaVersion"', b'"deviceProperties"', b'"distributedInfo"', b'"cpu_op"',
            b'"cuda_runtime"', b'"kernel"', b'"gpu_memcpy"', b'"python_function"',
            b'"user_annotation"', b'"Kernel"', b'"Runtime"', b'"Operator"', b'"ac2g"',
            b"PyTorch Profiler")  # fmt: skip
_SUFFIXES = (".json", ".json.gz", ".gz")
_RANK_IN_NAME = re.compile(r"rank[-_]?(\d+)", re.IGNORECASE)


def sniff(probe: Probe) -> bool:
    """A Chrome-trace JSON (plain or gzip) with Kineto's keys or categories near its start."""
    if probe.path.is_dir():
        return bool(trace_files(probe.path))
    text = probe.text_head
    first = text[:256].lstrip()[:1]
    if first not in (b"{", b"["):
        return False
    if first == b"{" and b'"traceEvents"' not in text and b'"schemaVersion"' not in text:
        return False
    return any(marker in text for marker in _MARKERS)


def trace_files(folder: Path) -> list[Path]:
    """The Kineto trace files of a folder, in name order."""
    files = [p for p in sorted(folder.iterdir()) if p.is_file() and p.name.endswith(_SUFFIXES)]
    return [p for p in files if p.stat().st_size and sniff(Probe(p))]


def rank_hint(path: Path) -> int | None:
    """The rank a file's name gives (``rank0…``, ``rank-1…``), or None."""
    match = _RANK_IN_NAME.search(path.name)
    return int(match.group(1)) if match else None


def is_rank_folder(folder: Path) -> bool:
    """Whether a folder of Kineto traces holds one run's ranks: every trace file names a
    distinct rank (``rank0…``, ``rank-1…``); otherwise its files are separate runs."""
    hints = [rank_hint(f) for f in trace_files(folder)]
    return None not in hints and len(set(hints)) == len(hints)
