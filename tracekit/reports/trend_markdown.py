"""A trend as GitHub Markdown: the runs table with a sparkline, every significant move with the
changes that explain it, the roles matched across renames and vendors, and the warnings.
Every name from a trace goes through :func:`md_text` (inside ``<code>`` or a table cell)."""

from __future__ import annotations

from typing import Any

from tracekit.reports import trend_text as tt
from tracekit.reports.diff_markdown import ICONS, code
from tracekit.reports.diff_text import signed_ns
from tracekit.reports.markdown import md_text
from tracekit.trend.explain import share_text


def _table(header: list[str], align: str, rows: list[list[str]]) -> list[str]:
    return [
        "| " + " | ".join(header) + " |",
        "|" + "|".join("---:" if a == "r" else "---" for a in align) + "|",
        *("| " + " | ".join(row) + " |" for row in rows),
    ]


def runs_table(data: dict[str, Any]) -> list[str]:
    """One row per run: label, vendor, steps, median [CI], change against the baseline."""
    rows = [
        [
            str(r["index"]),
            code(r["label"]),
            md_text(r["vendor"] or "-"),
            str(r["steps"]),
            tt.median_cell(r),
            tt.baseline_cell(r, data),
            md_text(tt.top_categories(r)),
        ]
        for r in data["runs"]
    ]
    header = ["#", "run", "vendor", "steps", "step median [CI]", "vs baseline", "largest"]
    return _table(header, "rllrrrl", rows)


def move_lines(data: dict[str, Any], move: dict[str, Any], top: int) -> list[str]:
    """A significant move: its heading line and its top changes, then matched roles."""
    a, b, words = tt.move_title(data, move)
    icon = ICONS.get(move["status"], "⚪")
    lines = [f"#### {icon} {md_text(a)} → {md_text(b)}", "", md_text(words), ""]
    rows = [
        [
            md_text(c["kind"]),
            md_text(c["text"]),
            signed_ns(c["delta_ns"]),
            "-" if c["share"] is None else share_text(c["share"]),
        ]
        for c in move["changes"][:top]
    ]
    if rows:
        lines += [*_table(["kind", "change", "Δ per step", "share"], "llrr", rows), ""]
    more = len(move["changes"]) - top
    if more > 0:
        lines += [f"{more} more changes: --format json lists every one", ""]
    return lines


def matched_lines(data: dict[str, Any], top: int) -> list[str]:
    """Per move, the roles whose kernels have other names on the two sides."""
    lines = []
    for move in data["moves"]:
        if not move["matched"]:
            continue
        items = [
            f"{code(m['label'])} (by {md_text(m['matched_by'] or '?')}, "
            f"{signed_ns(m['delta_ns'])}/step)"
            for m in move["matched"][:top]
        ]
        more = len(move["matched"]) - top
        tail = f" and {more} more" if more > 0 else ""
        lines.append(f"- #{move['from']} → #{move['to']}: {', '.join(items)}{tail}")
    return ["#### Matched by role (renames, vendor switches)", "", *lines, ""] if lines else []


def render_trend_markdown(data: dict[str, Any], top: int = 5) -> str:
    """``Trend.to_dict()`` as a Markdown document."""
    runs, moves = data["runs"], data["moves"]
    significant = [m for m in moves if m["significant"]]
    spark = tt.sparkline(tt.medians(data))
    out = [
        f"### tracekit trend: {len(runs)} runs, {len(significant)} significant move"
        f"{'s' * (len(significant) != 1)}",
        "",
        f"Step time {spark} (ordered by {md_text(data['ordered_by'])}; threshold "
        f"{data['threshold']:.0%}, {data['confidence']:.0%} confidence)",
        "",
        *runs_table(data),
        "",
    ]
    for move in significant:
        out += move_lines(data, move, top)
    quiet = tt.quiet_moves(data)
    if quiet:
        out += [md_text(quiet), ""]
    out += matched_lines(data, top)
    if data["warnings"]:
        out += ["#### Warnings", "", *(f"- {md_text(w)}" for w in data["warnings"]), ""]
    return "\n".join(out)
