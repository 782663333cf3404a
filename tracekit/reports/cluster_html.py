"""The cluster view as one self-contained HTML page.

:func:`~tracekit.reports.cluster_payload.cluster_payload` prepares the JSON document (the
inputs and the checks that say when waits may be wrong, the straggler findings, per rank
and step the step time and waits at collectives, the collective groups and instances, a
few steps' device rows per rank); :func:`render_cluster_html` embeds it, plotly.js (from
the installed ``plotly`` package), the report's stylesheet and the page script
(``templates/cluster.js``) into ``templates/cluster.html``. The page draws every figure in
the browser and needs no network.

Safety is the report's (:mod:`tracekit.reports.html`): the payload sits in a
``<script type="application/json">`` with ``<``, ``>``, ``&`` and U+2028/9 written as JSON
escapes; the page inserts trace names only as text or entity-escaped plotly labels; a
Content-Security-Policy allows only the page's own three scripts, by hash, and no network.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tracekit.cluster.result import ClusterAnalysis
from tracekit.reports.cluster_payload import MAX_DRILL_ROWS, cluster_payload
from tracekit.reports.html import page

TEMPLATE = "cluster.html"
SCRIPT = "cluster.js"
TITLE_SOURCES = 3  # inputs named in the page title; more are counted


def page_title(data: dict[str, Any]) -> str:
    """``tracekit cluster: a.json, b.json (+3 more)`` (not escaped)."""
    sources = [p["source"] for p in data["header"]["parts"]]
    text = ", ".join(sources[:TITLE_SOURCES]) or "no input"
    if len(sources) > TITLE_SOURCES:
        text += f" (+{len(sources) - TITLE_SOURCES} more)"
    return f"tracekit cluster: {text}"


def render_payload(data: dict[str, Any]) -> str:
    """The page for a :func:`~tracekit.reports.cluster_payload.cluster_payload` document."""
    return page(TEMPLATE, SCRIPT, page_title(data), data)


def render_cluster_html(cluster: ClusterAnalysis, *, drill_budget: int = MAX_DRILL_ROWS) -> str:
    """The cluster page of ``cluster``; at most ``drill_budget`` drill-down rows embedded."""
    return render_payload(cluster_payload(cluster, drill_budget=drill_budget))


def write_cluster_html(
    cluster: ClusterAnalysis, path: str | Path, *, drill_budget: int = MAX_DRILL_ROWS
) -> int:
    """Write the cluster page of ``cluster`` to ``path``; return its size in bytes."""
    page = render_cluster_html(cluster, drill_budget=drill_budget).encode("utf-8")
    Path(path).write_bytes(page)
    return len(page)
