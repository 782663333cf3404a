"""The checks of an analysis (``Analysis.to_dict()["checks"]``) as terminal lines and as a
Markdown section: failing ones first, one line each."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rich.console import Group
from rich.text import Text

from tracekit.model import QUIET, STATUSES
from tracekit.names import printable

STATUS_STYLE = {"fail": "bold red", "warn": "yellow", "pass": "green", "skip": "dim"}


def tally(checks: Iterable[dict[str, Any]]) -> str:
    """``9 checks: 1 fail, 2 warn, 5 pass, 1 skip`` (statuses with none left out)."""
    checks = list(checks)
    counts = {s: sum(c["status"] == s for c in checks) for s in STATUSES}
    parts = ", ".join(f"{n} {s}" for s, n in counts.items() if n)
    return f"{len(checks)} checks: {parts or 'none'}"


def _ordered(checks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    known = len(STATUSES)  # a status tracekit does not know goes last
    return sorted(
        checks, key=lambda c: STATUSES.index(c["status"]) if c["status"] in STATUSES else known
    )


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
    """One line per check, failing first, skipped ones last; ``passing=False`` keeps only those
    that need attention (not passed nor skipped) and ends with the tally (the summary and
    analyze views)."""
    shown = [c for c in _ordered(checks) if passing or c["status"] not in QUIET]
    lines = [check_line(c) for c in shown]
    if not passing:
        lines.append(Text(tally(checks), style="dim"))
    return Group(*lines)


def checks_markdown(checks: list[dict[str, Any]], md_text: Any) -> list[str]:
    """A "Checks" section: the tally, then a table of the checks, failing first."""
    if not checks:
        return []
    lines = ["### Checks", "", tally(checks), "", "| status | check | detail |", "|---|---|---|"]
    icon = {"fail": "❌ fail", "warn": "⚠ warn", "pass": "✅ pass", "skip": "➖ skip"}
    for c in _ordered(checks):
        lines.append(
            f"| {icon.get(c['status'], c['status'])} | {md_text(c['name'])} |"
            f" {md_text(c['detail'])} |"
        )
    return [*lines, ""]


def capture_line(data: dict[str, Any]) -> Text | None:
    """The line said first when the capture is incomplete (``data["capture_note"]``), or
    None."""
    note = data.get("capture_note")
    return None if not note else Text(f"⚠ {printable(note)}", style="bold red")
