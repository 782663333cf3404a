"""A guard for traces that do not fit in memory: rather than let the machine swap itself to
death, the command stops with one line that says how much it used, on what, and what to do.

:func:`start_guard` starts a daemon thread that samples the resident memory of this process
and of its children (the helper processes that decode large files, the local cluster
workers) every :data:`PERIOD_S`; past the limit it prints the line and exits with code 2.
The limit is ``--max-memory`` (``TRACEKIT_MAX_MEMORY``): a size (``6G``, ``512M``) or a share
of this machine's memory (``80%``); by default :data:`DEFAULT_SHARE` of it.
"""

from __future__ import annotations

import os
import re
import resource
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tracekit.errors import TraceError

PERIOD_S = 0.25
DEFAULT_SHARE = 0.9
ENV = "TRACEKIT_MAX_MEMORY"
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}
# what the command is at, and the trace it read (its size is looked up only for the message)
state: dict[str, Any] = {"doing": "starting", "input": None}


def total_memory() -> int:
    """This machine's physical memory in bytes."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def parse_limit(text: str | None) -> int:
    """Bytes from ``6G``, ``512M``, ``1.5g`` or ``80%`` (of this machine's memory); the
    default share when ``text`` is empty."""
    if not text:
        return int(total_memory() * DEFAULT_SHARE)
    text = text.strip()
    if text.endswith("%"):
        try:
            share = float(text[:-1]) / 100
        except ValueError:
            share = -1.0
        if not 0 < share <= 1:
            raise TraceError(f"--max-memory {text!r}: give a share from 1% to 100%")
        return int(total_memory() * share)
    match = _SIZE.match(text)
    if not match:
        raise TraceError(f"--max-memory {text!r}: give a size such as 6G, 512M, or a share, 80%")
    return int(float(match.group(1)) * _UNITS[match.group(2).lower()])


def gib(size: float) -> str:
    """``3.4 GB`` (GiB) or, below one, ``410 MB`` (MiB), for messages."""
    return f"{size / 2**30:.1f} GB" if size >= 2**30 else f"{size / 2**20:.0f} MB"


def peak_rss() -> int:
    """This process's peak resident memory in bytes (Linux: ``VmHWM``, which, unlike
    ``ru_maxrss``, does not carry the parent's peak across the exec of a spawned worker)."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


def used_memory() -> int:
    """Resident bytes of this process and all its children."""
    import psutil

    me = psutil.Process()
    total = me.memory_info().rss
    for child in me.children(recursive=True):
        try:
            total += child.memory_info().rss
        except psutil.Error:  # ended meanwhile
            continue
    return total


def _input_size(path: Path | None) -> str:
    """`` (1,800 MB of trace)`` for the trace being read, or empty."""
    if path is None:
        return ""
    try:
        files = [p for p in path.rglob("*") if p.is_file()] if path.is_dir() else [path]
        size = sum(p.stat().st_size for p in files)
    except OSError:
        return ""
    return f" ({size / 1e6:,.0f} MB of trace)"


def start_guard(limit: int, on_exceed: Callable[[str], None] | None = None) -> threading.Thread:
    """Watch this process tree's memory; past ``limit``, report one line (``on_exceed``,
    default: to stderr) and exit with code 2."""

    def report(line: str) -> None:
        sys.stderr.write(f"error: {line}\n")
        sys.stderr.flush()

    def watch() -> None:
        while True:
            used = used_memory()
            if used > limit:
                what = _input_size(state["input"])
                (on_exceed or report)(
                    f"tracekit used {gib(used)} while {state['doing']}{what}, over --max-memory"
                    f" {gib(limit)} ({gib(total_memory())} in this machine): the trace does not"
                    " fit; analyse fewer ranks at once (tracekit cluster, --scheduler for more"
                    " machines), cut the trace to fewer steps, or raise --max-memory"
                )
                os._exit(2)
            threading.Event().wait(PERIOD_S)

    thread = threading.Thread(target=watch, name="tracekit-memory-guard", daemon=True)
    thread.start()
    return thread
