"""The HTML report: one self-contained page per set of traces.

:func:`payload` prepares one JSON document (per trace: overview, the ``step_metrics`` table
or, past ``html_bins.MAX_STEP_ROWS`` rows, its bins and extreme steps as ``step_bins``,
the drill-down events of a few steps, stream overlap, findings, kernels, and the roofline
chart's operators and roofs where the trace has shapes); :func:`render_html`
embeds it, plotly.js (from the installed ``plotly`` package, gzipped and packed by
:mod:`tracekit.reports.html_pack`) and the page script (``templates/report.js``) into
``templates/report.html``. The page draws every figure in the
browser from the payload and needs no network.

Safety: the payload sits in a ``<script type="application/json">`` with ``<``, ``>``, ``&``
and U+2028/9 written as JSON escapes, so no trace name can close the element; the page
inserts names only as text (``textContent``) or entity-escaped plotly labels; a
Content-Security-Policy allows only the page's own scripts by hash (the loader, the page
script, and plotly.js which the loader unpacks and inserts) and no network.
"""

from __future__ import annotations

import base64
import hashlib
import html
import re
from collections import Counter
from collections.abc import Sequence
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import msgspec

from tracekit import __version__
from tracekit.analysis import Analysis
from tracekit.metrics.columns import LABELS
from tracekit.model import ordered
from tracekit.reports.format import ROOFLINE_TABLE
from tracekit.reports.html_bins import aggregate, aggregated
from tracekit.reports.html_findings import SHOWN, page_findings
from tracekit.reports.html_gantt import CLASSES, Strings, gantt
from tracekit.reports.html_pack import packed_plotly, plotly_js
from tracekit.reports.html_roofline import roofline_payload
from tracekit.reports.html_steps import default_steps, embedded_steps, step_table, step_times
from tracekit.reports.html_trace import (
    fallbacks,
    kernels,
    overlap_matrices,
    overview,
)
from tracekit.taxonomy import CATEGORIES
from tracekit.timeline import KINDS

MAX_EVENTS = 5_000  # raw events per drilled-down step
MAX_STEPS = 12  # drilled-down steps per trace (besides those asked for with --steps)
_JSON_ESCAPES = {
    "<": "\\u003c",
    ">": "\\u003e",
    "&": "\\u0026",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}
_JSON_UNSAFE = re.compile("[<>&\u2028\u2029]")


def labels(analyses: Sequence[Analysis]) -> list[str]:
    """A distinct label per trace: its source name, numbered where names repeat."""
    names = [str(a.timeline.meta.get("source") or "trace") for a in analyses]
    seen: Counter[str] = Counter()
    out = []
    for name in names:
        seen[name] += 1
        out.append(name if names.count(name) == 1 else f"{name} #{seen[name]}")
    return out


def trace_payload(
    analysis: Analysis, label: str, extra_steps: Sequence[int], max_events: int, max_steps: int
) -> dict[str, Any]:
    """Everything the page shows about one analysed trace."""
    metrics = analysis.step_metrics
    strings = Strings()
    chosen = embedded_steps(metrics, analysis.findings, list(extra_steps), max_steps, SHOWN)
    all_steps = step_times(metrics)["step"].to_list()
    roofline = roofline_payload(analysis)
    # past MAX_STEP_ROWS rows: bins and the extreme and drilled-down steps (html_bins)
    steps, bins = aggregate(metrics, step_table, chosen) if aggregated(metrics) else (None, None)
    return {
        "overview": overview(analysis, label),
        "steps": step_table(metrics) if steps is None else steps,
        **({"step_bins": bins} if bins is not None else {}),
        "defaults": default_steps(metrics),
        "gantt": gantt(analysis, chosen, max_events, strings),
        "max_events": max_events,
        "overlap": overlap_matrices(analysis),
        "checks": [c.to_dict() for c in ordered(analysis.checks)],
        "findings": page_findings(analysis.findings, analysis.work, all_steps),
        "findings_total": len(analysis.findings),
        "findings_shown": SHOWN,
        "kernels": kernels(analysis),
        "fallbacks": fallbacks(analysis),
        "strings": strings.values,
        **({"roofline": roofline} if roofline is not None else {}),
    }


def payload(
    analyses: Sequence[Analysis],
    *,
    extra_steps: Sequence[int] = (),
    max_events: int = MAX_EVENTS,
    max_steps: int = MAX_STEPS,
) -> dict[str, Any]:
    """The report's JSON document for one or more analysed traces (shown side by side)."""
    traces = [
        trace_payload(a, label, extra_steps, max_events, max_steps)
        for a, label in zip(analyses, labels(analyses))
    ]
    shaped = any("roofline_ns" in t["steps"] for t in traces)  # the roofline's step columns
    return {
        "tracekit": __version__,
        "classes": list(CLASSES),
        "categories": list(CATEGORIES),
        "kinds": list(KINDS),
        "labels": {
            column: label.heading
            for column, label in LABELS.items()
            if shaped or column not in ROOFLINE_TABLE
        },
        "traces": traces,
    }


def embed_json(data: Any) -> str:
    """JSON that is safe as the content of a ``<script type="application/json">`` element."""
    text = msgspec.json.encode(data).decode()
    return _JSON_UNSAFE.sub(lambda m: _JSON_ESCAPES[m.group()], text)


@cache
def _asset(name: str) -> str:
    return (resources.files("tracekit.reports") / "templates" / name).read_text("utf-8")


@cache
def _sha256(script: str) -> str:
    digest = hashlib.sha256(script.encode("utf-8")).digest()
    return f"'sha256-{base64.b64encode(digest).decode()}'"


def page(template: str, script: str, title: str, data: dict[str, Any]) -> str:
    """A self-contained page: ``template`` filled with the ``title``, the stylesheet,
    plotly.js (packed; ``templates/loader.js`` unpacks and runs it), the payload ``data`` and
    the page ``script`` (after the shared helpers of ``common.js``, started by the loader once
    plotly.js has run), under a Content-Security-Policy that allows exactly those three
    scripts."""
    loader_js = _asset("loader.js")
    app_js = "tracekitStart(function () {\n" + _asset("common.js") + _asset(script) + "});\n"
    parts = {
        "title": html.escape(title),
        "csp": " ".join(map(_sha256, (loader_js, app_js, plotly_js()))),
        "style": _asset("report.css"),
        "plotly": packed_plotly(),
        "loader": loader_js,
        "payload": embed_json(data),
        "script": app_js,
        "version": html.escape(__version__),
    }
    return re.sub(r"\{\{(\w+)\}\}", lambda m: parts[m.group(1)], _asset(template))


def render_html(data: dict[str, Any]) -> str:
    """The page for a :func:`payload`."""
    title = " · ".join(t["overview"]["label"] for t in data["traces"]) or "no trace"
    return page("report.html", "report.js", f"tracekit report: {title}", data)


def write_report(analyses: Sequence[Analysis], out: str | Path, **options: Any) -> int:
    """Write the HTML report of ``analyses`` to ``out``; return its size in bytes."""
    page = render_html(payload(analyses, **options)).encode("utf-8")
    Path(out).write_bytes(page)
    return len(page)
