"""Rich renderings of an analysis for a terminal: how steps were found, a per-step table
and the top findings by impact. Trace text goes through :func:`printable` into plain
``Text`` cells."""

from __future__ import annotations

import textwrap
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from tracekit.metrics.columns import LABELS
from tracekit.names import distinct_short_names, printable
from tracekit.reports.checks_text import capture_line, render_checks
from tracekit.reports.format import (
    ADVICE_CHARS,
    TOP_TERMINAL,
    analysis_steps,
    cut,
    fmt_ns,
    impact_text,
    metric_cell,
    more_text,
    ranked_dicts,
    step_table_keys,
    steps_text,
    worst_text,
)
from tracekit.reports.roofline_text import render_roofline
from tracekit.reports.workload_text import repetition_rows, stack_line, workload_line

SEVERITY_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}
_NARROW = {"ns_per_token": "per tok"}  # headings shorter than the labels' for a terminal
# Columns kept first when the terminal is narrow; rank, dev, phase and tokens only where they
# vary or are known.
_PRIORITY = (
    "step",
    "dur",
    "phase",
    "compute",
    "exposed",
    "overlap",
    "fallback",
    "bubbles",
    "tokens",
    "per tok",
    "comm",
    "busy",
    "roofline",
    "bound",
    "shaped",
)
_OPTIONAL = ("rank", "dev", "phase", "tokens", "per tok")
MAX_STEP_ROWS = 40
BAR_WIDTH = 16
# step time split for the inline bar: compute, exposed communication, other busy, idle
_BAR_PARTS = (("█", "green"), ("▓", "red"), ("▒", "blue"), ("·", "dim"))


def step_bar(row: dict[str, Any], width: int = BAR_WIDTH) -> Text:
    """A bar of the step's time: compute, exposed communication, other busy time, idle."""
    dur = row.get("dur") or 0
    if dur <= 0:
        return Text("")
    compute, exposed, busy = row["compute_ns"], row["exposed_comm_ns"], row["busy_ns"]
    other = max(busy - compute - exposed, 0)
    shares = [compute / dur, exposed / dur, other / dur]
    cells = [round(share * width) for share in shares]
    cells.append(max(width - sum(cells), 0))
    bar = Text()
    for (char, style), n in zip(_BAR_PARTS, cells):
        bar.append(char * n, style=style)
    return bar


def _cell(key: str, value: Any) -> Text:
    return Text(metric_cell(key, value, printable))


def confidence_line(data: dict[str, Any]) -> Text | None:
    """The one line that says the steps may be wrong (low confidence), or None."""
    note = data.get("low_confidence")
    return None if not note else Text(f"⚠ {printable(note)}", style="bold yellow")


def header_lines(data: dict[str, Any]) -> list[Text]:
    """What a reader must see first: the incomplete-capture line, the low-confidence line,
    what the trace is (its workload and step unit, its software stack), then every check
    that did not pass (failing first, one line each) and the checks' tally."""
    checks = data.get("checks") or []
    lines = [line for line in (capture_line(data), confidence_line(data)) if line is not None]
    lines.append(Text(printable(workload_line(data.get("workload"))), style="bold"))
    if "stack" in data:
        lines.append(Text(printable(stack_line(data["stack"])), style="dim"))
    if checks:
        lines += list(render_checks(checks, passing=False).renderables)
    return lines


def phase_lines(data: dict[str, Any]) -> list[Text]:
    """Step time per phase (decode first): a decode median never mixes prefill steps in."""
    phases = data.get("phases") or []
    if not phases or (len(phases) == 1 and phases[0]["phase"] == "unknown"):
        return []
    parts = []
    for p in phases:
        text = f"{p['phase']} {p['steps']}: median {fmt_ns(p['median_ns'])}"
        if p.get("ns_per_token") is not None:
            text += f", {fmt_ns(p['ns_per_token'])}/token"
        parts.append(text)
    source = data["steps"].get("phase_method")
    return [Text(f"phases ({source}): " + "; ".join(parts) if source else "; ".join(parts))]


BAR_MIN_WIDTH = 130  # narrower terminals get the numbers without the bar


