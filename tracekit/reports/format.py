"""Small display helpers shared by the reports: durations, percentages, the cells of the
step table, and how a finding is written (its steps, its impact, the ranked order). Names
from traces are made readable and printable by :mod:`tracekit.names`."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import fields
from typing import Any

from tracekit.model import Finding, ranked
from tracekit.units import fmt_ns, fmt_pct

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
# The roofline's step columns, shown after those only when some step has a roofline bound.
ROOFLINE_TABLE = ("roofline_ns", "shaped_share", "bound")


def step_table_keys(rows: list[dict[str, Any]]) -> tuple[str, ...]:
    """:data:`STEP_TABLE`, and :data:`ROOFLINE_TABLE` after it when some step of ``rows``
    (``step_metrics`` records) has a ``roofline_ns``."""
    shaped = any(r.get("roofline_ns") is not None for r in rows)
    return STEP_TABLE + ROOFLINE_TABLE if shaped else STEP_TABLE


def metric_cell(key: str, value: Any, text: Callable[[Any], str]) -> str:
    """A cell of the step table: ``-`` for no value, a percentage for the overlap ratio, a
    duration for the ns columns, else ``text(value)`` (the renderer's escaping)."""
    if value is None:
        return "-"
    if key in ("comm_overlap_ratio", "shaped_share"):
        return fmt_pct(value)
    if key.endswith("_ns") or key in ("dur", "ns_per_token"):
        return fmt_ns(value)
    return text(value)


TOP_TERMINAL = 5  # findings a terminal lists (the rest: --format json or the HTML report)
TOP_MARKDOWN = 10  # findings a Markdown report lists
MAX_RUNS = 8  # step runs written out before the text is cut (first ones, "…", the last one)
ADVICE_CHARS = 400  # advice is one or two sentences (from tracekit/data/advice.toml); cut beyond


def cut(text: Any, limit: int) -> str:
    """``text`` on one line (whitespace runs as one space), cut to ``limit`` characters with
    an ellipsis."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def ranked_dicts(findings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Findings as dicts (``Finding.to_dict()``) in :func:`tracekit.model.ranked` order (by
    impact, largest first; the model decides ties and what ranks last)."""
    known = {f.name for f in fields(Finding)}
    pairs = [(Finding(**{k: v for k, v in d.items() if k in known}), d) for d in findings]
    of = {id(finding): d for finding, d in pairs}
    return [of[id(finding)] for finding in ranked([finding for finding, _ in pairs])]


def finding_steps(finding: dict[str, Any]) -> list[int]:
    """The steps a finding covers: ``steps``, else the one ``step`` of a per-step finding."""
    steps = finding.get("steps") or []
    if not steps and finding.get("step") is not None:
        steps = [finding["step"]]
    return sorted({int(s) for s in steps})


def step_ranges(steps: list[int], dash: str = "–") -> str:
    """``[0, 1, 2, 4, 6, 7]`` -> ``"0–2, 4, 6–7"``; more than :data:`MAX_RUNS` runs keep the
    first ones and the last: ``"0, 2, 4, 6, 8, 10, 12, …, 98"``."""
    runs: list[list[int]] = []
    for step in sorted(set(steps)):
        if runs and step == runs[-1][1] + 1:
            runs[-1][1] = step
        else:
            runs.append([step, step])
    texts = [str(a) if a == b else f"{a}{dash}{b}" for a, b in runs]
    if len(texts) > MAX_RUNS:
        texts = [*texts[: MAX_RUNS - 1], "…", texts[-1]]
    return ", ".join(texts)


def steps_text(finding: dict[str, Any], all_steps: Iterable[int]) -> str:
    """Where a finding occurs, compactly: ``every step`` when it covers every step of the
    analysis (``all_steps``), else ``3–5, 9, 12–20 (13 of 40 steps)``; ``whole trace`` for a
    finding about no step in particular."""
    steps = finding_steps(finding)
    known = {int(s) for s in all_steps}
    if not steps:
        return "whole trace"
    if known and known <= set(steps):
        return "every step"
    total = len(known | set(steps))
    return f"{step_ranges(steps)} ({len(steps)} of {total} step{'' if total == 1 else 's'})"


def analysis_steps(data: dict[str, Any]) -> list[int]:
    """The step ids of an analysis (``Analysis.to_dict()``), from its step metrics."""
    return sorted(
        {int(r["step"]) for r in data.get("step_metrics") or [] if r.get("step") is not None}
    )


def worst_text(finding: dict[str, Any]) -> str:
    """``worst: step 4`` (with its rank and device when the finding spans ranks), or nothing
    when the finding covers one step or none."""
    if finding.get("step") is None or len(finding_steps(finding)) < 2:
        return ""
    where = f"worst: step {finding['step']}"
    if len(finding.get("ranks") or []) > 1:
        where += f" (rank {finding.get('rank')}, device {finding.get('device')})"
    return where


def impact_text(finding: dict[str, Any]) -> str:
    """``1.12 ms (8.1%)``: a finding's impact over the trace and its share of the step time."""
    share = finding.get("impact_share")
    return fmt_ns(finding.get("impact_ns") or 0) + ("" if share is None else f" ({fmt_pct(share)})")


def more_text(hidden: int, where: str) -> str:
    """``7 more findings (where)``, or nothing when none is hidden."""
    if hidden <= 0:
        return ""
    return f"{hidden} more finding{'' if hidden == 1 else 's'} ({where})"
