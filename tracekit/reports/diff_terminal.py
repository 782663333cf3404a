"""A diff for a terminal (rich): the verdict first, then step time, movers, kernels that
appear or disappear, rule metrics and findings. Trace text goes through :func:`printable`
into plain ``Text``, never into markup."""

from __future__ import annotations

from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from tracekit.names import printable
from tracekit.reports import diff_text as dt

VERDICT_STYLE = {"regression": "bold red", "improvement": "bold green"}
STATUS_STYLE = {
    "regression": "red",
    "worse": "red",
    "appeared": "yellow",
    "grew": "yellow",
    "improvement": "green",
    "better": "green",
    "disappeared": "green",
    "shrank": "green",
    "more": "dim",
    "renamed": "cyan",
    "not significant": "dim",
}


def _table(title: str, header: list[str], rows: list[list[Text]], width: int) -> Table:
    """The first column (names) is cut with an ellipsis to fit ``width``; numbers are not."""
    table = Table(title=title, title_justify="left", box=None, header_style="bold")
    needs = [max([len(h), *(row[i].cell_len for row in rows)]) for i, h in enumerate(header)]
    room = max(12, width - sum(needs[1:]) - 2 * len(header))
    for i, heading in enumerate(header):
        last = i == len(header) - 1
        fit = min(needs[0], room) if i == 0 else needs[i]
        table.add_column(
            heading,
            justify="left" if i == 0 or last else "right",
            no_wrap=True,
            overflow="ellipsis",
            width=fit,
        )
    for row in rows:
        table.add_row(*row)
    return table


SHORT_STATUS = {
    "within threshold": "",
    "unchanged": "",
    "not significant": "~",
    "regression": "▲",
    "improvement": "▼",
}
LEGEND = "▲ regression, ▼ improvement, ~ within the noise"


def _status(text: str) -> Text:
    return Text(SHORT_STATUS.get(text, text), style=STATUS_STYLE.get(text, ""))


def render_diff(data: dict[str, Any], top: int = 10, width: int = 120) -> Group:
    """``Diff.to_dict()`` for a ``width``-column terminal (names cut to fit)."""
    verdict = Text()
    verdict.append(dt.title(data), style=VERDICT_STYLE.get(data["verdict"], "bold"))
    verdict.append(f": {dt.verdict_line(data, printable)}")
    parts: list[Any] = [verdict]
    for line in (dt.causes(data, printable), dt.findings_summary(data, printable)):
        if line:
            parts.append(Text(line))
    parts += [Text(f"warning: {printable(w)}", style="yellow") for w in data["warnings"]]
    parts += [Text(), Text(f"decode step: {dt.step_line(data)}")]
    rows = []
    for change, cells in dt.mover_rows(data, top):
        if change["kind"] == "category":
            what = Text(change["name"], style="bold")
        else:
            what = Text(printable(change["label"]))
        rows.append([what, *(Text(c) for c in cells[:-1]), _status(cells[-1])])
    header = ["category / kernel", "base", "head", "Δ", "Δ %", "CI", ""]
    title = f"top movers, time per step ({LEGEND})"
    parts += [Text(), _table(title, header, rows, width) if rows else Text("no time changed")]
    presence = dt.presence_lines(data, printable)
    if presence:
        parts += [Text(), Text("kernels", style="bold")]
        parts += [Text(f"  {text}", style=STATUS_STYLE.get(kind, "")) for kind, text in presence]
    operations = dt.operation_lines(data, printable, top)
    if operations:
        parts += [Text(), Text("per operation (launching operator)", style="bold")]
        parts += [Text(f"  {line}") for line in operations]
    metric_rows = [
        [Text(r[0]), *(Text(c) for c in r[1:-1]), _status(r[-1])] for r in dt.metric_rows(data)
    ]
    if metric_rows:
        header = ["rule metric (mean per step)", "base", "head", "Δ", "status"]
        parts += [Text(), _table("rule metrics", header, metric_rows, width)]
    findings = dt.finding_lines(data, printable, top)
    if findings:
        parts += [Text(), Text("findings by pattern", style="bold")]
        parts += [Text(f"  {text}", style=STATUS_STYLE.get(s, "")) for s, text in findings]
    efficiency = dt.efficiency_lines(data, printable, top)
    if efficiency:
        parts += [Text(), Text("efficiency, same shapes on both sides", style="bold")]
        parts += [Text(f"  {line}") for line in efficiency]
    note = (
        f"base: {dt.sources(data['base'], printable)}; head: {dt.sources(data['head'], printable)}"
    )
    parts += [Text(), Text(note, style="dim"), Text(dt.method_note(data), style="dim")]
    return Group(*parts)
