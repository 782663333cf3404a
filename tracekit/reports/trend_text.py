"""A trend for a terminal (rich): the runs with their step median, interval and a sparkline,
then every significant move with the changes that explain it. Also the plain-text pieces the
Markdown rendering shares (:mod:`.trend_markdown`). Trace text goes through
:func:`printable` into plain ``Text``, never into markup."""

from __future__ import annotations

from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from tracekit.names import printable
from tracekit.reports.diff_text import signed_ns, signed_pct
from tracekit.reports.format import fmt_ns, fmt_pct

SPARKS = "▁▂▃▄▅▆▇█"
STATUS_STYLE = {"regression": "bold red", "improvement": "bold green"}
STATUS_MARK = {"regression": "▲", "improvement": "▼", "not significant": "~"}


def sparkline(values: list[float | None]) -> str:
    """One block per value, scaled between the smallest and the largest (space for none)."""
    known = [v for v in values if v is not None]
    if not known:
        return ""
    lo, hi = min(known), max(known)
    span = hi - lo
    out = []
    for v in values:
        if v is None:
            out.append(" ")
        else:
            level = 0 if span == 0 else round((v - lo) / span * (len(SPARKS) - 1))
            out.append(SPARKS[level])
    return "".join(out)


def medians(data: dict[str, Any]) -> list[float | None]:
    """The step median of every run, in order."""
    return [r["step_ns"]["median"] for r in data["runs"]]


def median_cell(run: dict[str, Any]) -> str:
    """``1.27 ms [1.26 – 1.29 ms]``."""
    step = run["step_ns"]
    if step["lo"] is None or step["hi"] is None:
        return fmt_ns(step["median"])
    return f"{fmt_ns(step['median'])} [{fmt_ns(step['lo'])} – {fmt_ns(step['hi'])}]"


def baseline_cell(run: dict[str, Any], data: dict[str, Any]) -> str:
    """The change against the baseline run, ``baseline`` for the baseline itself."""
    if run["index"] == data["baseline"]:
        return "baseline"
    vs = run["vs_baseline"]
    return f"{signed_ns(vs['delta_ns'])} ({signed_pct(vs['rel'])})" if vs["delta_ns"] else "0"


def top_categories(run: dict[str, Any], count: int = 3) -> str:
    """The run's largest categories per step: ``moe 480 µs, comm 300 µs``."""
    cats = sorted(run["categories"].items(), key=lambda kv: -kv[1])
    return ", ".join(f"{c} {fmt_ns(ns)}" for c, ns in cats[:count] if ns)


def run_name(data: dict[str, Any], index: int) -> str:
    """``#2 nightly-03`` (label as the trace gives it: escape it where it goes)."""
    return f"#{index} {data['runs'][index]['label']}"


def move_title(data: dict[str, Any], move: dict[str, Any]) -> tuple[str, str, str]:
    """(from run, to run, the move in words): ``improvement −155.76 µs (−10.9%), CI …``."""
    ci = ""
    if move["lo"] is not None and move["hi"] is not None:
        ci = f", {data['confidence']:.0%} CI {signed_ns(move['lo'])} … {signed_ns(move['hi'])}"
    words = f"{move['status']} {signed_ns(move['delta_ns'])} ({signed_pct(move['rel'])}){ci}"
    share = move["explained_share"]
    if share is not None and move["changes"]:
        words += f"; changes below explain {fmt_pct(share)}"
    return run_name(data, move["from"]), run_name(data, move["to"]), words


def quiet_moves(data: dict[str, Any]) -> str:
    """The moves that are not significant, in one line."""
    quiet = [m for m in data["moves"] if not m["significant"]]
    if not quiet:
        return ""
    parts = [f"#{m['from']}→#{m['to']} {signed_pct(m['rel'])} ({m['status']})" for m in quiet]
    return "no significant move at " + "; ".join(parts)


def matched_line(item: dict[str, Any]) -> str:
    """A role whose kernels have other names on the two sides, in words (unescaped)."""
    how = item["matched_by"] or "?"
    return f"{item['label']} (by {how}, {signed_ns(item['delta_ns'])}/step)"


def render_trend(data: dict[str, Any], top: int = 5, width: int = 120) -> Group:
    """``Trend.to_dict()`` for a ``width``-column terminal."""
    runs = data["runs"]
    significant = [m for m in data["moves"] if m["significant"]]
    head = Text(f"trend of {len(runs)} runs", style="bold")
    head.append(f" (ordered by {data['ordered_by']}): step time {sparkline(medians(data))}")
    parts: list[Any] = [head]
    parts += [Text(f"warning: {printable(w)}", style="yellow") for w in data["warnings"]]
    wide = width >= 130  # room for the largest categories
    table = Table(box=None, header_style="bold")
    columns = ["#", "run", "vendor", "steps", "step median [CI]", "vs baseline"]
    for name in [*columns, *(["largest categories"] if wide else [])]:
        right = name in ("#", "steps", "step median [CI]", "vs baseline")
        table.add_column(
            name,
            justify="right" if right else "left",
            no_wrap=name != "run",
            min_width=len(name) if name != "run" else 8,
        )
    for run in runs:
        cells = [
            str(run["index"]),
            Text(printable(run["label"])),
            run["vendor"] or "-",
            str(run["steps"]),
            median_cell(run),
            baseline_cell(run, data),
        ]
        table.add_row(*cells, *([top_categories(run)] if wide else []))
    parts += [Text(), table, Text()]
    for move in significant:
        a, b, words = move_title(data, move)
        line = Text(f"{printable(a)} → {printable(b)}: ")
        line.append(words, style=STATUS_STYLE.get(move["status"], ""))
        parts.append(line)
        for change in move["changes"][:top]:
            parts.append(
                Text(f"  {STATUS_MARK.get(move['status'], '-')} {printable(change['text'])}")
            )
        more = len(move["changes"]) - top
        if more > 0:
            parts.append(Text(f"  … {more} more (--format json lists every one)", style="dim"))
        if move["matched"]:
            shown = "; ".join(printable(matched_line(m)) for m in move["matched"][:top])
            parts.append(Text(f"  matched by role: {shown}", style="cyan"))
    if not significant:
        parts.append(Text("no significant move between consecutive runs"))
    quiet = quiet_moves(data)
    if quiet:
        parts.append(Text(quiet, style="dim"))
    renames = [m for m in data["moves"] if not m["significant"] and m["matched"]]
    for move in renames:
        names = "; ".join(printable(matched_line(m)) for m in move["matched"][:top])
        parts.append(Text(f"#{move['from']}→#{move['to']} matched by role: {names}", style="cyan"))
    return Group(*parts)
