"""`tracekit cluster`: many ranks analysed in parallel (local processes or a dask scheduler)
and shown as one cluster: per-rank step times, waits at collectives, stragglers."""

from __future__ import annotations

import io
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import msgspec
import typer
from rich.console import Console

from tracekit.cli.common import (
    DeviceOpt,
    MarkerOpt,
    OptionOpt,
    PatternsOpt,
    RulesOpt,
    escape,
    one_line_errors,
    rule_ids,
    rule_options,
    stderr,
)
from tracekit.errors import TraceError
from tracekit.progress import Spinner

if TYPE_CHECKING:  # the cluster code (polars, the readers) is imported when the command runs
    from tracekit.cluster import ClusterAnalysis

FORMS = ("term", "md", "json", "html")


@one_line_errors
def cluster_command(
    trace: Annotated[
        Path,
        typer.Argument(
            help="A folder of per-rank traces (rank*_ascend_pt folders, per-rank Kineto"
            " files) or one file that merges several ranks."
        ),
    ],
    output: Annotated[
        str, typer.Option("--format", "-f", help="term (default), md, json or html.")
    ] = "term",
    out: Annotated[
        Path | None, typer.Option("-o", "--output", help="Write to this file (html: required).")
    ] = None,
    workers: Annotated[
        int | None,
        typer.Option("--workers", "-w", min=1, help="Local worker processes (default: all CPUs)."),
    ] = None,
    scheduler: Annotated[
        str | None,
        typer.Option(
            "--scheduler",
            envvar="TRACEKIT_SCHEDULER",
            help="Address of a dask.distributed scheduler (tcp://host:8786) to run the ranks on.",
        ),
    ] = None,
    rules: RulesOpt = None,
    step_marker: MarkerOpt = None,
    patterns: PatternsOpt = None,
    option: OptionOpt = None,
    device: DeviceOpt = None,
) -> None:
    """Analyse every rank of a run in parallel: per-rank step times, time each rank waited
    for the others at collectives (clocks aligned from the collectives), and the stragglers
    that made them wait."""
    from tracekit.cluster import Settings, analyze_cluster
    from tracekit.reports import terminal
    from tracekit.reports.cluster_text import cluster_terminal

    if output not in FORMS:
        raise TraceError(f"--format {output!r}: choose term, md, json or html")
    if output == "html" and out is None:
        out = Path("cluster.html")
    if out is not None and (out.is_dir() or not out.parent.is_dir()):
        raise TraceError(f"{out}: not a file in an existing folder; choose another name")
    settings = Settings(
        tuple(rule_ids(rules)) if rules else None,
        rule_options(option),
        step_marker,
        str(patterns) if patterns else None,
        device,
    )
    with Spinner(stderr, "analysing the ranks"):
        result = analyze_cluster(trace, settings, workers=workers, scheduler=scheduler)
    if out is None and output == "term":
        terminal.print_renderable(cluster_terminal(result))
        return
    text = _render(result, output)
    if out is None:
        sys.stdout.write(text)
        return
    out.write_text(text)
    stderr.print(f"wrote {escape(str(out))} ({len(text.encode()) / 1e6:.1f} MB)", highlight=False)


def _render(result: ClusterAnalysis, output: str) -> str:
    """The cluster as text in ``output`` form (``term``: plain text of the terminal view)."""
    from tracekit.reports.cluster_text import cluster_markdown, cluster_terminal

    if output == "json":
        data = result.to_dict()
        return msgspec.json.format(msgspec.json.encode(data), indent=2).decode() + "\n"
    if output == "md":
        return cluster_markdown(result)
    if output == "html":
        from tracekit.reports.cluster_html import render_cluster_html

        return render_cluster_html(result)
    console = Console(record=True, width=120, file=io.StringIO())
    console.print(cluster_terminal(result))
    return console.export_text()
