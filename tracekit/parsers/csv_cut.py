"""CSV files cut short (a profiler killed while writing, a copy cut off): how many rows are
whole before the cut, so that a reader keeps exactly those and never a partial row."""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

from tracekit.errors import TraceError
from tracekit.parsers.base import strict


@dataclass(frozen=True)
class CsvEnd:
    """How a CSV file ends: ``cut`` when its last line is a row cut short, with the ``rows``
    whole before it (the header not counted) and the bytes ``dropped`` of the cut one;
    ``unterminated`` when its last line has no line break but every field (a cut inside its
    last field would not show)."""

    cut: bool = False
    rows: int = 0
    dropped: int = 0
    unterminated: bool = False
    last_column: str = ""


def csv_end(path: Path) -> CsvEnd:
    """How ``path`` ends (:class:`CsvEnd`); a file cut inside a row is refused with
    ``TRACEKIT_STRICT=1``. Only a file whose last byte is not a line break is read in full.

    A last line without a line break is whole when it has every field and, where the row
    ends in ``End_Timestamp``, that time is not before its start (a number cut short loses
    digits); some profilers' own files end so. A file of one line is a header alone. Readers
    keep the whole rows with polars' ``n_rows=rows`` (blank lines count as rows there too)."""
    with path.open("rb") as fh:
        fh.seek(0, 2)
        size = fh.tell()
        fh.seek(max(0, size - 1))
        if size == 0 or fh.read(1) == b"\n":
            return CsvEnd()
    data = path.read_bytes()
    complete = data.rfind(b"\n") + 1
    if not complete:  # one line: the header of a table without rows, not a row cut short
        return CsvEnd()
    header = data[: data.find(b"\n") + 1]
    names = _fields(header.strip())
    if names is not None and _whole_row(names, data[complete:]):
        return CsvEnd(unterminated=True, last_column=names[-1])
    if strict():
        raise TraceError(
            f"{path}: the file ends inside a row (cut short after {size:,} bytes);"
            " profile or copy it again"
        )
    rows = max(0, data.count(b"\n", 0, complete) - 1)  # the header is a line
    return CsvEnd(cut=True, rows=rows, dropped=size - complete)


def _fields(line: bytes, strict_quotes: bool = False) -> list[str] | None:
    try:
        return next(csv.reader([line.decode("utf-8", "replace")], strict=strict_quotes))
    except (csv.Error, StopIteration):
        return None


def _whole_row(names: list[str], last: bytes) -> bool:
    """Whether ``last`` (a final line without a line break) is a whole row under ``names``."""
    fields = _fields(last, strict_quotes=True)
    if fields is None or len(fields) != len(names):
        return False
    if names[-1] == "End_Timestamp" and "Start_Timestamp" in names:
        start = fields[names.index("Start_Timestamp")]
        try:
            return int(fields[-1]) >= int(start)
        except ValueError:
            return False
    return True
