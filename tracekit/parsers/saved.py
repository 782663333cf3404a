"""Timelines that tracekit itself saved (Parquet, Arrow IPC)."""

from __future__ import annotations

from pathlib import Path

from tracekit.parsers.base import Parser, Progress
from tracekit.timeline import Timeline


def _parse(path: Path, progress: Progress | None = None) -> Timeline:
    return Timeline.read(path)


PARQUET = Parser(
    "tracekit-parquet",
    "timeline saved by tracekit convert (.parquet)",
    lambda probe: probe.head.startswith(b"PAR1"),
    _parse,
)
ARROW = Parser(
    "tracekit-arrow",
    "timeline saved by tracekit convert (.arrow)",
    lambda probe: probe.head.startswith(b"ARROW1"),
    _parse,
)
