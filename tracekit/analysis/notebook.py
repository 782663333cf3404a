"""Jupyter renderings: a small self-contained HTML toolkit and :func:`analysis_html`, the
``Analysis._repr_html_``.

The toolkit (a ``<style>`` block scoped to :data:`WRAP`, an escaping table builder, an inline
SVG chart of stacked bars with ``<title>`` tooltips) has no JavaScript and loads nothing, so a
repr stays small and renders in any notebook viewer, trusted or not. Every value that reaches
the page goes through :func:`esc` (``html.escape`` with ``quote=True`` after
:func:`tracekit.names.printable`) unless it is :class:`Raw` HTML built here. The diff and trend
reprs (:mod:`tracekit.diff.notebook`, :mod:`tracekit.trend.notebook`) build on it.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

import polars as pl

from tracekit import units
from tracekit.metrics.steps import phase_summary
from tracekit.names import printable
from tracekit.taxonomy import CATEGORIES

WRAP = "tk-nb"  # the class of every repr's outer <div>; the style applies inside it only
MAX_BARS = 200  # a chart with more steps bins consecutive steps into this many bars at most
TOP_FINDINGS = 5
TEXT_CHARS = 300  # a detail or advice cell is cut here
WIDE = 60  # a text cell longer than this may break inside a word (long kernel names)
COLORS = {
    "gemm": "#4c78a8", "attention": "#72b7b2", "moe": "#54a24b", "comm": "#e45756",
    "elementwise": "#ff9da6", "norm": "#9d755d", "activation": "#eeca3b", "quant": "#79706e",
    "memory": "#bab0ac", "sampling": "#d67195", "other": "#c7c7c7",
}  # fmt: skip
STATUS_CLASS = {
    "fail": "bad", "regression": "bad", "error": "bad", "appeared": "bad", "grew": "bad",
    "warn": "warn", "warning": "warn", "not significant": "warn",
    "pass": "good", "improvement": "good", "disappeared": "good", "shrank": "good",
}  # fmt: skip
STYLE = f"""<style>
.{WRAP} {{ font: 13px/1.4 system-ui, sans-serif; color: #1d2330; max-width: 980px;
  overflow-x: auto; }}
.{WRAP} h3 {{ margin: 4px 0 6px; font-size: 15px; }}
.{WRAP} h4 {{ margin: 12px 0 4px; font-size: 13px; }}
.{WRAP} table {{ border-collapse: collapse; margin: 2px 0; font: inherit; }}
.{WRAP} th, .{WRAP} td {{ padding: 2px 8px; border-bottom: 1px solid #dde1e8;
  text-align: left; vertical-align: top; }}
.{WRAP} td.w {{ overflow-wrap: anywhere; min-width: 240px; }}
.{WRAP} td.r, .{WRAP} th.r {{ text-align: right; white-space: nowrap; }}
.{WRAP} .tk-badge {{ padding: 0 6px; border-radius: 8px; background: #eceff3;
  white-space: nowrap; }}
