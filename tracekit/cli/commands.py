"""The commands that read one trace (or the bundled demo): info, summary, report, analyze,
check, rules, convert, demo, formats."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console, Group
from rich.text import Text

from tracekit import memory
from tracekit.cli.common import (
    DeviceOpt,
    FormatOpt,
    JsonOpt,
    MarkerOpt,
    OptionOpt,
    OutputOpt,
    PatternsOpt,
    RulesOpt,
    TraceArg,
    analysis_of,
    emit,
    escape,
    name_width,
    one_line_errors,
    print_json,
    read_trace,
    stderr,
)
from tracekit.errors import TraceError
from tracekit.names import printable
from tracekit.progress import Spinner


@one_line_errors
def info(trace: TraceArg, json: JsonOpt = False, format: FormatOpt = None) -> None:
    """Format, producer, devices, event counts per kind, streams, span and parser warnings;
    first, whether the capture looks incomplete."""
    from tracekit import stats
    from tracekit.checks.capture import capture_check, capture_note
    from tracekit.reports import terminal

    timeline = read_trace(trace, format)
    data = stats.info(timeline)
    data["capture_note"] = capture_note(capture_check(timeline.df, timeline.meta))
    if json:
        print_json(data)
    else:
        terminal.print_renderable(terminal.render_info(data))


@one_line_errors
def summary(
    trace: TraceArg,
    json: JsonOpt = False,
    top: Annotated[int, typer.Option(min=1, help="How many kernels to list.")] = 15,
    output: OutputOpt = "term",
    format: FormatOpt = None,
    rules: RulesOpt = None,
    step_marker: MarkerOpt = None,
    patterns: PatternsOpt = None,
    option: OptionOpt = None,
    device: DeviceOpt = None,
) -> None:
    """Device busy time per kind and stream, the top kernels, per-step metrics and findings."""
    from tracekit import stats
    from tracekit.reports import steps_terminal, terminal

    timeline = read_trace(trace, format)
    data = stats.summary(timeline, top=top)
    analysis = analysis_of(timeline, rules, step_marker, patterns, option, device).to_dict()
    if json or output == "json":
        keys = ("workload", "stack", "steps", "phases", "checks", "step_metrics", "findings")
        print_json(
            {
                "capture_note": analysis["capture_note"],
                "low_confidence": analysis["low_confidence"],
                **data,
                **{k: analysis[k] for k in keys},
            }
        )
        return
    header = steps_terminal.header_lines(analysis)
    emit(
        analysis,
        output,
        lambda: Group(
            *header,
            terminal.render_summary(data, name_width()),
            Text(),
            steps_terminal.render_analysis(analysis, Console().width, confidence=False),
        ),
    )


@one_line_errors
def report(
    traces: Annotated[
        list[Path], typer.Argument(help="One or more traces (ranks, runs), shown side by side.")
    ],
    out: Annotated[
        Path | None,
        typer.Option("-o", "--output", help="Output file (default: report.html; md/json: stdout)."),
    ] = None,
    output: Annotated[
        str, typer.Option("--format", "-f", help="html (default), md (PR comment) or json.")
    ] = "html",
    format: FormatOpt = None,
    rules: RulesOpt = None,
    step_marker: MarkerOpt = None,
    patterns: PatternsOpt = None,
    option: OptionOpt = None,
    device: DeviceOpt = None,
    steps: Annotated[
        str | None,
        typer.Option(
            "--steps",
            help="Steps to embed for the drill-down besides the defaults, e.g. 3,17,40-42.",
        ),
    ] = None,
    max_events: Annotated[
        int, typer.Option(min=1, help="Raw events kept per drilled-down step (longest first).")
    ] = 5000,
) -> None:
    """Write a self-contained HTML report (per-step breakdown, step drill-down, overlap,
    findings, kernels); several traces are compared side by side."""
    from tracekit.reports.html_steps import parse_steps
    from tracekit.reports.report import output_path, render

    target, extra = output_path(out, output, traces), parse_steps(steps)
    analyses = []
    for trace in traces:
        timeline = read_trace(trace, format)
        analyses.append(analysis_of(timeline, rules, step_marker, patterns, option, device))
    memory.state.update(doing="writing the report")
    with Spinner(stderr, "writing the report"):
        text = render(analyses, output, extra, max_events)
    if target is None:
        sys.stdout.write(text)
        return
    target.write_text(text, encoding="utf-8")
    size = len(text.encode()) / 1e6
    stderr.print(f"wrote {escape(str(target))} ({size:.1f} MB)", highlight=False)


@one_line_errors
def analyze(
    trace: TraceArg,
    json: JsonOpt = False,
    output: OutputOpt = "term",
    format: FormatOpt = None,
    rules: RulesOpt = None,
    step_marker: MarkerOpt = None,
    patterns: PatternsOpt = None,
    option: OptionOpt = None,
    device: DeviceOpt = None,
) -> None:
    """Find decode steps, measure each step and run the rules; print metrics and findings."""
    from tracekit.reports import steps_terminal

    timeline = read_trace(trace, format)
    data = analysis_of(timeline, rules, step_marker, patterns, option, device).to_dict()
    emit(
        data,
        "json" if json else output,
        lambda: steps_terminal.render_analysis(data, Console().width),
    )


@one_line_errors
def check(
    trace: TraceArg,
    json: JsonOpt = False,
    format: FormatOpt = None,
    step_marker: MarkerOpt = None,
    patterns: PatternsOpt = None,
    device: DeviceOpt = None,
) -> None:
    """tracekit checks its own numbers: accounting identities and the vendor's summaries.
    One line per check, failing first; exit 1 when one fails, 2 on bad input."""
    from tracekit.reports import terminal
    from tracekit.reports.checks_text import capture_line, render_checks, tally

    analysis = analysis_of(read_trace(trace, format), "", step_marker, patterns, None, device)
    checks = [c.to_dict() for c in analysis.checks]
    note = {"capture_note": analysis.capture_note, "low_confidence": analysis.low_confidence}
    if json:
        print_json({"source": analysis.timeline.meta.get("source"), **note, "checks": checks})
    else:
        first = [line for line in (capture_line(note),) if line is not None]  # said first
        terminal.print_renderable(
            Group(*first, render_checks(checks), Text(tally(checks), style="dim"))
        )
    # a skipped check (nothing to verify) exits 0 like a pass; only a failure exits 1
    raise typer.Exit(1 if any(c["status"] == "fail" for c in checks) else 0)


@one_line_errors
def list_rules(json: JsonOpt = False) -> None:
    """The rules tracekit runs (built-in and plugins): what they detect, options, examples."""
    from tracekit.rules.registry import available, describe

    docs = [describe(rule) for rule in available().values()]
    if json:
        print_json(docs)
        return
    for doc in docs:
        typer.echo(f"{doc['id']} - {doc['name']}")
        for line in doc["doc"].splitlines():
            typer.echo(f"    {line}".rstrip())
        for key, opt in doc["options"].items():
            typer.echo(f"    option {doc['id']}.{key} = {opt['default']!r}: {opt['help']}")
        typer.echo("")


@one_line_errors
def convert(
    trace: TraceArg,
    output: Annotated[
        Path, typer.Option("-o", "--output", help="out.parquet, out.arrow or out.pftrace")
    ],
    format: FormatOpt = None,
) -> None:
    """Save the normalized timeline as Parquet, Arrow IPC (metadata preserved) or a Perfetto
    trace (.pftrace, opens in ui.perfetto.dev)."""
    from tracekit.export import check_output, save

    if output.resolve() == trace.resolve():
        raise TraceError(f"{output}: refusing to overwrite the input trace; choose another name")
    check_output(output)  # before reading a large trace
    timeline = read_trace(trace, format)
    save(timeline, output)
    message = f"wrote {printable(output)} ({len(timeline):,} events)"
    stderr.print(message, highlight=False, markup=False)


@one_line_errors
def demo(
    json: JsonOpt = False,
    out: Annotated[
        Path, typer.Option("-o", "--output", help="Where to write the HTML report.")
    ] = Path("tracekit-demo.html"),
    html: Annotated[bool, typer.Option(help="Write the HTML report.")] = True,
) -> None:
    """Analyse the bundled DeepSeek-V4-like decode traces (Nsight Systems on an H200, torch_npu
    on an Ascend 910B), print their summary and write their HTML report side by side."""
    from tracekit.demo import demo_paths, render_demo
    from tracekit.load import load
    from tracekit.reports import terminal
    from tracekit.reports.report import render

    analyses = [analysis_of(load(path), None, None, None, None) for path in demo_paths()]
    if json:
        sys.stdout.write(render(analyses, "json"))
    else:
        terminal.print_renderable(render_demo(analyses, Console().width))
    if html:
        with Spinner(stderr, "writing the report"):
            page = render(analyses, "html").encode()
            out.write_bytes(page)
        message = f"wrote {escape(str(out))} ({len(page) / 1e6:.1f} MB): open it in a browser"
        stderr.print(message, highlight=False)


def formats() -> None:
    """List the trace formats tracekit reads."""
    from tracekit.parsers import registry

    for parser in registry():
        typer.echo(f"{parser.name:18} {parser.description}")
