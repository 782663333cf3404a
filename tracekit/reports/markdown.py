"""Markdown for a PR comment: the steps table and the findings of an analysis.

Every string that comes from a trace goes through :func:`md_text`: HTML-significant characters
become entities and Markdown punctuation is backslash-escaped, so a kernel named
``<script>…</script>`` or ``a|b`` renders as text and cannot break the table.
"""

from __future__ import annotations

import re
from typing import Any

from tracekit.reports.format import fmt_ns, fmt_pct, printable

MAX_STEP_ROWS = 40
_ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"}
_MARKDOWN = re.compile(r"([\\`*_\[\]|~])")
STEP_COLUMNS = {
    "rank": "rank", "device": "dev", "step": "step", "dur": "dur", "busy_ns": "busy",
    "compute_ns": "compute", "comm_ns": "comm", "exposed_comm_ns": "exposed",
    "comm_overlap_ratio": "overlap", "fallback_ns": "fallback", "bubble_ns": "bubbles",
}  # fmt: skip


def md_text(value: object) -> str:
    """Trace text safe inside Markdown (tables included) and inline HTML."""
    text = printable(" ".join(str(value).split()))
    text = "".join(_ENTITIES.get(ch, ch) for ch in text)
    return _MARKDOWN.sub(r"\\\1", text)


def _cell(key: str, value: Any) -> str:
    if value is None:
        return "-"
    if key == "comm_overlap_ratio":
        return fmt_pct(value)
    if key.endswith("_ns") or key == "dur":
        return fmt_ns(value)
    return md_text(value)


def steps_table(rows: list[dict[str, Any]]) -> list[str]:
    """The per-step table; long traces keep their first and last steps."""
    head = MAX_STEP_ROWS // 2
    shown = rows if len(rows) <= MAX_STEP_ROWS else [*rows[:head], {}, *rows[-head:]]
    lines = [
        "| " + " | ".join(STEP_COLUMNS.values()) + " |",
        "|" + "---:|" * len(STEP_COLUMNS),
    ]
    for row in shown:
        if not row:
            lines.append("| " + " | ".join(["…"] * len(STEP_COLUMNS)) + " |")
            continue
        lines.append("| " + " | ".join(_cell(k, row.get(k)) for k in STEP_COLUMNS) + " |")
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
    tally = ", ".join(f"{n} {sev}" for sev, n in sorted(counts.items())) or "none"
    lines = [
        f"## tracekit: {md_text(analysis.get('source') or 'trace')}",
        "",
        f"**{steps['count']} steps** found by {md_text(steps['method'])} "
        f"(confidence {md_text(steps['confidence'])}): {md_text(steps['detail'])}  ",
        f"**Findings:** {tally}",
        "",
        *steps_table(analysis["step_metrics"]),
        "",
        "### Findings",
        "",
        *findings_list(analysis["findings"]),
    ]
    return "\n".join(lines) + "\n"
