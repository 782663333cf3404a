"""The roofline section of the terminal and Markdown reports, from
``Analysis.to_dict()["roofline"]`` (:mod:`tracekit.metrics.roofline.export`): the devices
matched with their bf16 peak and HBM bandwidth, the roofline's warnings, the time per
operator family against its bound, and the top operators by headroom. Nothing at all for a
trace without shapes.

Operator names and shapes come from the trace: the terminal writes them through
:func:`printable` into plain ``Text`` cells, Markdown through the caller's escaping helper."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from tracekit.names import printable
from tracekit.reports.format import cut, fmt_ns, fmt_pct, step_ranges

TOP_OPERATORS = 8  # operators listed by headroom (the rest: --format json, the HTML chart)
OP_CHARS, SHAPES_CHARS = 40, 60
HEADINGS = ("op", "shapes", "launches", "time", "TFLOP/s", "GB/s", "efficiency", "headroom",
            "limit")  # fmt: skip
NARROW = 110  # narrower terminals leave out the GB/s and limit columns
LEGEND = "efficiency = roofline bound / time; ≤: the shapes give only an upper bound on the work"


def shown(roofline: dict[str, Any] | None) -> bool:
    """Whether the analysis has operators with work from their shapes."""
    return bool(roofline and roofline.get("operators"))


def fmt_rate(value: float | None) -> str:
    """A TFLOP/s or GB/s figure: ``610``, ``90.4``, ``0.122``, ``-`` for none."""
    if value is None:
        return "-"
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 1:
        return f"{value:.1f}"
    return "0" if value <= 0 else f"{value:.3g}"


def efficiency_text(efficiency: float | None, exact: bool) -> str:
    """``61.7%``, or ``≤ 19.3%`` where the work is an upper bound; ``-`` without a device."""
    if efficiency is None:
        return "-"
    return fmt_pct(efficiency) if exact else f"≤ {fmt_pct(efficiency)}"


def device_lines(roofline: dict[str, Any]) -> list[str]:
    """One line per device table entry matched: its devices, name, bf16 peak and HBM
    bandwidth (``devices 0–7: NVIDIA H200 SXM 141GB: bf16 989.5 TFLOP/s, HBM 4,800 GB/s``)."""
    groups: dict[str, list[int]] = {}
    entries: dict[str, dict[str, Any]] = {}
    for index, device in (roofline.get("devices") or {}).items():
        groups.setdefault(device["id"], []).append(int(index))
        entries[device["id"]] = device
    lines = []
    for key, indices in groups.items():
        device = entries[key]
        if indices == [-1]:
            where = "every device"
        else:
            where = f"device{'s' if len(indices) > 1 else ''} {step_ranges(indices)}"
        bf16 = device.get("bf16_tflops")
        peak = f"bf16 {bf16:g} TFLOP/s, " if bf16 else ""
        lines.append(f"{where}: {device['name']}: {peak}HBM {device['hbm_gbps']:,.0f} GB/s")
    return lines


def family_line(roofline: dict[str, Any]) -> str:
    """Time per operator family and its efficiency, largest headroom first."""
    parts = []
    for f in roofline.get("families") or []:
        eff = efficiency_text(f.get("efficiency"), bool(f.get("exact")))
        parts.append(f"{f['family']} {fmt_ns(f['time_ns'])}" + ("" if eff == "-" else f" at {eff}"))
    return "by family: " + ", ".join(parts) if parts else ""


def operator_cells(op: dict[str, Any], text: Callable[[Any], str]) -> list[str]:
    """One operator's row (:data:`HEADINGS`); ``text`` escapes the trace's op and shapes."""
    return [
        text(cut(op["op"], OP_CHARS)),
        text(cut(op.get("shapes") or "-", SHAPES_CHARS)),
        f"{op['launches']:,}",
        fmt_ns(op["time_ns"]),
        fmt_rate(op.get("tflops")),
        fmt_rate(op.get("gbps")),
        efficiency_text(op.get("efficiency"), bool(op.get("exact"))),
        "-" if op.get("headroom_ns") is None else fmt_ns(op["headroom_ns"]),
        (op.get("limit") or "-") if op.get("bound_ns") is not None else "-",
    ]


def more_line(roofline: dict[str, Any], top: int, hint: str) -> str:
    """``21 more operators (hint)``, or nothing."""
    rest = int(roofline.get("operators_total") or len(roofline["operators"])) - top
    return f"{rest} more operator{'' if rest == 1 else 's'} ({hint})" if rest > 0 else ""


def render_roofline(roofline: dict[str, Any] | None, width: int = 200) -> Group | None:
    """The terminal section, or None for a trace without shapes."""
    if not shown(roofline):
        return None
    assert roofline is not None
    lines: list[Any] = [Text("roofline", style="bold")]
    matched = device_lines(roofline)
    lines += [Text(f"  {printable(line)}") for line in matched]
    lines += [Text(f"  {printable(w)}", style="yellow") for w in roofline.get("warnings") or []]
    families = family_line(roofline)
    if families:
        lines.append(Text(f"  {printable(families)}", style="dim"))
        lines[-1].no_wrap, lines[-1].overflow = True, "ellipsis"
    table = Table(
        title="top operators by headroom (time above the roofline bound)",
        title_justify="left",
        box=None,
        header_style="bold",
        padding=(0, 0, 0, 1),
    )
    keep = [h for h in HEADINGS if width >= NARROW or h not in ("GB/s", "limit")]
    rows = [
        [c for h, c in zip(HEADINGS, operator_cells(op, printable)) if h in keep]
        for op in roofline["operators"][:TOP_OPERATORS]
    ]
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(keep)]
    # the numbers keep their width; the op and its shapes share what is left
    room = max(width - sum(widths[2:]) - len(keep), 24)
    widths[0] = min(widths[0], max(room * 2 // 5, 8))
    widths[1] = min(widths[1], max(room - widths[0], 12))
    for i, heading in enumerate(keep):
        left = heading in ("op", "shapes", "limit")
        table.add_column(
            heading,
            justify="left" if left else "right",
            no_wrap=True,
            overflow="ellipsis",
            min_width=widths[i] if i >= 2 else None,
            max_width=widths[i],
        )
    for row in rows:
        table.add_row(*[Text(cell) for cell in row])
    lines.append(table)
    more = more_line(roofline, TOP_OPERATORS, "--format json lists every one")
    lines.append(Text(f"  {LEGEND}" + (f"; {more}" if more else ""), style="dim"))
    return Group(*lines)


def roofline_markdown(roofline: dict[str, Any] | None, text: Callable[[Any], str]) -> list[str]:
    """The Markdown section (``text`` escapes trace text), or no lines without shapes."""
    if not shown(roofline):
        return []
    assert roofline is not None
    lines = ["### Roofline", ""]
    lines += [f"- {text(line)}" for line in device_lines(roofline)]
    lines += [f"- ⚠ {text(w)}" for w in roofline.get("warnings") or []]
    families = family_line(roofline)
    lines += [f"- {text(families)}"] if families else []
    lines += [
        "",
        "Top operators by headroom (time above the roofline bound):",
        "",
        "| " + " | ".join(HEADINGS) + " |",
        "|---|---|" + "---:|" * (len(HEADINGS) - 3) + "---|",
    ]
    for op in roofline["operators"][:TOP_OPERATORS]:
        lines.append("| " + " | ".join(operator_cells(op, text)) + " |")
    more = more_line(roofline, TOP_OPERATORS, "--format json lists every one")
    return [*lines, "", text(LEGEND) + (f"; {text(more)}" if more else ""), ""]
