"""Markdown for a PR comment: the steps table and the top findings of an analysis by impact.

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
from tracekit.reports.format import (
    ADVICE_CHARS,
    STEP_TABLE,
    TOP_MARKDOWN,
    analysis_steps,
    cut,
    fmt_ns,
    fmt_pct,
    metric_cell,
    more_text,
    ranked_dicts,
    step_table_keys,
    steps_text,
    worst_text,
)
from tracekit.reports.roofline_text import roofline_markdown
from tracekit.reports.workload_text import repetition_rows, stack_line, workload_line

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
    some step has them; the roofline's columns when some step has a roofline bound."""
    return {
        k: LABELS[k].heading
        for k in step_table_keys(rows)
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


MORE_HINT = "--format json lists every one"
DETAIL_CHARS = 160  # a finding's detail under its title


def findings_table(
    findings: list[dict[str, Any]], all_steps: list[int], top: int = TOP_MARKDOWN
) -> list[str]:
    """The ``top`` findings by impact as a table (rank, rule, finding, steps, impact, share of
    the step time, advice), then how many more there are."""
    if not findings:
        return ["No findings."]
    ordered = ranked_dicts(findings)
    lines = [
        "| # | rule | finding | steps | impact | share | advice |",
        "|---:|---|---|---|---:|---:|---|",
    ]
    for i, f in enumerate(ordered[:top], 1):
        worst = worst_text(f)
        where = md_text(steps_text(f, all_steps)) + (f"<br>{md_text(worst)}" if worst else "")
        cells = [
            str(i),
            f"{md_text(f['rule'])} ({md_text(f['severity'])})",
            f"**{md_text(cut(f['title'], 200))}**"
            + (f"<br>{md_text(cut(f['detail'], DETAIL_CHARS))}" if f.get("detail") else ""),
            where,
            fmt_ns(f.get("impact_ns") or 0),
            fmt_pct(f.get("impact_share")),
            md_text(cut(f.get("advice") or "-", ADVICE_CHARS)),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    rest = more_text(len(ordered) - top, MORE_HINT)
    return [*lines, *(["", rest] if rest else [])]


def repetitions_table(workload: dict[str, Any] | None) -> list[str]:
    """A micro-benchmark's kernels: count, median and spread of each (none otherwise)."""
    rows = repetition_rows(workload)
    if not rows:
        return []
    lines = ["| kernel | count | median | spread p10-p90 |", "|---|---:|---:|---:|"]
    lines += [f"| {md_text(cut(n, 80))} | {c} | {m} | {s} |" for n, c, m, s in rows]
    return [*lines, ""]


def render_markdown(analysis: dict[str, Any]) -> str:
    """The analysis (``Analysis.to_dict()``) as a Markdown document."""
    steps = analysis["steps"]
    counts: dict[str, int] = {}
    for f in analysis["findings"]:
        counts[f["severity"]] = counts.get(f["severity"], 0) + 1
    found = ", ".join(f"{n} {sev}" for sev, n in sorted(counts.items())) or "none"
    unit = (analysis.get("workload") or {}).get("unit", "step")
    capture = analysis.get("capture_note")
    note = analysis.get("low_confidence")
    warnings = [f"- {md_text(w)}" for w in steps.get("warnings") or []]
    checks = analysis.get("checks") or []
    failing = [c for c in checks if c["status"] == "fail"]
    lines = [
        f"## tracekit: {md_text(analysis.get('source') or 'trace')}",
        "",
        *([f"> ⚠ **{md_text(capture)}**", ""] if capture else []),
        *([f"> ⚠ **{md_text(note)}**", ""] if note else []),
        f"**Workload:** {workload_line(analysis.get('workload'), md_text).split(': ', 1)[1]}  ",
        f"**Stack:** {stack_line(analysis.get('stack'), md_text).split(': ', 1)[1]}  ",
        f"**{steps['count']} steps** ({md_text(unit)}) found by {md_text(steps['method'])} "
        f"(confidence {md_text(steps['confidence'])}): {md_text(steps['detail'])}  ",
        f"**Findings:** {found}  ",
        f"**Checks:** {tally(checks)}"
        + (f" (failing: {', '.join(md_text(c['name']) for c in failing)})" if failing else ""),
        "",
        *([*warnings, ""] if warnings else []),
        *repetitions_table(analysis.get("workload")),
        *phase_table(analysis.get("phases") or []),
        *steps_table(analysis["step_metrics"]),
        "",
        *roofline_markdown(analysis.get("roofline"), md_text),
        *checks_markdown(checks, md_text),
        "### Findings",
        "",
        "By impact: the most that fixing each could save over the trace, and its share of the"
        " summed step time.",
        "",
        *findings_table(analysis["findings"], analysis_steps(analysis)),
    ]
    return "\n".join(lines) + "\n"
