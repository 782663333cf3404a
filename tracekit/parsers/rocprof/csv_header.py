"""The header (first line) of a CSV file: how every AMD CSV reader here tells what a file
holds (rocprofv3 traces, legacy ``results.csv``, ``*stats.csv``)."""

from __future__ import annotations

import csv
from pathlib import Path


def read_header(path: Path, head: bytes | None = None) -> list[str]:
    """Column names of a CSV's first line (either quoting style); empty when unreadable."""
    if head is None:
        try:
            with path.open("rb") as fh:
                head = fh.read(4096)
        except OSError:
            return []
    text = head.decode("utf-8", errors="replace").lstrip("\ufeff")
    line = text.splitlines()[0] if text.strip() else ""
    try:
        return [c.strip() for c in next(csv.reader([line]))] if line else []
    except (csv.Error, StopIteration):
        return []
