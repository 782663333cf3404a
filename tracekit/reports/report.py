"""`tracekit report` in its three forms: the HTML page, Markdown, or JSON."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import msgspec

from tracekit.analysis import Analysis
from tracekit.cluster.result import from_analysis
from tracekit.errors import TraceError
from tracekit.reports.cluster_text import cluster_markdown
from tracekit.reports.html import labels, payload, render_html
from tracekit.reports.markdown import render_markdown

FORMS = ("html", "md", "json")
DEFAULT_HTML = Path("report.html")


def output_path(out: Path | None, form: str, traces: Sequence[Path]) -> Path | None:
    """Where the report goes (None: stdout), refused (TraceError) before any trace is read
    when the form is unknown, the path is an input trace or not a file in a folder."""
    if form not in FORMS:
        raise TraceError(f"--format {form!r}: choose html, md or json")
    target = out if out is not None or form != "html" else DEFAULT_HTML
    if target is None:
        return None
    if any(target.resolve() == t.resolve() for t in traces):
        raise TraceError(f"{target}: refusing to overwrite an input trace; choose another name")
    if target.is_dir() or not target.parent.is_dir():
        raise TraceError(f"{target}: not a file in an existing folder; choose another name")
    return target


def render(
    analyses: Sequence[Analysis],
    form: str = "html",
    steps: Sequence[int] = (),
    max_events: int = 5_000,
) -> str:
    """The report of ``analyses`` as ``html``, ``md`` (one section per trace) or ``json``
    (``{"traces": [Analysis.to_dict() + "label"]}``); ``steps`` adds drill-down steps."""
    if form == "html":
        return render_html(payload(analyses, extra_steps=steps, max_events=max_events))
    if form == "md":
        return "\n".join(_markdown(a) for a in analyses)
    if form == "json":
        traces = [{"label": label, **a.to_dict()} for a, label in zip(analyses, labels(analyses))]
        text = msgspec.json.format(msgspec.json.encode({"traces": traces}), indent=2)
        return text.decode() + "\n"
    raise ValueError(f"unknown report form {form!r}")


def _markdown(analysis: Analysis) -> str:
    """One trace's Markdown; a trace of several ranks adds the cluster view."""
    text = render_markdown(analysis.to_dict())
    if analysis.step_metrics["rank"].n_unique() > 1:
        text += "\n" + cluster_markdown(from_analysis(analysis))
    return text
