"""`tracekit trend`: one model's performance over a series of runs, each move explained."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import msgspec
import typer
from rich.console import Console

from tracekit.cli.common import (
    DeviceOpt,
    MarkerOpt,
    OptionOpt,
    PatternsOpt,
    RulesOpt,
    one_line_errors,
    print_json,
    rule_ids,
    rule_options,
)
from tracekit.cli.diff_command import share
from tracekit.errors import TraceError

FORMATS = ("term", "md", "json", "html")
DEFAULT_HTML = "tracekit-trend.html"
TracesArg = Annotated[
    list[str],
    typer.Argument(help="Traces of the runs: files, folders of runs, or quoted globs."),
]


@one_line_errors
def trend_command(
    traces: TracesArg,
    label: Annotated[
        str | None,
        typer.Option(
            help="One label per run, comma-separated; when each names part of one run's path,"
            " the runs are ordered by this list."
        ),
    ] = None,
    order: Annotated[
        str, typer.Option(help="name (natural sort, default), date (the traces' own) or given.")
    ] = "name",
    baseline: Annotated[int, typer.Option(help="Index (0-based) of the reference run.")] = 0,
    threshold: Annotated[
        str, typer.Option(help="Smallest step-time move that counts: 5% or 0.05.")
    ] = "5%",
    min_impact: Annotated[
        str, typer.Option(help="A kernel change explains a move from this share of a step.")
    ] = "1%",
    fmt: Annotated[
        str, typer.Option("--format", "-f", help="term (default), md, json or html.")
    ] = "term",
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help=f"Write here (html: default {DEFAULT_HTML})."),
    ] = None,
    top: Annotated[int, typer.Option(min=1, help="Changes listed per move.")] = 5,
    workers: Annotated[
        int | None, typer.Option(help="Local processes analysing runs (default: CPUs; 1: here).")
    ] = None,
    scheduler: Annotated[
        str | None, typer.Option(help="Dask scheduler address to analyse the runs on.")
    ] = None,
    rules: RulesOpt = None,
    step_marker: MarkerOpt = None,
    patterns: PatternsOpt = None,
    option: OptionOpt = None,
    device: DeviceOpt = None,
    allow_low_confidence: Annotated[
        bool, typer.Option(help="Compare runs whose steps were found with low confidence.")
    ] = False,
) -> None:
    """Follow a series of runs (nightlies, releases, platforms): step time per run with its
    interval, and the changes behind every significant move. Exit 0 (not a gate), 2 on an
    error."""
    from tracekit.cluster.part import Settings
    from tracekit.reports import terminal
    from tracekit.trend import trend
    from tracekit.trend.series import parse_labels

    if fmt not in FORMATS:
        raise TraceError(f"--format {fmt!r}: choose {', '.join(FORMATS)}")
    ids = rule_ids(rules)
    settings = Settings(
        tuple(ids) if ids is not None else None,
        rule_options(option),
        step_marker,
        str(patterns) if patterns else None,
        device,
    )
    result = trend(
        traces,
        labels=parse_labels(label),
        order=order,
        baseline=baseline,
        threshold=share(threshold, "--threshold"),
        min_impact=share(min_impact, "--min-impact"),
        allow_low_confidence=allow_low_confidence,
        settings=settings,
        workers=workers,
        scheduler=scheduler,
    )
    data = result.to_dict()
    if fmt == "json" and output is None:
        print_json(data)
    elif fmt == "json":
        _emit(msgspec.json.format(msgspec.json.encode(data), indent=2).decode() + "\n", output)
    elif fmt == "md":
        from tracekit.reports.trend_markdown import render_trend_markdown

        _emit(render_trend_markdown(data, top), output)
    elif fmt == "html":
        from tracekit.reports.trend_html import render_trend_html

        path = output or Path(DEFAULT_HTML)
        _emit(render_trend_html(data), path)
        sys.stderr.write(f"wrote {path}\n")
    else:
        from tracekit.reports.trend_text import render_trend

        terminal.print_renderable(render_trend(data, top, Console().width))


def _emit(text: str, output: Path | None) -> None:
    """``text`` to ``output`` when given, else stdout."""
    if output is None:
        sys.stdout.write(text)
        return
    try:
        output.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise TraceError(f"-o {output}: cannot write it ({exc.strerror or exc})") from None