.{WRAP} .tk-bad {{ background: #fdecea; color: #a12a1d; }}
.{WRAP} .tk-warn {{ background: #fff4ce; color: #7a5200; }}
.{WRAP} .tk-good {{ background: #e6f4ea; color: #1e6b2f; }}
.{WRAP} .tk-note {{ border-left: 4px solid #c98a00; background: #fffaf0; padding: 4px 8px;
  margin: 4px 0; }}
.{WRAP} .tk-muted {{ color: #5b6474; }}
.{WRAP} .tk-key {{ display: inline-block; width: 10px; height: 10px; margin: 0 3px 0 10px; }}
</style>"""


class Raw(str):
    """HTML built by this toolkit: inserted as it is (every other value is escaped)."""


def esc(value: object) -> str:
    """Any value as HTML text: control characters replaced, ``& < > " '`` escaped."""
    return html.escape(printable(value), quote=True)


def cut(text: object, limit: int = TEXT_CHARS) -> str:
    """``text`` on one line, cut to ``limit`` characters with an ellipsis."""
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def fmt_ns(ns: float | None, signed: bool = False) -> str:
    """A duration in ns as ``812 ns`` / ``4.20 µs`` / ``1.53 ms`` / ``2.100 s`` (``-``: none);
    with ``signed`` a sign first (``±`` for zero)."""
    if ns is None or not signed:
        return units.fmt_ns(ns)
    return ("+" if ns > 0 else "-" if ns < 0 else "±") + units.fmt_ns(abs(ns))


def fmt_pct(ratio: float | None, signed: bool = False) -> str:
    """A ratio as a percentage with one decimal (``+`` first when ``signed``)."""
    if ratio is None or not signed:
        return units.fmt_pct(ratio)
    return f"{100 * ratio:+.1f}%"


def cell(value: object) -> str:
    """A table cell's content: :class:`Raw` as is, None as ``-``, anything else escaped."""
    return value if isinstance(value, Raw) else "-" if value is None else esc(value)


def table(headers: Sequence[str], rows: Sequence[Sequence[object]], right: str = "") -> Raw:
    """A table (no header row when every heading is empty); ``right`` holds ``r`` at the
    positions of right-aligned (numeric) columns."""

    def tag(kind: str, i: int, value: object) -> str:
        text = cell(value)
        align = ' class="r"' if i < len(right) and right[i] == "r" else ""
        align = ' class="w"' if not align and len(text) > WIDE else align
        return f"<{kind}{align}>{text}</{kind}>"

    head = "".join(tag("th", i, h) for i, h in enumerate(headers))
    thead = f"<thead><tr>{head}</tr></thead>" if any(headers) else ""
    body = "".join(
        "<tr>" + "".join(tag("td", i, v) for i, v in enumerate(row)) + "</tr>" for row in rows
    )
    return Raw(f"<table>{thead}<tbody>{body}</tbody></table>")


def badge(status: object) -> Raw:
    """A status as a coloured label (red: worse, amber: noise or warning, green: better)."""
    kind = STATUS_CLASS.get(str(status), "")
    return Raw(f'<span class="tk-badge tk-{kind or "plain"}">{esc(status)}</span>')


def note(text: object) -> Raw:
    """A highlighted one-line warning."""
    return Raw(f'<div class="tk-note">{esc(text)}</div>')


def section(title: str, *parts: str) -> Raw:
    """A titled block of already-built HTML parts."""
    return Raw(f"<h4>{esc(title)}</h4>" + "".join(parts))


def page(title: object, *parts: str) -> str:
    """A whole repr: the style, a title and the parts inside one :data:`WRAP` ``<div>``."""
    return f'<div class="{WRAP}">{STYLE}<h3>{esc(title)}</h3>{"".join(parts)}</div>'


def legend(series: Sequence[str], colors: dict[str, str]) -> Raw:
    """Colour keys for the series of a chart."""
    keys = "".join(
        f'<span class="tk-key" style="background:{colors.get(s, "#c7c7c7")}"></span>{esc(s)}'
        for s in series
    )
    return Raw(f'<div class="tk-muted">{keys}</div>')


def bar_chart(
    stacks: dict[str, Sequence[float]],
    tooltips: Sequence[str],
    marks: Sequence[float] | None = None,
    height: int = 160,
    width: int = 720,
) -> Raw:
    """An inline SVG of stacked bars, one per tooltip: ``stacks`` maps a series (its colour
    from :data:`COLORS`) to its value per bar; ``marks`` draws a tick per bar (e.g. the step's
    wall time). Each bar is a ``<g class="tk-bar">`` whose ``<title>`` is its tooltip."""
    n = len(tooltips)
    if not n:
        return Raw('<p class="tk-muted">No steps to draw.</p>')
    totals = [sum(float(v[i] or 0) for v in stacks.values()) for i in range(n)]
    top = max([*totals, *(float(m or 0) for m in marks or [])]) or 1.0
    step_w, pad = width / n, 14  # the scale's label sits above the bars
    bar_w, plot_h = max(step_w * 0.8, 0.5), height - pad
    parts = []
    for i, tip in enumerate(tooltips):
        x, y, rects = i * step_w, float(height), []
        for series, values in stacks.items():
            h = float(values[i] or 0) / top * plot_h
            if h > 0:
                y -= h
                color = COLORS.get(series, "#c7c7c7")
                rects.append(
                    f'<rect x="{x:.1f}" y="{y:.1f}" width="{bar_w:.1f}" height="{h:.1f}"'
                    f' fill="{color}"/>'
                )
        if marks is not None and marks[i]:
            my = height - float(marks[i]) / top * plot_h
            rects.append(
                f'<line x1="{x - 1:.1f}" x2="{x + bar_w + 1:.1f}" y1="{my:.1f}" y2="{my:.1f}"'
                ' stroke="#1d2330" stroke-width="2"/>'
            )
        parts.append(f'<g class="tk-bar"><title>{esc(tip)}</title>{"".join(rects)}</g>')
    scale = f'<text x="2" y="10" font-size="10" fill="#5b6474">max {esc(fmt_ns(top))}</text>'
    return Raw(
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}"'
        f' viewBox="0 0 {width} {height}" role="img">{"".join(parts)}{scale}</svg>'
    )


def per_step(step_metrics: pl.DataFrame, max_bars: int = MAX_BARS) -> pl.DataFrame:
    """One row per bar: the step's wall time (its slowest rank and device) and its kernel time
    per category (mean over ranks and devices); past ``max_bars`` steps, consecutive steps
    are binned (``first``..``last``, ``steps`` in the bin; values are means over the bin)."""
    cats = [f"cat_{c}_ns" for c in CATEGORIES if f"cat_{c}_ns" in step_metrics.columns]
    steps = (
        step_metrics.group_by("step")
        .agg(pl.col("dur").max(), pl.col("idle_ns").max(), *(pl.col(c).mean() for c in cats))
        .sort("step")
    )
    size = max(1, -(-steps.height // max_bars))  # ceil: steps per bar
    return (
        steps.with_row_index("i")
        .group_by((pl.col("i") // size).alias("bar"))
        .agg(
            first=pl.col("step").min(),
            last=pl.col("step").max(),
            steps=pl.len(),
            dur=pl.col("dur").mean(),
            idle_ns=pl.col("idle_ns").mean(),
            **{c: pl.col(c).mean() for c in cats},
        )
        .sort("bar")
    )


def step_chart(step_metrics: pl.DataFrame) -> Raw:
    """The step chart: per step (or bin of steps) a bar stacked by category with its wall
    time as a tick, a legend and a caption."""
    bars = per_step(step_metrics)
    cats = [c for c in CATEGORIES if f"cat_{c}_ns" in bars.columns and bars[f"cat_{c}_ns"].sum()]
    tips = []
    for row in bars.iter_rows(named=True):
        where = (
            f"step {row['first']}"
            if row["steps"] == 1
            else f"steps {row['first']}–{row['last']} ({row['steps']} steps, means)"
        )
        parts = [f"{c} {fmt_ns(row[f'cat_{c}_ns'])}" for c in cats if row[f"cat_{c}_ns"]]
        tips.append(
            f"{where}: wall {fmt_ns(row['dur'])}, idle {fmt_ns(row['idle_ns'])}; "
            + ", ".join(parts)
        )
    stacks = {c: bars[f"cat_{c}_ns"].to_list() for c in cats}
    n_steps = int(bars["steps"].sum()) if bars.height else 0
    binned = (
        f", {bars.height} bars of up to {bars['steps'].max()} steps"
        if n_steps > bars.height
        else ""
    )
    caption = (
        f"{n_steps} steps{binned}: kernel time per category (streams that overlap add up); the"
        " dark tick is the step's wall time. Hover a bar for its numbers."
    )
    chart = bar_chart(stacks, tips, bars["dur"].to_list() if bars.height else None)
    return Raw(chart + legend(cats, COLORS) + f'<div class="tk-muted">{esc(caption)}</div>')


def summary_frame(step_metrics: pl.DataFrame) -> pl.DataFrame:
    """Per phase: steps, median / p90 step time (:func:`phase_summary`), tokens, ns per token,
    and the busy and idle shares of the phase's step time (summed over ranks and devices)."""
    phases = pl.DataFrame(
        phase_summary(step_metrics),
        schema={
            "phase": pl.String, "steps": pl.Int64, "median_ns": pl.Float64, "p90_ns": pl.Float64,
            "tokens": pl.Int64, "ns_per_token": pl.Float64,
        },
    )  # fmt: skip
    shares = (
        step_metrics.group_by(phase=pl.col("phase").fill_null("unknown"))
        .agg(busy=pl.col("busy_ns").sum(), idle=pl.col("idle_ns").sum(), dur=pl.col("dur").sum())
        .select(
            "phase",
            busy_share=pl.col("busy") / pl.col("dur"),
            idle_share=pl.col("idle") / pl.col("dur"),
        )
    )
    return phases.join(shares, on="phase", how="left", maintain_order="left")


def _producer(meta: dict[str, Any]) -> str:
    producer = meta.get("producer")
    if isinstance(producer, dict):
        return " ".join(str(producer[k]) for k in ("name", "version") if producer.get(k))
    return "" if producer is None else str(producer)


def _summary_rows(analysis: Any) -> list[tuple[str, object]]:
    """The summary table's rows: what the trace is, how its steps were found, their time."""
    meta = analysis.timeline.meta
    devices = [d for d in meta.get("devices") or [] if isinstance(d, dict)]
    names = sorted({str(d.get("name")) for d in devices if d.get("name")})
    fmt = " · ".join(p for p in (str(meta.get("format") or "?"), _producer(meta)) if p)
    steps = analysis.steps
    rows: list[tuple[str, object]] = [
        ("trace", meta.get("source") or "trace"),
        ("format", fmt),
        ("devices", f"{len(devices)}: {', '.join(names)}" if names else len(devices) or "-"),
        ("workload", f"{analysis.workload.kind}; a step is {analysis.workload.unit}"),
        ("steps", f"{len(steps)} found by {steps.method} (confidence {steps.confidence})"),
        ("how found", steps.detail),
    ]
    for p in summary_frame(analysis.step_metrics).iter_rows(named=True):
        rows += [
            (
                f"{p['phase']} steps",
                f"{p['steps']}: median {fmt_ns(p['median_ns'])}, p90 {fmt_ns(p['p90_ns'])}"
                + (f", {fmt_ns(p['ns_per_token'])} per token" if p["ns_per_token"] else ""),
            ),
            (
                f"{p['phase']} busy / idle",
                f"{fmt_pct(p['busy_share'])} / {fmt_pct(p['idle_share'])}",
            ),
        ]
    return rows


def analysis_html(analysis: Any) -> str:
    """An :class:`tracekit.analysis.Analysis` as notebook HTML: warnings first, the summary
    table, the checks (status and one line each), the top findings by impact (title,
    severity, impact, advice) and the step chart; a few tens of kB whatever the step count."""
    warnings = [w for w in (analysis.capture_note, analysis.low_confidence) if w]
    warnings += list(analysis.steps.warnings)
    summary = table(["", ""], _summary_rows(analysis))
    checks = table(
        ["status", "check", "detail"],
        [(badge(c.status), c.name, cut(c.detail)) for c in analysis.checks],
    )
    findings = analysis.findings
    top = table(
        ["#", "severity", "finding and advice", "impact", "share"],
        [
            (
                i,
                badge(f.severity),
                Raw(
                    f"{esc(cut(f.title))}"
                    + (
                        f'<br><span class="tk-muted">{esc(cut(f.advice))}</span>'
                        if f.advice
                        else ""
                    )
                ),
                fmt_ns(f.impact_ns),
                fmt_pct(f.impact_share),
            )
            for i, f in enumerate(findings[:TOP_FINDINGS], 1)
        ],
        right="r  rr",
    )
    more = len(findings) - TOP_FINDINGS
    tail = f'<p class="tk-muted">{more} more in analysis.findings</p>' if more > 0 else ""
    return page(
        f"tracekit: {analysis.timeline.meta.get('source') or 'trace'}",
        *(note(w) for w in warnings),
        summary,
        section("Checks", checks if analysis.checks else "<p>No checks ran.</p>"),
        section("Top findings by impact", top + tail if findings else "<p>No findings.</p>"),
        section("Steps", step_chart(analysis.step_metrics)),
    )
