"""Findings of two sides compared by pattern: a finding is the same on both sides when its
``(rule, pattern)`` is, whatever steps it occurs in.

Per side, a pattern's impact (the most fixing it could save, ``Finding.impact_ns``) is
summed over the side's runs and divided by the side's steps: its cost per step, which
compares across traces of different lengths. A pattern *grew* (or *shrank*) when that cost
per step changed by at least ``floor`` ns (the diff passes ``min_impact`` × the base step
median, the bar a category's change must clear to matter). Findings explain a diff; they
never gate it (see :mod:`tracekit.diff`).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

from tracekit.analysis import Analysis
from tracekit.model import Finding, severity_rank

_NUMBER = re.compile(r"\d[\d,.]*")


@dataclass
class FindingChange:
    """One pattern on both sides.

    ``base_ns``/``head_ns``: impact per run (mean over the side's runs, 0 where absent);
    ``*_per_step_ns``: impact over the side's steps; ``delta_per_step_ns`` head minus base
    and ``step_share`` that delta over the base step median; ``base_runs``/``head_runs``: runs
    where it occurs; ``status``: ``appeared``, ``disappeared``, ``grew``, ``shrank`` or
    ``same``. ``title``, ``severity``, ``advice``, ``detail`` and ``steps`` (steps it covers
    in that run) are the head's where it occurs there, else the base's.
    """

    rule: str
    pattern: str
    title: str
    severity: str
    status: str
    base_ns: float
    head_ns: float
    base_per_step_ns: float
    head_per_step_ns: float
    delta_per_step_ns: float
    step_share: float | None
    base_runs: int
    head_runs: int
    steps: int
    advice: str
    detail: str

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return asdict(self)


def pattern_key(finding: Finding) -> tuple[str, str]:
    """``(rule, pattern)``; a finding without a pattern (a plugin rule that sets none) keys on
    its title with the numbers masked."""
    return finding.rule, finding.pattern or _NUMBER.sub("N", finding.title)


def _side(runs: list[Analysis]) -> tuple[dict[tuple[str, str], list[Finding]], int]:
    """Per pattern, its findings over the runs (one per run where it occurs, the largest if a
    run has several); and the side's step count (distinct steps per run, summed)."""
    found: dict[tuple[str, str], list[Finding]] = {}
    steps = 0
    for run in runs:
        steps += run.step_metrics["step"].n_unique()
        here: dict[tuple[str, str], list[Finding]] = {}
        for f in run.findings:
            here.setdefault(pattern_key(f), []).append(f)
        for key, group in here.items():
            merged = max(group, key=lambda f: f.impact_ns)
            if len(group) > 1:  # a rule without patterns: one finding per step
                total = sum(f.impact_ns for f in group)
                steps_of = sorted(
                    {s for f in group for s in (f.steps or [f.step]) if s is not None}
                )
                merged = Finding(**{**merged.to_dict(), "impact_ns": total, "steps": steps_of})
            found.setdefault(key, []).append(merged)
    return found, steps


def _status(base_runs: int, head_runs: int, delta: float, floor: float) -> str:
    if not base_runs:
        return "appeared"
    if not head_runs:
        return "disappeared"
    if abs(delta) >= floor and delta:
        return "grew" if delta > 0 else "shrank"
    return "same"


def compare_findings(
    base: list[Analysis], head: list[Analysis], floor: float, step_median: float
) -> list[FindingChange]:
    """Every pattern of either side (see the module docstring), the largest change in cost
    per step first."""
    (base_found, base_steps), (head_found, head_steps) = _side(base), _side(head)
    out = []
    for key in set(base_found) | set(head_found):
        b, h = base_found.get(key, []), head_found.get(key, [])
        b_total, h_total = sum(f.impact_ns for f in b), sum(f.impact_ns for f in h)
        b_step, h_step = b_total / max(base_steps, 1), h_total / max(head_steps, 1)
        delta = h_step - b_step
        shown = (h or b)[0]
        out.append(
            FindingChange(
                rule=key[0],
                pattern=key[1],
                title=shown.title,
                severity=shown.severity,
                status=_status(len(b), len(h), delta, floor),
                base_ns=b_total / len(base),
                head_ns=h_total / len(head),
                base_per_step_ns=b_step,
                head_per_step_ns=h_step,
                delta_per_step_ns=delta,
                step_share=delta / step_median if step_median else None,
                base_runs=len(b),
                head_runs=len(h),
                steps=len(shown.steps or ([shown.step] if shown.step is not None else [])),
                advice=shown.advice,
                detail=shown.detail,
            )
        )
    return sorted(
        out,
        key=lambda c: (-abs(c.delta_per_step_ns), severity_rank(c.severity), c.rule, c.pattern),
    )
