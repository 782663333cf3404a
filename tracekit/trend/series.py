"""Which runs a trend holds and in what order.

Inputs are trace files, folders (a folder of runs, or one trace: :func:`tracekit.runs.find_runs`)
and quoted globs, expanded in the order given. The runs are then ordered:

* by ``--label a,b,c`` when every label is a substring of exactly one run's path (each run
  matched once): the label list is the order (``ordered_by`` = ``label``);
* else by ``order``: ``name`` (natural sort of the paths: ``run-2`` before ``run-10``),
  ``given`` (as expanded) or ``date`` (the trace's own capture date, ``Timeline.meta``'s
  ``origin_ns`` where it is an epoch time; else the file's modification time, with a warning;
  decided after the runs are read, :func:`by_date`). Labels that did not match are assigned to
  the runs in that order; a label count other than the run count is an error.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from tracekit.errors import TraceError
from tracekit.runs import find_runs

ORDERS = ("name", "date", "given")
EPOCH_2000_NS = 946_684_800 * 10**9  # an origin before 2000 is a clock, not a date
_DIGITS = re.compile(r"(\d+)")


@dataclass
class SeriesInput:
    """One run to analyse: its path and label."""

    path: Path
    label: str


@dataclass
class Series:
    """The runs in order, how they were ordered, labels still to assign (``order`` date with
    unmatched labels) and warnings about the inputs."""

    runs: list[SeriesInput]
    ordered_by: str
    pending_labels: list[str] | None = None
    warnings: list[str] | None = None


def natural_key(text: str) -> list[Any]:
    """``run-10`` after ``run-2``: digit runs compare as numbers."""
    return [(0, int(p), "") if p.isdigit() else (1, 0, p) for p in _DIGITS.split(text) if p]


def parse_labels(text: str | None) -> list[str] | None:
    """``a,b,c`` -> ``["a", "b", "c"]`` (None when not given); empty labels are an error."""
    if text is None:
        return None
    labels = [p.strip() for p in text.split(",")]
    if not all(labels):
        raise TraceError(f"--label {text!r}: give one non-empty label per run, comma-separated")
    if len(set(labels)) != len(labels):
        raise TraceError(f"--label {text!r}: labels must differ")
    return labels


# what a trace file's name ends with (dots inside a name, as in Qwen1.5-0.5B, stay)
TRACE_SUFFIXES = frozenset(
    {".gz", ".json", ".sqlite", ".db", ".rpd", ".csv", ".pftrace", ".perfetto-trace"}
    | {".nsys-rep", ".parquet", ".arrow", ".trace"}
)


def default_label(path: Path) -> str:
    """A run's name: the file name without its trace extension(s), or the folder name."""
    name = path.name
    if path.is_file():
        while (suffix := Path(name).suffix.lower()) in TRACE_SUFFIXES:
            name = name[: -len(suffix)]
    return name or str(path)


def default_labels(paths: list[Path]) -> list[str]:
    """:func:`default_label` of each path, with its folders in front where two would read
    alike (the same file name in several folders)."""
    labels = [default_label(p) for p in paths]
    depth = 0
    while len(set(labels)) < len(labels) and depth < 8:
        depth += 1
        labels = [
            "/".join([*p.parent.parts[-depth:], label]) if labels.count(label) > 1 else label
            for p, label in zip(paths, [default_label(p) for p in paths])
        ]
    return labels


def _by_label(paths: list[Path], labels: list[str]) -> list[Path] | None:
    """The paths in label order when each label is a substring of exactly one path and no
    path is matched twice; else None."""
    chosen: list[Path] = []
    for label in labels:
        hits = [p for p in paths if label in str(p)]
        if len(hits) != 1 or hits[0] in chosen:
            return None
        chosen.append(hits[0])
    return chosen


def expand(specs: list[str]) -> list[Path]:
    """Every run of every input, in the order given; the same run twice is an error."""
    if not specs:
        raise TraceError("trend: give the traces of at least two runs")
    paths = [p for spec in specs for p in find_runs(spec)]
    seen: set[Path] = set()
    for p in paths:
        key = p.resolve()
        if key in seen:
            raise TraceError(f"{p}: given twice; each run once")
        seen.add(key)
    if len(paths) < 2:
        raise TraceError(f"trend: {len(paths)} run found in {', '.join(specs)}; give two or more")
    return paths


def series(specs: list[str], labels: list[str] | None = None, order: str = "name") -> Series:
    """The runs of ``specs`` in order with their labels (see the module docstring)."""
    if order not in ORDERS:
        raise TraceError(f"--order {order!r}: choose {', '.join(ORDERS)}")
    paths = expand(specs)
    if labels is not None and len(labels) != len(paths):
        raise TraceError(
            f"--label gives {len(labels)} labels for {len(paths)} runs: give one per run"
        )
    if labels is not None:
        matched = _by_label(paths, labels)
        if matched is not None:
            runs = [SeriesInput(p, label) for p, label in zip(matched, labels)]
            return Series(runs, "label", None, [])
    if order == "name":
        paths = sorted(paths, key=lambda p: natural_key(str(p)))
    if order == "date":
        return Series(
            [SeriesInput(p, n) for p, n in zip(paths, default_labels(paths))], "date", labels, []
        )
    names = labels or default_labels(paths)
    return Series([SeriesInput(p, n) for p, n in zip(paths, names)], order, None, [])


def capture_date(meta: dict[str, Any]) -> str | None:
    """The trace's own capture date (UTC, ISO 8601) from its timeline meta, or None."""
    origin = meta.get("origin_ns")
    if not isinstance(origin, int) or origin < EPOCH_2000_NS:
        return None
    return iso(origin / 1e9)


def iso(seconds: float) -> str:
    """Epoch seconds as ``2026-11-01T02:00:00Z``."""
    return datetime.fromtimestamp(seconds, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def by_date(inputs: list[SeriesInput], dates: list[str | None]) -> tuple[list[int], list[str]]:
    """The order (indices into ``inputs``) by capture date, file modification time where a
    trace has none; and the warnings that says so."""
    keys, warnings = [], []
    for item, date in zip(inputs, dates):
        if date is None:
            date = iso(item.path.stat().st_mtime)
            warnings.append(
                f"{item.label}: the trace records no capture date; ordered by its file's"
                f" modification time ({date})"
            )
        keys.append(date)
    order = sorted(range(len(inputs)), key=lambda i: (keys[i], natural_key(str(inputs[i].path))))
    return order, warnings
