"""A trend in Jupyter: :func:`trend_html` (``Trend._repr_html_``) from the trend JSON
(``Trend.to_dict()``): the runs table, an inline SVG line chart of the step median with its
interval and a marker on each significant move (its ``<title>`` says what explains it), the
per-run category stack, and the moves with their top changes. No JavaScript; every name from
a trace is escaped by :mod:`tracekit.analysis.notebook`.
"""

from __future__ import annotations

from typing import Any

from tracekit.analysis.notebook import (
    COLORS,
    Raw,
    badge,
    bar_chart,
    cut,
    esc,
    fmt_ns,
    fmt_pct,
    legend,
    note,
    page,
    section,
    table,
)
from tracekit.taxonomy import CATEGORIES

TOP_CHANGES = 5
MOVE_COLORS = {"regression": "#c0392b", "improvement": "#2e7d32"}
WIDTH, HEIGHT, LEFT, BOTTOM = 720, 190, 64, 22


def _median(run: dict[str, Any]) -> float | None:
    return (run.get("step_ns") or {}).get("median")


def _run_tip(run: dict[str, Any]) -> str:
    step, vs = run.get("step_ns") or {}, run.get("vs_baseline") or {}
    return (
        f"{run.get('label')}: step median {fmt_ns(step.get('median'))} "
        f"[{fmt_ns(step.get('lo'))}, {fmt_ns(step.get('hi'))}], vs baseline "
        f"{fmt_ns(vs.get('delta_ns'), True)} ({fmt_pct(vs.get('rel'), True)})"
    )


def change_text(change: dict[str, Any]) -> str:
    """A change's sentence with its size and share of the move (unless it states them)."""
    text = str(change.get("text"))
    if "of the move" in text:
        return text
    share = change.get("share")
    size = fmt_ns(change.get("delta_ns"), True)
    return f"{text} ({size}" + (f", {fmt_pct(share)} of the move)" if share is not None else ")")


def move_text(move: dict[str, Any], runs: list[dict[str, Any]], top: int = 3) -> str:
    """One line for a move: the runs, its status and size, and the changes explaining it."""
    src, dst = runs[move["from"]], runs[move["to"]]
    changes = "; ".join(change_text(c) for c in (move.get("changes") or [])[:top])
    return (
        f"{src.get('label')} → {dst.get('label')}: {move['status']} "
        f"{fmt_ns(move.get('delta_ns'), True)} ({fmt_pct(move.get('rel'), True)})"
        + (f"; {changes}" if changes else "")
    )


