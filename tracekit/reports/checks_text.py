"""The checks of an analysis (``Analysis.to_dict()["checks"]``) as terminal lines and as a
Markdown section: failing ones first, one line each."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rich.console import Group
from rich.text import Text

from tracekit.model import STATUSES
from tracekit.names import printable

STATUS_STYLE = {"fail": "bold red", "warn": "yellow", "pass": "green"}


def tally(checks: Iterable[dict[str, Any]]) -> str:
    """``9 checks: 1 fail, 2 warn, 6 pass`` (statuses with none left out)."""
    checks = list(checks)
    counts = {s: sum(c["status"] == s for c in checks) for s in STATUSES}
    parts = ", ".join(f"{n} {s}" for s, n in counts.items() if n)
    return f"{len(checks)} checks: {parts or 'none'}"


def _ordered(checks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(checks, key=lambda c: STATUSES.index(c["status"]))


def check_line(check: dict[str, Any]) -> Text:
    """``fail  steps.cover  step windows hold 97.10% …`` with the status coloured: one line,
    never wrapped (the terminal shows it whole; print it with ``crop=False``)."""
    line = Text.assemble(
        (f"{check['status']:<5}", STATUS_STYLE.get(check["status"], "")),
        (f"{printable(check['name'])}  ", "bold"),
        printable(check["detail"]),
    )
    line.no_wrap, line.overflow = True, "ignore"
    return line


def render_checks(checks: list[dict[str, Any]], passing: bool = True) -> Group:
    """One line per check, failing first; ``passing=False`` keeps only those that did not
    pass and ends with the tally (the summary and analyze views)."""
    shown = [c for c in _ordered(checks) if passing or c["status"] != "pass"]
    lines = [check_line(c) for c in shown]
    if not passing:
        lines.append(Text(tally(checks), style="dim"))
    return Group(*lines)


def checks_markdown(checks: list[dict[str, Any]], md_text: Any) -> list[str]:
    """A "Checks" section: the tally, then a table of the checks, failing first."""
    if not checks:
        return []
    lines = ["### Checks", "", tally(checks), "", "| status | check | detail |", "|---|---|---|"]
    icon = {"fail": "❌ fail", "warn": "⚠ warn", "pass": "✅ pass"}
    for c in _ordered(checks):
        lines.append(
            f"| {icon.get(c['status'], c['status'])} | {md_text(c['name'])} |"
            f" {md_text(c['detail'])} |"
        )
    return [*lines, ""]
