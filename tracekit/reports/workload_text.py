"""The workload line every output shows (what the trace is, what one step is, why) and a
micro-benchmark's repetitions, from ``Analysis.to_dict()['workload']``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tracekit.reports.format import fmt_ns
from tracekit.steps.workload import DESCRIPTIONS

MAX_REPETITIONS = 8  # kernels listed for a micro-benchmark


def workload_line(workload: dict[str, Any] | None, clean: Callable[[str], str] = str) -> str:
    """``workload: training (high); step unit: iteration — 3,950 backward … kernels``;
    ``clean`` escapes the trace-provided evidence for the output's markup."""
    if not workload:
        return "workload: unknown; step unit: whole window"
    kind = DESCRIPTIONS.get(workload["kind"], workload["kind"])
    head = f"workload: {kind} ({workload['confidence']}); step unit: {workload['unit']}"
    evidence = "; ".join(workload.get("evidence") or [])
    return f"{head} — {clean(evidence)}" if evidence else head


LAYER_LABELS = (
    ("engine", "engine"),
    ("framework", "framework"),
    ("mode", "mode"),
    ("library", "libraries"),
)


def stack_line(stack: dict[str, Any] | None, clean: Callable[[str], str] = str) -> str:
    """``stack: engine vLLM; framework PyTorch; mode CUDA graphs; libraries cuBLAS …`` from
    ``Analysis.to_dict()['stack']`` (what advice is chosen by)."""
    components = (stack or {}).get("components") or []
    parts = []
    for layer, label in LAYER_LABELS:
        names = [c["name"] for c in components if c["layer"] == layer]
        if names:
            parts.append(f"{label} {', '.join(names)}")
    return "stack: " + (clean("; ".join(parts)) if parts else "nothing recognised")


def repetition_rows(workload: dict[str, Any] | None) -> list[tuple[str, str, str, str]]:
    """A micro-benchmark's kernels as (name, count, median, spread) texts; [] otherwise."""
    rows = (workload or {}).get("repetitions") or []
    out = []
    for row in rows[:MAX_REPETITIONS]:
        spread = row.get("spread")
        out.append(
            (
                str(row["name"]),
                f"{row['count']:,}",
                fmt_ns(row.get("median_ns")),
                "-" if spread is None else f"{spread:.0%}",
            )
        )
    return out
