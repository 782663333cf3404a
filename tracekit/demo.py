"""`tracekit demo`: the bundled traces (``fixtures/make_demo.py`` writes them) and their
compact terminal view: one block per trace with its steps and its top findings by impact."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Group
from rich.text import Text

import tracekit.data
from tracekit.names import printable
from tracekit.reports.format import analysis_steps
from tracekit.reports.html_trace import producer_text
from tracekit.reports.roofline_text import render_roofline
from tracekit.reports.steps_terminal import render_findings, render_steps

DEMO_TRACES = ("demo.sqlite", "demo_ascend_pt")


def demo_paths() -> list[Path]:
    """The bundled demo traces: an Nsight Systems export and a torch_npu (msprof) folder."""
    root = Path(tracekit.data.__file__).parent
    return [root / name for name in DEMO_TRACES]


DEMO_MORE = "tracekit demo --json, or the page it writes, lists every one"


def render_demo(analyses: list[Any], width: int) -> Group:
    """Per trace: what it is, its per-step table, its roofline where the trace records
    operator shapes, and its top findings by impact."""
    parts: list[Any] = []
    for analysis in analyses:
        meta = analysis.timeline.meta
        names = [d.get("name") for d in meta.get("devices") or [] if isinstance(d, dict)]
        about = [meta.get("format"), producer_text(meta.get("producer")), *names]
        head = f"{meta.get('source')}: {', '.join(str(a) for a in about if a)}"
        parts += [Text(printable(head), style="bold reverse"), Text()]
        data = analysis.to_dict()
        findings = render_findings(
            data["findings"], analysis_steps(data), more=DEMO_MORE, width=width
        )
        parts += [render_steps(data, width), Text()]
        roofline = render_roofline(data.get("roofline"), width)
        if roofline is not None:
            parts += [roofline, Text()]
        parts += [findings, Text()]
    return Group(*parts)
