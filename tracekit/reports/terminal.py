"""Rich renderings of `tracekit info` and `tracekit summary` for a terminal.

Every cell that holds text from the trace is a :class:`rich.text.Text` built from
:func:`printable`, so neither markup nor control characters in a name reach the terminal.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from tracekit.names import distinct_short_names, printable
from tracekit.reports.checks_text import capture_line
from tracekit.reports.format import fmt_ns, fmt_pct


def _text(value: object, default: str = "-") -> Text:
    """A table cell for a value from the trace: plain text, no markup, no control characters."""
    return Text(default if value is None or value == "" else printable(value))


def _count(value: object) -> Text:
    """A count with thousands separators (any other value shown as it is)."""
    is_int = isinstance(value, int) and not isinstance(value, bool)
    return Text(f"{value:,}") if is_int else _text(value)


def _memory(value: object) -> Text:
    """Device memory in GiB when the trace gives bytes, else the value as the trace gives it."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
        return Text(f"{value / 2**30:.0f} GiB")
    return _text(value or None)


def _warnings(warnings: Any) -> list[Text]:
    items = warnings if isinstance(warnings, list) else [warnings] if warnings else []
    return [Text(f"warning: {printable(w)}", style="yellow") for w in items]


def _table(title: str, columns: dict[str, str]) -> Table:
    """A borderless table with a left-aligned title; ``columns`` maps heading -> justify."""
    table = Table(title=title, title_justify="left", box=None, header_style="bold")
    for heading, justify in columns.items():
        table.add_column(heading, justify=justify)  # type: ignore[arg-type]
    return table


def _joined(values: Any) -> Any:
    """A list as ``a, b, c``; anything else unchanged."""
    return ", ".join(str(v) for v in values) if isinstance(values, list) else values


def _producer(producer: Any) -> str:
    if not isinstance(producer, Mapping):
        return "" if producer is None else str(producer)
    version = " ".join(str(v) for v in (producer.get("name"), producer.get("version")) if v)
    if producer.get("export_schema"):
        version += f" (export schema {producer['export_schema']})"
    return version


def render_info(data: dict[str, Any]) -> Group:
    """The `tracekit info` view: what the trace is and what it holds."""
    head = Table.grid(padding=(0, 2))
    head.add_column(style="bold")
    head.add_column()
    head.add_row("source", _text(data.get("source")))
    head.add_row("format", _text(data.get("format")))
    head.add_row("producer", _text(_producer(data.get("producer"))))
    head.add_row("events", _count(data.get("events")))
    head.add_row("span", Text(fmt_ns(data.get("span_ns"))))
    source = data.get("rank_source")  # where the ranks came from (trace data or processes)
    ranks = _joined(data.get("ranks"))
    told = {"process": "one per process", "none": "none recorded"}.get(source, f"from {source}")
    ranks = f"{ranks} ({told})" if source else ranks
    head.add_row("ranks", _text(ranks))

    devices = _table(
        "devices",
        {"#": "right", "name": "left", "cores": "right", "memory": "right", "streams": "left"},
    )
    streams = data.get("streams_per_device", {})
    for dev in data.get("devices", []):
        dev = dev if isinstance(dev, Mapping) else {"name": dev}
        ids = streams.get(str(dev.get("index")), [])
        devices.add_row(
            _text(dev.get("index")),
            _text(dev.get("name")),
            _text(dev.get("cores")),
            _memory(dev.get("memory")),
            _text(_joined(ids)),
        )
    kinds = _table("events per kind", {"kind": "left", "count": "right"})
    for kind, count in data.get("events_per_kind", {}).items():
        kinds.add_row(_text(kind), _count(count))
    first = [line for line in (capture_line(data),) if line is not None]  # said first
    return Group(*first, head, Text(), devices, Text(), kinds, *_warnings(data.get("warnings", [])))


def render_summary(data: dict[str, Any], name_width: int = 60) -> Group:
    """The `tracekit summary` view: device busy time and the top kernels."""
    devices = _table(
        "device busy time", dict.fromkeys(("device", "busy", "span", "utilization"), "right")
    )
    for dev in data["devices"]:
        devices.add_row(
            _text(dev["device"]),
            fmt_ns(dev["busy_ns"]),
            fmt_ns(dev["span_ns"]),
            fmt_pct(dev["utilization"]),
        )

    kinds = _table("by kind", {"kind": "left", "count": "right", "total": "right", "busy": "right"})
    for row in data["kinds"]:
        kinds.add_row(
            _text(row["kind"]),
            _count(row["count"]),
            fmt_ns(row["total_ns"]),
            fmt_ns(row["busy_ns"]),
        )

    streams = _table(
        "by stream", dict.fromkeys(("device", "pid", "stream", "events", "busy"), "right")
    )
    for row in data["streams"]:
        streams.add_row(
            _text(row["device"]),
            _text(row.get("pid")),
            _text(row["stream"]),
            _count(row["count"]),
            fmt_ns(row["busy_ns"]),
        )

    top = Table(title="top kernels", title_justify="left", box=None, header_style="bold")
    for col in ("kernel", "count", "total", "mean", "share"):
        top.add_column(col, justify="left" if col == "kernel" else "right", no_wrap=True)
    labels = distinct_short_names([row["name"] for row in data["top_kernels"]], name_width)
    for row, label in zip(data["top_kernels"], labels):
        top.add_row(
            Text(label),
            _count(row["count"]),
            fmt_ns(row["total_ns"]),
            fmt_ns(row["mean_ns"]),
            fmt_pct(row["share"]),
        )
    parts: list[Any] = [devices, Text(), kinds, Text(), streams, Text(), top]
    return Group(*parts, *_warnings(data.get("warnings", [])))


NO_COLOR = False  # set by ``tracekit --no-color``; NO_COLOR in the environment works too


def print_renderable(renderable: Any, console: Console | None = None) -> None:
    """Print to stdout (no colours when stdout is not a terminal or colours are off); lines
    that must stay whole (checks) are not cropped at the terminal's width."""
    (console or Console(no_color=NO_COLOR or None)).print(renderable, crop=False)
