"""The `tracekit` command line (typer): info, summary, analyze, check, report, rules, convert,
demo, diff."""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import msgspec
import typer
from rich.console import Console, Group
from rich.text import Text

from tracekit import stats
from tracekit.errors import TraceError
from tracekit.load import load
from tracekit.progress import Spinner
from tracekit.reports import terminal
from tracekit.reports.format import printable
from tracekit.timeline import Timeline, check_output

if TYPE_CHECKING:
    from tracekit.analysis import Analysis

app = typer.Typer(
    name="tracekit",
    help="Make GPU/NPU profiler traces of LLM inference readable.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
stderr = Console(stderr=True)


@app.callback()
def main(
    no_color: Annotated[bool, typer.Option("--no-color", help="Plain text output.")] = False,
) -> None:
    """Make GPU/NPU profiler traces of LLM inference readable."""
    terminal.NO_COLOR = no_color


F = TypeVar("F", bound=Callable[..., Any])
TraceArg = Annotated[Path, typer.Argument(help="Trace file (nsys .sqlite/.nsys-rep, ...).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]
FormatOpt = Annotated[
    str | None,
    typer.Option("--parser", help="Force a parser (see `tracekit formats`) instead of sniffing."),
]
RulesOpt = Annotated[
    str | None, typer.Option("--rules", help="Comma-separated rule ids (default: all).")
]
MarkerOpt = Annotated[
    str | None,
    typer.Option("--step-marker", help="Regex over host range names that marks decode steps."),
]
PatternsOpt = Annotated[
    Path | None, typer.Option("--patterns", help="TOML file of extra taxonomy entries.")
]
OutputOpt = Annotated[
    str, typer.Option("--format", "-f", help="term (default), md (for a PR comment) or json.")
]
OptionOpt = Annotated[
    list[str] | None,
    typer.Option("--option", "-O", help="Rule option RULE.KEY=VALUE (repeatable)."),
]


def _fail(message: str) -> None:
    stderr.print(f"[bold red]error:[/] {message}", highlight=False, markup=True, soft_wrap=True)
    raise typer.Exit(2)


def one_line_errors(func: F) -> F:
    """Turn any failure into one line on stderr and exit code 2 (TRACEKIT_DEBUG shows more)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except typer.Exit:
            raise
        except TraceError as exc:
            _fail(_escape(str(exc)))
        except KeyboardInterrupt:
            _fail("interrupted")
        except Exception as exc:
            if os.environ.get("TRACEKIT_DEBUG"):
                raise
            _fail(
                _escape(
                    f"internal error ({type(exc).__name__}: {exc});"
                    " rerun with TRACEKIT_DEBUG=1 and report it"
                )
            )

    return wrapper  # type: ignore[return-value]


def _escape(text: str) -> str:
    """One line of plain text for rich markup: no markup, no control characters."""
    from rich.markup import escape

    return escape(printable(" ".join(text.split())))


def read_trace(path: Path, format: str | None = None) -> Timeline:
    """Load a trace, with a transient progress line on stderr when it is a terminal and the
    load takes a while."""
    name = _escape(path.name)
    with Spinner(stderr, f"reading {name}") as spinner:
        return load(path, format, lambda phase: spinner.update(f"reading {name}: {_escape(phase)}"))


def _name_width() -> int:
    """Room for kernel names in the top-kernels table of the current terminal."""
    return max(24, min(90, Console().width - 42))


def _print_json(data: Any) -> None:
    sys.stdout.buffer.write(msgspec.json.format(msgspec.json.encode(data), indent=2) + b"\n")
    sys.stdout.flush()


@app.command()
@one_line_errors
def info(trace: TraceArg, json: JsonOpt = False, format: FormatOpt = None) -> None:
    """Format, producer, devices, event counts per kind, streams, span and parser warnings."""
    data = stats.info(read_trace(trace, format))
    if json:
        _print_json(data)
    else:
        terminal.print_renderable(terminal.render_info(data))


def _rule_options(options: list[str] | None) -> dict[str, dict[str, str]]:
    """``RULE.KEY=VALUE`` strings -> {rule: {key: value}} (values typed by the rule)."""
    out: dict[str, dict[str, str]] = {}
    for item in options or []:
        head, sep, value = item.partition("=")
        rule, dot, key = head.partition(".")
        if not (sep and dot and rule and key):
            raise TraceError(
                f"--option {item!r}: expected RULE.KEY=VALUE, e.g. bubbles.report_ns=50000"
            )
        out.setdefault(rule.strip(), {})[key.strip()] = value.strip()
    return out


def _analysis(timeline: Timeline, rules: str | None, marker: str | None,
              patterns: Path | None, options: list[str] | None) -> Analysis:  # fmt: skip
    from tracekit.analysis import analyze

    ids = None if rules is None else [r.strip() for r in rules.split(",") if r.strip()]
    return analyze(timeline, ids, _rule_options(options), step_marker=marker, patterns=patterns)


def _analyze(timeline: Timeline, rules: str | None, marker: str | None,
             patterns: Path | None, options: list[str] | None) -> dict[str, Any]:  # fmt: skip
    return _analysis(timeline, rules, marker, patterns, options).to_dict()


@app.command()
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
) -> None:
    """Device busy time per kind and stream, the top kernels, per-step metrics and findings."""
    from tracekit.reports import steps_terminal

    timeline = read_trace(trace, format)
    data = stats.summary(timeline, top=top)
    analysis = _analyze(timeline, rules, step_marker, patterns, option)
    if json or output == "json":
        keys = ("steps", "phases", "checks", "step_metrics", "findings")
        _print_json({"low_confidence": analysis["low_confidence"], **data,
                     **{k: analysis[k] for k in keys}})  # fmt: skip
        return
    top = steps_terminal.header_lines(analysis)
    _emit(analysis, output, lambda: Group(
        *top, terminal.render_summary(data, _name_width()), Text(),
        steps_terminal.render_analysis(analysis, Console().width, confidence=False)))  # fmt: skip


@app.command()
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
        with Spinner(stderr, f"analysing {_escape(trace.name)}"):
            analyses.append(_analysis(timeline, rules, step_marker, patterns, option))
    with Spinner(stderr, "writing the report"):
        text = render(analyses, output, extra, max_events)
    if target is None:
        sys.stdout.write(text)
        return
    target.write_text(text, encoding="utf-8")
    size = len(text.encode()) / 1e6
    stderr.print(f"wrote {_escape(str(target))} ({size:.1f} MB)", highlight=False)


@app.command()
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
) -> None:
    """Find decode steps, measure each step and run the rules; print metrics and findings."""
    from tracekit.reports import steps_terminal

    data = _analyze(read_trace(trace, format), rules, step_marker, patterns, option)
    _emit(
        data,
        "json" if json else output,
        lambda: steps_terminal.render_analysis(data, Console().width),
    )


@app.command()
@one_line_errors
def check(
    trace: TraceArg,
    json: JsonOpt = False,
    format: FormatOpt = None,
    step_marker: MarkerOpt = None,
    patterns: PatternsOpt = None,
) -> None:
    """tracekit checks its own numbers: accounting identities and the vendor's summaries.
    One line per check, failing first; exit 1 when one fails, 2 on bad input."""
    from tracekit.reports.checks_text import render_checks, tally

    analysis = _analysis(read_trace(trace, format), "", step_marker, patterns, None)
    checks = [c.to_dict() for c in analysis.checks]
    if json:
        _print_json({"source": analysis.timeline.meta.get("source"), "checks": checks})
    else:
        terminal.print_renderable(Group(render_checks(checks), Text(tally(checks), style="dim")))
    raise typer.Exit(1 if any(c["status"] == "fail" for c in checks) else 0)


def _emit(data: dict[str, Any], output: str, terminal_view: Callable[[], Any]) -> None:
    """Print an analysis as ``term``, ``md`` or ``json``."""
    if output == "json":
        _print_json(data)
    elif output == "md":
        from tracekit.reports.markdown import render_markdown

        sys.stdout.write(render_markdown(data))
    elif output == "term":
        terminal.print_renderable(terminal_view())
    else:
        raise TraceError(f"--format {output!r}: choose term, md or json")


@app.command(name="rules")
@one_line_errors
def list_rules(json: JsonOpt = False) -> None:
    """The rules tracekit runs (built-in and plugins): what they detect, options, examples."""
    import inspect

    from tracekit.rules.registry import available

    docs = []
    for rule in available().values():
        docs.append({
            "id": rule.id, "name": rule.name, "doc": inspect.cleandoc(rule.__doc__ or ""),
            "options": {k: {"default": v, "help": rule.option_help.get(k, "")}
                        for k, v in rule.options.items()},
        })  # fmt: skip
    if json:
        _print_json(docs)
        return
    for doc in docs:
        typer.echo(f"{doc['id']} - {doc['name']}")
        for line in doc["doc"].splitlines():
            typer.echo(f"    {line}".rstrip())
        for key, opt in doc["options"].items():
            typer.echo(f"    option {doc['id']}.{key} = {opt['default']!r}: {opt['help']}")
        typer.echo("")


@app.command()
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
    if output.resolve() == trace.resolve():
        raise TraceError(f"{output}: refusing to overwrite the input trace; choose another name")
    check_output(output)  # before reading a large trace
    timeline = read_trace(trace, format)
    timeline.save(output)
    message = f"wrote {printable(output)} ({len(timeline):,} events)"
    stderr.print(message, highlight=False, markup=False)


@app.command()
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
    from tracekit.reports.report import render

    analyses = [_analysis(load(path), None, None, None, None) for path in demo_paths()]
    if json:
        sys.stdout.write(render(analyses, "json"))
    else:
        terminal.print_renderable(render_demo(analyses, Console().width))
    if html:
        with Spinner(stderr, "writing the report"):
            page = render(analyses, "html").encode()
            out.write_bytes(page)
        message = f"wrote {_escape(str(out))} ({len(page) / 1e6:.1f} MB): open it in a browser"
        stderr.print(message, highlight=False)


@app.command()
def formats() -> None:
    """List the trace formats tracekit reads."""
    from tracekit.parsers import registry

    for parser in registry():
        typer.echo(f"{parser.name:18} {parser.description}")


def _share(text: str, option: str) -> float:
    """``5%`` or ``0.05`` -> 0.05 (a fraction in (0, 1))."""
    value = text.strip()
    try:
        share = float(value[:-1]) / 100 if value.endswith("%") else float(value)
    except ValueError:
        share = -1.0
    if not 0 < share < 1:
        raise TraceError(f"{option} {text!r}: give a percentage (5%) or a fraction below 1 (0.05)")
    return share


SideArg = Annotated[
    str, typer.Argument(help="A trace, a folder of runs (or one trace), or a quoted glob of runs.")
]


@app.command(name="diff")
@one_line_errors
def diff_command(
    base: SideArg,
    head: SideArg,
    threshold: Annotated[
        str, typer.Option(help="Smallest change that fails the gate: 5% or 0.05.")
    ] = "5%",
    min_impact: Annotated[
        str, typer.Option(help="A category gates only when its change is this share of a step.")
    ] = "1%",
    output: OutputOpt = "term",
    top: Annotated[int, typer.Option(min=1, help="How many categories and kernels to list.")] = 10,
    rules: RulesOpt = None,
    step_marker: MarkerOpt = None,
    patterns: PatternsOpt = None,
    option: OptionOpt = None,
    allow_low_confidence: Annotated[
        bool,
        typer.Option(help="Gate even when steps were found with low confidence (else exit 2)."),
    ] = False,
) -> None:
    """Compare a baseline with a candidate: exit 0 when no regression beyond the threshold is
    significant, 1 when one is, 2 on an error (low-confidence steps included)."""
    from tracekit.analysis import analyze as analyze_timeline
    from tracekit.diff import compare
    from tracekit.runs import find_runs

    if output not in ("term", "md", "json"):
        raise TraceError(f"--format {output!r}: choose term, md or json")
    limits = _share(threshold, "--threshold"), _share(min_impact, "--min-impact")
    ids = None if rules is None else [r.strip() for r in rules.split(",") if r.strip()]
    opts = _rule_options(option)
    sides = [
        [
            analyze_timeline(read_trace(path), ids, opts, step_marker=step_marker,
                             patterns=patterns)
            for path in find_runs(spec)
        ]
        for spec in (base, head)
    ]  # fmt: skip
    data = compare(sides[0], sides[1], *limits, allow_low_confidence=allow_low_confidence)
    data = data.to_dict()
    if output == "json":
        _print_json(data)
    elif output == "md":
        from tracekit.reports.diff_markdown import render_diff_markdown

        sys.stdout.write(render_diff_markdown(data, top))
    else:
        from tracekit.reports.diff_terminal import render_diff

        terminal.print_renderable(render_diff(data, top, Console().width))
    raise typer.Exit(data["exit_code"])


def _usage_errors() -> tuple[type[Exception], Any]:
    """Click's UsageError and NoArgsIsHelpError classes, from typer's own copy of click where
    typer carries one (typer >= 0.2x), else from click."""
    try:
        from typer._click import exceptions as errors
    except ImportError:  # pragma: no cover - older typer runs on click itself
        from click import exceptions as errors  # type: ignore[no-redef]
    return errors.UsageError, getattr(errors, "NoArgsIsHelpError", ())


def run(argv: list[str] | None = None) -> int:
    """The console entry point: as ``app``, but a usage error is one line on stderr (with the
    command whose ``--help`` tells the fix) and exit code 2."""
    usage_error, no_args_is_help = _usage_errors()
    try:
        code = app(args=argv, prog_name="tracekit", standalone_mode=False)
    except no_args_is_help:
        return 0  # the help is already printed
    except usage_error as exc:
        ctx = getattr(exc, "ctx", None)
        where = ctx.command_path if ctx is not None else "tracekit"
        line = Text("error: ", style="bold red")
        line.append(f"{printable(exc.format_message())} (see `{where} --help`)")
        stderr.print(line, highlight=False, soft_wrap=True)
        return 2
    except typer.Abort:
        stderr.print("aborted", highlight=False)
        return 130
    return code if isinstance(code, int) else 0
