"""Durations and ratios as short human text, for every view that prints them: the reports
and the notebook views below them (a layer low enough for both)."""

from __future__ import annotations


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
