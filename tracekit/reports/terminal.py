"""Rich renderings of `tracekit info` and `tracekit summary` for a terminal."""

from __future__ import annotations

from typing import Any

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from tracekit.reports.format import fmt_ns, fmt_pct, short_name


def _warnings(warnings: list[str]) -> list[Text]:
    return [Text(f"warning: {w}", style="yellow") for w in warnings]


def render_info(data: dict[str, Any]) -> Group:
    """The `tracekit info` view: what the trace is and what it holds."""
    producer = data.get("producer") or {}
    head = Table.grid(padding=(0, 2))
    head.add_column(style="bold")
    head.add_column()
    head.add_row("source", Text(str(data.get("source"))))
    head.add_row("format", str(data.get("format")))
    version = " ".join(str(v) for v in (producer.get("name"), producer.get("version")) if v)
    if producer.get("export_schema"):
        version += f" (export schema {producer['export_schema']})"
    head.add_row("producer", Text(version or "-"))
    head.add_row("events", f"{data['events']:,}")
    head.add_row("span", fmt_ns(data.get("span_ns")))
    head.add_row("ranks", ", ".join(str(r) for r in data.get("ranks", [])) or "-")

    devices = Table(title="devices", title_justify="left", box=None, header_style="bold")
    for col in ("#", "name", "cores", "memory", "streams"):
        devices.add_column(col, justify="right" if col in ("#", "cores", "memory") else "left")
    streams = data.get("streams_per_device", {})
    for dev in data.get("devices", []):
        memory = dev.get("memory")
        devices.add_row(
            str(dev.get("index")),
            Text(str(dev.get("name") or "-")),
            str(dev.get("cores") or "-"),
            f"{memory / 2**30:.0f} GiB" if memory else "-",
            ", ".join(str(s) for s in streams.get(str(dev.get("index")), [])) or "-",
        )
    kinds = Table(title="events per kind", title_justify="left", box=None, header_style="bold")
    kinds.add_column("kind")
    kinds.add_column("count", justify="right")
    for kind, count in data.get("events_per_kind", {}).items():
        kinds.add_row(kind, f"{count:,}")
    return Group(head, Text(), devices, Text(), kinds, *_warnings(data.get("warnings", [])))


def render_summary(data: dict[str, Any], name_width: int = 60) -> Group:
    """The `tracekit summary` view: device busy time and the top kernels."""
    devices = Table(title="device busy time", title_justify="left", box=None, header_style="bold")
    for col in ("device", "busy", "span", "utilization"):
        devices.add_column(col, justify="right")
    for dev in data["devices"]:
        devices.add_row(
            str(dev["device"]), fmt_ns(dev["busy_ns"]), fmt_ns(dev["span_ns"]),
            fmt_pct(dev["utilization"]),
        )  # fmt: skip

    kinds = Table(title="by kind", title_justify="left", box=None, header_style="bold")
    for col in ("kind", "count", "total", "busy"):
        kinds.add_column(col, justify="left" if col == "kind" else "right")
    for row in data["kinds"]:
        kinds.add_row(
            row["kind"], f"{row['count']:,}", fmt_ns(row["total_ns"]), fmt_ns(row["busy_ns"])
        )

    streams = Table(title="by stream", title_justify="left", box=None, header_style="bold")
    for col in ("device", "stream", "events", "busy"):
        streams.add_column(col, justify="right")
    for row in data["streams"]:
        streams.add_row(
            str(row["device"]), str(row["stream"]), f"{row['count']:,}", fmt_ns(row["busy_ns"])
        )

    top = Table(title="top kernels", title_justify="left", box=None, header_style="bold")
    for col in ("kernel", "count", "total", "mean", "share"):
        top.add_column(col, justify="left" if col == "kernel" else "right", no_wrap=True)
    labels = _distinct_labels(data["top_kernels"], name_width)
    for row, label in zip(data["top_kernels"], labels):
        top.add_row(
            Text(label), f"{row['count']:,}", fmt_ns(row["total_ns"]),
            fmt_ns(row["mean_ns"]), fmt_pct(row["share"]),
        )  # fmt: skip
    parts: list[Any] = [devices, Text(), kinds, Text(), streams, Text(), top]
    return Group(*parts, *_warnings(data.get("warnings", [])))


def _distinct_labels(rows: list[dict[str, Any]], width: int) -> list[str]:
    """Short kernel names, numbered where different kernels shorten to the same text."""
    labels = [short_name(row["name"], width - 3) for row in rows]
    seen: dict[str, int] = {}
    out = []
    for label in labels:
        seen[label] = seen.get(label, 0) + 1
        out.append(label if labels.count(label) == 1 else f"{label} #{seen[label]}")
    return out


def print_renderable(renderable: Any, console: Console | None = None) -> None:
    """Print to stdout (no colours when stdout is not a terminal)."""
    (console or Console()).print(renderable)
