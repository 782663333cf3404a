"""Markdown for a PR comment: the steps table and the findings of an analysis.

Every string that comes from a trace goes through :func:`md_text`: HTML-significant characters
become entities and Markdown punctuation is backslash-escaped, so a kernel named
``<script>…</script>`` or ``a|b`` renders as text and cannot break the table.
"""

from __future__ import annotations

import re
from typing import Any

from tracekit.metrics.columns import LABELS
from tracekit.names import printable
from tracekit.reports.checks_text import checks_markdown, tally
from tracekit.reports.format import STEP_TABLE, fmt_ns, metric_cell

MAX_STEP_ROWS = 40
_ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"}
_MARKDOWN = re.compile(r"([\\`*_\[\]|~])")
STEP_COLUMNS = {key: LABELS[key].heading for key in STEP_TABLE}  # key -> heading
OPTIONAL_COLUMNS = ("phase", "tokens", "ns_per_token")  # shown when some step has a value


def md_text(value: object) -> str:
    """Trace text safe inside Markdown (tables included) and inline HTML."""
    text = printable(" ".join(str(value).split()))
    text = "".join(_ENTITIES.get(ch, ch) for ch in text)
    return _MARKDOWN.sub(r"\\\1", text)


def _cell(key: str, value: Any) -> str:
    return metric_cell(key, value, md_text)


def phase_table(phases: list[dict[str, Any]]) -> list[str]:
    """Step time per phase (decode first), when any step has a phase."""
    if not phases or all(p["phase"] == "unknown" for p in phases):
        return []
    lines = [
        "| phase | steps | median | p90 | tokens | per token |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for p in phases:
        cells = [
            md_text(p["phase"]),
            str(p["steps"]),
            fmt_ns(p["median_ns"]),
            fmt_ns(p["p90_ns"]),
            "-" if p["tokens"] is None else f"{p['tokens']:,}",
            "-" if p["ns_per_token"] is None else fmt_ns(p["ns_per_token"]),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return [*lines, ""]


def step_columns(rows: list[dict[str, Any]]) -> dict[str, str]:
    """The step-table columns (key -> heading): phase, tokens and per-token time only when
    some step has them."""
    return {
        k: v
        for k, v in STEP_COLUMNS.items()
        if k not in OPTIONAL_COLUMNS or any(r.get(k) is not None for r in rows)
    }


def steps_table(rows: list[dict[str, Any]]) -> list[str]:
    """The per-step table; long traces keep their first and last steps."""
    head = MAX_STEP_ROWS // 2
    shown = rows if len(rows) <= MAX_STEP_ROWS else [*rows[:head], {}, *rows[-head:]]
    columns = step_columns(rows)
    lines = [
        "| " + " | ".join(columns.values()) + " |",
        "|" + "---:|" * len(columns),
    ]
    for row in shown:
        if not row:
            lines.append("| " + " | ".join(["…"] * len(columns)) + " |")
            continue
        lines.append("| " + " | ".join(_cell(k, row.get(k)) for k in columns) + " |")
    return lines


def findings_list(findings: list[dict[str, Any]]) -> list[str]:
    """One bullet per finding, most severe first as the analysis ordered them."""
    if not findings:
        return ["No findings."]
    lines = []
    for f in findings:
        where = "trace" if f["step"] is None else f"step {f['step']}"
        if f.get("rank") is not None:
            where += f" (rank {f['rank']}, device {f['device']})"
        text = f["detail"]
        detail = md_text(text if len(text) <= 200 else text[:199] + "…")
        lines.append(
            f"- **{md_text(f['severity'])}** `{f['rule']}` {where}: {md_text(f['title'])}"
            f" — {detail}"
        )
    return lines


def render_markdown(analysis: dict[str, Any]) -> str:
    """The analysis (``Analysis.to_dict()``) as a Markdown document."""
    steps = analysis["steps"]
    counts: dict[str, int] = {}
    for f in analysis["findings"]:
        counts[f["severity"]] = counts.get(f["severity"], 0) + 1
    found = ", ".join(f"{n} {sev}" for sev, n in sorted(counts.items())) or "none"
    note = analysis.get("low_confidence")
    warnings = [f"- {md_text(w)}" for w in steps.get("warnings") or []]
    checks = analysis.get("checks") or []
    failing = [c for c in checks if c["status"] == "fail"]
    lines = [
        f"## tracekit: {md_text(analysis.get('source') or 'trace')}",
        "",
        *([f"> ⚠ **{md_text(note)}**", ""] if note else []),
        f"**{steps['count']} steps** found by {md_text(steps['method'])} "
        f"(confidence {md_text(steps['confidence'])}): {md_text(steps['detail'])}  ",
        f"**Findings:** {found}  ",
        f"**Checks:** {tally(checks)}"
        + (f" (failing: {', '.join(md_text(c['name']) for c in failing)})" if failing else ""),
        "",
        *([*warnings, ""] if warnings else []),
        *phase_table(analysis.get("phases") or []),
        *steps_table(analysis["step_metrics"]),
        "",
        *checks_markdown(checks, md_text),
        "### Findings",
        "",
        *findings_list(analysis["findings"]),
    ]
    return "\n".join(lines) + "\n"