def render_steps(data: dict[str, Any], width: int = 200, confidence: bool = True) -> Group:
    """The header lines (:func:`header_lines`, unless ``confidence`` is False), the step
    detection line,
    its warnings and the step time per phase, then one row per (rank, device, step), long
    traces abridged; the inline bar only when the terminal is ``BAR_MIN_WIDTH`` columns or
    wider."""
    with_bar = width >= BAR_MIN_WIDTH
    steps = data["steps"]
    unit = (data.get("workload") or {}).get("unit", "step")
    head = Text(
        f"steps ({unit}): {steps['count']} by {steps['method']} (confidence"
        f" {steps['confidence']}): {printable(steps['detail'])}"
    )
    notes = [Text(f"  {printable(w)}", style="yellow") for w in steps.get("warnings") or []]
    table = Table(
        title="per step", title_justify="left", box=None, header_style="bold", padding=(0, 0, 0, 1)
    )
    rows = data["step_metrics"]
    shown = (
        rows
        if len(rows) <= MAX_STEP_ROWS
        else rows[: MAX_STEP_ROWS // 2] + rows[-MAX_STEP_ROWS // 2 :]
    )
    columns = {_NARROW.get(key, LABELS[key].heading): key for key in step_table_keys(rows)}
    cells = {h: [_cell(k, row.get(k)) for row in shown] for h, k in columns.items()}
    headings = _fitting_columns(cells, width - (BAR_WIDTH + 1 if with_bar else 0))
    for heading in headings:
        table.add_column(heading, justify="right", no_wrap=True)
    if with_bar:
        table.add_column("█ compute ▓ exposed ▒ other · idle", no_wrap=True)
    for i, row in enumerate(shown):
        if len(rows) > MAX_STEP_ROWS and i == MAX_STEP_ROWS // 2:
            table.add_row(*[Text("…")] * (len(headings) + with_bar))
        table.add_row(*[cells[h][i] for h in headings], *([step_bar(row)] if with_bar else []))
    top = header_lines(data) if confidence else []
    work = []
    reps = repetition_rows(data.get("workload"))
    if reps:  # a micro-benchmark: its kernels' repetitions, not steps with bubbles
        listing = Table(title="repetitions", title_justify="left", box=None, header_style="bold")
        for heading in ("kernel", "count", "median", "spread p10-p90"):
            listing.add_column(heading, justify="left" if heading == "kernel" else "right")
        short = distinct_short_names([name for name, *_ in reps])
        for (_, *numbers), name in zip(reps, short):
            listing.add_row(Text(printable(name)[:80]), *numbers)
        work += [listing, Text()]
    return Group(*top, *work, head, *notes, *phase_lines(data), Text(), table)


def _fitting_columns(cells: dict[str, list[Text]], width: int) -> list[str]:
    """The step-table columns that fit in ``width``, in table order: rank and dev where
    they vary, then the others by :data:`_PRIORITY`."""
    varying = [h for h in ("rank", "dev") if len({c.plain for c in cells[h]}) > 1]
    known = [h for h in ("phase", "tokens", "per tok") if {c.plain for c in cells[h]} - {"-"}]
    chosen: list[str] = []
    used = 0
    for heading in (*varying, *[h for h in _PRIORITY if h not in _OPTIONAL or h in known]):
        if heading not in cells:  # the roofline's columns, on a trace without shapes
            continue
        need = 1 + max([len(heading), *(c.cell_len for c in cells[heading])])
        if used + need > width and len(chosen) >= 2:
            continue
        chosen.append(heading)
        used += need
    return [h for h in cells if h in chosen]


MORE_HINT = "--format json or tracekit report lists every one"


def render_findings(
    findings: list[dict[str, Any]],
    all_steps: list[int],
    top: int = TOP_TERMINAL,
    more: str = MORE_HINT,
    width: int = 200,
) -> Group:
    """The ``top`` findings by impact (see :func:`ranked_dicts`), each with its impact, share
    of the step time, rule and title, its detail (one line), steps and advice, then how many
    more there are: bounded however many findings the trace has. Advice is wrapped to
    ``width`` columns; every other line is one line, cut with an ellipsis."""
    if not findings:
        return Group(Text("findings: none", style="green"))
    ordered = ranked_dicts(findings)
    head = Text(f"findings: {len(findings)}", style="bold")
    head.append(", by impact (the most fixing each could save over the trace)", style="dim")
    lines: list[Any] = [head]
    pad = max(len(impact_text(f)) for f in ordered[:top])
    for i, f in enumerate(ordered[:top], 1):
        line = Text(f"{i:>2}. ")
        line.append(f"{impact_text(f):<{pad}}  ", style="bold")
        line.append(f"{f['severity']:<7} ", style=SEVERITY_STYLE.get(f["severity"], ""))
        line.append(f"[{printable(f['rule'])}] ", style="bold")
        line.append(printable(f["title"]))
        line.no_wrap, line.overflow = True, "ellipsis"  # one line; full text in --json
        below: list[Text] = []
        if f.get("detail"):
            below.append(Text(printable(" ".join(str(f["detail"]).split())), style="dim"))
        worst = worst_text(f)
        below.append(Text(f"steps: {steps_text(f, all_steps)}{'; ' + worst if worst else ''}"))
        below[-1].stylize("dim")
        advice = printable(cut(f.get("advice") or "", ADVICE_CHARS))
        wrapped = textwrap.wrap(f"→ {advice}", max(width - 4, 40)) if advice else []
        below += [Text(part) for part in wrapped]
        for text in below:
            text.pad_left(4)
            text.no_wrap, text.overflow = True, "ellipsis"
        lines += [line, *below]
    rest = more_text(len(ordered) - top, more)
    if rest:
        lines.append(Text(rest, style="dim"))
    return Group(*lines)


def render_analysis(data: dict[str, Any], width: int = 200, confidence: bool = True) -> Group:
    """Steps and findings together (``tracekit analyze``) for a ``width``-column terminal;
    ``confidence=False`` leaves the low-confidence line to the caller (it prints it first)."""
    steps = render_steps(data, width, confidence)
    findings = render_findings(data["findings"], analysis_steps(data), width=width)
    roofline = render_roofline(data.get("roofline"), width)
    return Group(steps, Text(), *([roofline, Text()] if roofline else []), findings)
