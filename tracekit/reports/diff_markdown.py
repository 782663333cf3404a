"""A diff as Markdown for a PR comment: the verdict first, then the numbers behind it.

Every name from a trace goes through :func:`md_text` (inside ``<code>``, where Markdown
escapes still apply, unlike in backtick spans).
"""

from __future__ import annotations

from typing import Any

from tracekit.reports import diff_text as dt
from tracekit.reports.format import cut
from tracekit.reports.markdown import md_text

ICONS = {"regression": "🔴", "improvement": "🟢", "no significant change": "⚪"}
FINDING_ICONS = {"appeared": "🆕", "disappeared": "✅", "grew": "🔺", "shrank": "🔻"}
PRESENCE_ICONS = {"appeared": "➕", "disappeared": "➖", "renamed": "↔"}


def code(name: str) -> str:
    """A name from a trace, escaped, in a code font."""
    return f"<code>{md_text(name)}</code>"


def _table(header: list[str], align: str, rows: list[list[str]]) -> list[str]:
    return [
        "| " + " | ".join(header) + " |",
        "|" + "|".join("---:" if a == "r" else "---" for a in align) + "|",
        *("| " + " | ".join(row) + " |" for row in rows),
    ]


def movers(data: dict[str, Any], top: int) -> list[str]:
    """Categories and kernels with the largest time change per step."""
    rows = []
    for change, cells in dt.mover_rows(data, top):
        if change["kind"] == "category":
            what = f"**{md_text(change['name'])}** (category)"
        else:
            what = f"{code(change['label'])} ({md_text(change['detail']['category'])})"
        rows.append([what, *cells])
    if not rows:
        return ["No category or kernel time changed."]
    header = ["time per step", "base", "head", "Δ", "Δ %", "CI", "status"]
    return _table(header, "lrrrrrl", rows)


def findings(data: dict[str, Any], top: int) -> list[str]:
    """Findings whose pattern appeared, disappeared, grew or shrank: impact per run on each
    side and the change of its cost per step; the first ``top``, then how many more."""
    changed = dt.changed_findings(data)
    if not changed:
        return ["No finding appeared, disappeared or changed its impact."]
    rows = [
        [
            f"{FINDING_ICONS[f['status']]} {dt.FINDING_WORDS[f['status']]}",
            md_text(f["rule"]),
            md_text(cut(f["title"], dt.TITLE_CHARS)),
            *dt.finding_cells(f),
        ]
        for f in changed[:top]
    ]
    header = ["", "rule", "finding", "impact base", "impact head", "Δ per step", "Δ % of a step"]
    more = len(changed) - top
    tail = ["", f"{more} more: --format json lists every one"] if more > 0 else []
    return [*_table(header, "lllrrrr", rows), *tail]


def efficiency(data: dict[str, Any], top: int) -> list[str]:
    """The section on same-shape efficiency per operator family, where any moved."""
    lines = dt.efficiency_lines(data, code, top)
    if not lines:
        return []
    items = [f"- {line}" if not line.startswith("  ") else f"  - {line.strip()}" for line in lines]
    return ["#### Efficiency, same shapes on both sides", "", *items, ""]


def operations(data: dict[str, Any], top: int) -> list[str]:
    """The per-operation section, where both traces record launching operators."""
    lines = dt.operation_lines(data, code, top)
    if not lines:
        return []
    return ["", "#### Per operation (launching operator)", "", *(f"- {line}" for line in lines)]


def render_diff_markdown(data: dict[str, Any], top: int = 10) -> str:
    """``Diff.to_dict()`` as a Markdown document: verdict, step time, movers, kernels, rule
    metrics, findings and a method footnote."""
    causes = dt.causes(data, code)
    summary = dt.findings_summary(data, md_text)
    summary = summary[:1].upper() + summary[1:]
    presence = [f"- {PRESENCE_ICONS[kind]} {text}" for kind, text in dt.presence_lines(data, code)]
    metric_rows = [[md_text(row[0]), *row[1:]] for row in dt.metric_rows(data)]
    metrics = (
        _table(["rule metric (mean per step)", "base", "head", "Δ", "status"], "lrrrl", metric_rows)
        if metric_rows
        else ["No rule metric changed."]
    )
    lines = [
        "### tracekit diff",
        "",
        f"{ICONS[data['verdict']]} **{dt.title(data)}**: {dt.verdict_line(data, code)}"
        + (f"; {causes}" if causes else ""),
        "",
        *([summary, ""] if summary else []),
        *(f"⚠️ {md_text(w)}  " for w in data["warnings"]),
        *([""] if data["warnings"] else []),
        f"**Decode step** {dt.step_line(data)}",
        "",
        "#### Top movers",
        "",
        *movers(data, top),
        "",
        "#### Kernels appearing, disappearing or matched by role",
        "",
        *(presence or ["No kernel appeared or disappeared."]),
        *operations(data, top),
        "",
        "#### Rule metrics",
        "",
        *metrics,
        "",
        "#### Findings by pattern",
        "",
        *findings(data, top),
        "",
        *efficiency(data, top),
        f"<sub>base: {dt.sources(data['base'], md_text)} · head: "
        f"{dt.sources(data['head'], md_text)}<br>{md_text(dt.method_note(data))}</sub>",
    ]
    return "\n".join(lines) + "\n"
