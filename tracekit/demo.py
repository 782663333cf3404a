"""`tracekit demo`: the bundled traces (``fixtures/make_demo.py`` writes them) and their
compact terminal view: one block per trace with its steps and its findings grouped by rule."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Group
from rich.text import Text

import tracekit.data
from tracekit.model import severity_rank
from tracekit.names import printable
from tracekit.reports.html_trace import producer_text
from tracekit.reports.steps_terminal import SEVERITY_STYLE, render_steps

DEMO_TRACES = ("demo.sqlite", "demo_ascend_pt")


def demo_paths() -> list[Path]:
    """The bundled demo traces: an Nsight Systems export and a torch_npu (msprof) folder."""
    root = Path(tracekit.data.__file__).parent
    return [root / name for name in DEMO_TRACES]


def step_ranges(steps: list[int]) -> str:
    """``[0, 1, 2, 4]`` -> ``"0-2, 4"``."""
    runs: list[list[int]] = []
    for step in sorted(set(steps)):
        if runs and step == runs[-1][1] + 1:
            runs[-1][1] = step
        else:
            runs.append([step, step])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def grouped_findings(findings: list[dict[str, Any]]) -> Group:
    """One line per (rule, severity): how many findings, in which steps, and the first one."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for f in findings:
        groups.setdefault((f["rule"], f["severity"]), []).append(f)
    if not groups:
        return Group(Text("findings: none", style="green"))
    lines: list[Any] = [Text(f"findings: {len(findings)}", style="bold")]
    ranked = sorted(groups.items(), key=lambda g: (severity_rank(g[0][1]), g[0][0]))
    for (rule, severity), group in ranked:
        steps = [f["step"] for f in group if f["step"] is not None]
        line = Text()
        line.append(f"{severity:>7} ", style=SEVERITY_STYLE.get(severity, ""))
        line.append(f"[{rule}] ", style="bold")
        first = group[0]
        where = "trace" if first["step"] is None else f"step {first['step']}"
        if len(group) > 1:
            within = f" in steps {step_ranges(steps)}" if steps else ""
            line.append(f"{len(group)}×{within}, e.g. ")
        line.append(printable(f"{where}: {first['title']}"))
        line.no_wrap, line.overflow = True, "ellipsis"
        lines.append(line)
    return Group(*lines)


def render_demo(analyses: list[Any], width: int) -> Group:
    """Per trace: what it is, its per-step table and its grouped findings."""
    parts: list[Any] = []
    for analysis in analyses:
        meta = analysis.timeline.meta
        names = [d.get("name") for d in meta.get("devices") or [] if isinstance(d, dict)]
        about = [meta.get("format"), producer_text(meta.get("producer")), *names]
        head = f"{meta.get('source')}: {', '.join(str(a) for a in about if a)}"
        parts += [Text(printable(head), style="bold reverse"), Text()]
        data = analysis.to_dict()
        parts += [render_steps(data, width), Text(), grouped_findings(data["findings"]), Text()]
    return Group(*parts)