def line_chart(data: dict[str, Any]) -> Raw:
    """The step median per run (line), its interval (whiskers), the baseline (dashed) and a
    marker on each significant move (``<g class="tk-move">`` with a ``<title>``)."""
    runs = data["runs"]
    points = [(i, _median(r)) for i, r in enumerate(runs) if _median(r) is not None]
    if not points:
        return Raw('<p class="tk-muted">No run has a step median.</p>')
    spans = [(r.get("step_ns") or {}).get(k) for r in runs for k in ("lo", "hi", "median")]
    values = [float(v) for v in spans if v is not None]
    low, high = min(values), max(values)
    pad = (high - low) * 0.1 or high * 0.05 or 1.0
    low, high = max(low - pad, 0.0), high + pad
    plot_h = HEIGHT - BOTTOM - 8
    step_x = (WIDTH - LEFT - 56) / max(len(runs) - 1, 1)  # room for the last run's label

    def x(i: int) -> float:
        return LEFT + 8 + i * step_x

    def y(v: float) -> float:
        return 8 + (high - float(v)) / (high - low) * plot_h

    parts = [
        f'<text x="2" y="{at:.1f}" font-size="10" fill="#5b6474">{esc(fmt_ns(v))}</text>'
        for at, v in ((y(high) + 4, high), (y(low), low))
    ]
    base = _median(runs[data.get("baseline") or 0]) if runs else None
    if base is not None:
        parts.append(
            f'<line x1="{LEFT}" x2="{WIDTH}" y1="{y(base):.1f}" y2="{y(base):.1f}" stroke="#9aa3b1"'
            ' stroke-dasharray="4 3"><title>baseline</title></line>'
        )
    path = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in points)
    parts.append(f'<polyline points="{path}" fill="none" stroke="#1d2330" stroke-width="1.5"/>')
    every = max(1, -(-len(runs) // 12))  # at most about 12 run labels under the axis
    for i, run in enumerate(runs):
        step, median = run.get("step_ns") or {}, _median(run)
        if median is None:
            continue
        whisker = ""
        if step.get("lo") is not None and step.get("hi") is not None:
            whisker = (
                f'<line x1="{x(i):.1f}" x2="{x(i):.1f}" y1="{y(step["lo"]):.1f}"'
                f' y2="{y(step["hi"]):.1f}" stroke="#5b6474"/>'
            )
        parts.append(
            f'<g class="tk-run"><title>{esc(_run_tip(run))}</title>{whisker}'
            f'<circle cx="{x(i):.1f}" cy="{y(median):.1f}" r="3.5" fill="#4c78a8"/></g>'
        )
        if i % every == 0:
            parts.append(
                f'<text x="{x(i):.1f}" y="{HEIGHT - 6}" font-size="10" text-anchor="middle"'
                f' fill="#5b6474">{esc(cut(run.get("label"), 14))}</text>'
            )
    for move in data.get("moves") or []:
        median = _median(runs[move["to"]])
        if not move.get("significant") or median is None:
            continue
        color = MOVE_COLORS.get(move["status"], "#b9770e")
        parts.append(
            f'<g class="tk-move"><title>{esc(move_text(move, runs))}</title>'
            f'<circle cx="{x(move["to"]):.1f}" cy="{y(median):.1f}" r="8" fill="none"'
            f' stroke="{color}" stroke-width="2.5"/></g>'
        )
    return Raw(
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}"'
        f' viewBox="0 0 {WIDTH} {HEIGHT}" role="img">{"".join(parts)}</svg>'
    )


def category_chart(runs: list[dict[str, Any]]) -> Raw:
    """Per run a bar of its time per step per category, its step median as a tick."""
    cats = [c for c in CATEGORIES if any((r.get("categories") or {}).get(c) for r in runs)]
    stacks = {c: [(r.get("categories") or {}).get(c) or 0.0 for r in runs] for c in cats}
    tips = [
        f"{r.get('label')}: "
        + ", ".join(f"{c} {fmt_ns(v)}" for c in cats if (v := (r.get("categories") or {}).get(c)))
        for r in runs
    ]
    chart = bar_chart(stacks, tips, [_median(r) or 0.0 for r in runs], height=120)
    return Raw(chart + legend(cats, COLORS))


def runs_table(data: dict[str, Any]) -> Raw:
    """One row per run: label, format, date, steps, step median [interval], vs baseline."""
    rows = []
    for i, run in enumerate(data["runs"]):
        step, vs = run.get("step_ns") or {}, run.get("vs_baseline") or {}
        label = f"{run.get('label')}" + (" (baseline)" if i == data.get("baseline", 0) else "")
        fmt = " · ".join(str(v) for v in (run.get("format"), run.get("vendor")) if v)
        rows.append(
            (
                i,
                label,
                fmt,
                run.get("date"),
                f"{run.get('steps')} by {run.get('steps_by')}",
                fmt_ns(step.get("median")),
                f"[{fmt_ns(step.get('lo'))}, {fmt_ns(step.get('hi'))}]",
                f"{fmt_ns(vs.get('delta_ns'), True)} ({fmt_pct(vs.get('rel'), True)})",
                fmt_ns(run.get("fallback_ns")),
                len(run.get("warnings") or []),
            )
        )
    headers = ["#", "run", "format", "date", "steps", "median", "interval", "vs baseline"]
    return table([*headers, "fallback", "warnings"], rows, "r    rrrrr")


def moves_part(data: dict[str, Any]) -> Raw:
    """Every move between consecutive runs; for the significant ones their top changes, and
    for any the kernels matched by role under other names."""
    runs, out = data["runs"], []
    rows = [
        (
            f"{runs[m['from']].get('label')} → {runs[m['to']].get('label')}",
            badge(m["status"]),
            fmt_ns(m.get("delta_ns"), True),
            fmt_pct(m.get("rel"), True),
            f"[{fmt_ns(m.get('lo'), True)}, {fmt_ns(m.get('hi'), True)}]",
            fmt_pct(m.get("explained_share")) if m.get("significant") else "",
        )
        for m in data.get("moves") or []
    ]
    out.append(table(["move", "status", "Δ", "Δ %", "interval", "explained"], rows, "  rrrr"))
    for m in data.get("moves") or []:
        where = f"{runs[m['from']].get('label')} → {runs[m['to']].get('label')}"
        if m.get("significant") and m.get("changes"):
            changes = [
                (c.get("kind"), cut(c.get("text"), 200), fmt_ns(c.get("delta_ns"), True),
                 fmt_pct(c.get("share")), c.get("matched_by"))
                for c in m["changes"][:TOP_CHANGES]
            ]  # fmt: skip
            headers = ["kind", "change", "Δ per step", "share", "matched by"]
            out.append(section(f"{where}: {m['status']}", table(headers, changes, "  rr")))
        if m.get("matched"):
            matched = [
                (cut(r.get("label"), 100), r.get("matched_by"),
                 cut(", ".join(r.get("base_names") or []), 120),
                 cut(", ".join(r.get("head_names") or []), 120), fmt_ns(r.get("delta_ns"), True))
                for r in m["matched"][:TOP_CHANGES]
            ]  # fmt: skip
            headers = ["role", "matched by", "base", "head", "Δ per step"]
            out.append(section(f"{where}: matched by role", table(headers, matched, "    r")))
        out += [note(w) for w in m.get("warnings") or []]
    return Raw("".join(out))


def trend_html(data: dict[str, Any]) -> str:
    """The trend JSON (contract B) as notebook HTML: warnings, runs table, step-median line
    chart with the significant moves marked, per-run category stack, moves and changes."""
    runs = data.get("runs") or []
    significant = sum(bool(m.get("significant")) for m in data.get("moves") or [])
    about = (
        f'<p class="tk-muted">{len(runs)} runs, {significant} significant move(s); threshold '
        f"{fmt_pct(data.get('threshold'))}, confidence {fmt_pct(data.get('confidence'))}, "
        f"ordered by {esc(data.get('ordered_by'))}. Hover a point or a ringed move.</p>"
    )
    return page(
        "tracekit trend",
        *(note(w) for w in data.get("warnings") or []),
        about,
        section("Step median per run", line_chart(data)),
        section("Time per step by category", category_chart(runs)),
        section("Runs", runs_table(data)),
        section("Moves", moves_part(data)),
    )
