"""Small display helpers shared by the reports: durations, percentages, the cells of the
step table. Names from traces are made readable and printable by :mod:`tracekit.names`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# The step-metrics columns of a step table (terminal and Markdown), in order; their headings
# are in tracekit.metrics.columns.LABELS.
STEP_TABLE = (
    "rank",
    "device",
    "step",
    "phase",
    "tokens",
    "dur",
    "ns_per_token",
    "busy_ns",
    "compute_ns",
    "comm_ns",
    "exposed_comm_ns",
    "comm_overlap_ratio",
    "fallback_ns",
    "bubble_ns",
)


def fmt_ns(ns: float | int | None) -> str:
    """A duration in ns as a short human string: ``812 ns``, ``4.20 µs``, ``1.53 ms``, ``2.1 s``."""
    if ns is None:
        return "-"
    ns = float(ns)
    if abs(ns) < 1_000:
        return f"{ns:.0f} ns"
    if abs(ns) < 1_000_000:
        return f"{ns / 1e3:.2f} µs"
    if abs(ns) < 1_000_000_000:
        return f"{ns / 1e6:.2f} ms"
    return f"{ns / 1e9:.3f} s"


def fmt_pct(ratio: float | None) -> str:
    """A ratio as a percentage with one decimal."""
    return "-" if ratio is None else f"{100 * ratio:.1f}%"


def metric_cell(key: str, value: Any, text: Callable[[Any], str]) -> str:
    """A cell of the step table: ``-`` for no value, a percentage for the overlap ratio, a
    duration for the ns columns, else ``text(value)`` (the renderer's escaping)."""
    if value is None:
        return "-"
    if key == "comm_overlap_ratio":
        return fmt_pct(value)
    if key.endswith("_ns") or key in ("dur", "ns_per_token"):
        return fmt_ns(value)
    return text(value)
