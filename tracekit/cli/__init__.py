"""The `tracekit` command line (typer): info, summary, analyze, check, report, rules, convert,
demo, diff, cluster, trend.

The commands are in :mod:`.commands`, :mod:`.diff_command` and :mod:`.trend_command`, what
they share in :mod:`.common`; :data:`app` lists them and :func:`run` is the console entry
point.
"""

from __future__ import annotations

import os
import sys
from typing import Annotated, Any

import typer
from rich.text import Text

from tracekit import memory
from tracekit.cli.cluster_command import cluster_command
from tracekit.cli.commands import (
    analyze,
    check,
    convert,
    demo,
    formats,
    info,
    list_rules,
    report,
    summary,
)
from tracekit.cli.common import escape, stderr
from tracekit.cli.diff_command import diff_command
from tracekit.cli.trend_command import trend_command
from tracekit.errors import TraceError
from tracekit.names import printable
from tracekit.parsers.base import STRICT_ENV

app = typer.Typer(
    name="tracekit",
    help="Make GPU/NPU profiler traces of LLM inference readable.",
    epilog="Example: tracekit report tracekit/data/demo.sqlite -o report.html",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


@app.callback()
def main(
    no_color: Annotated[bool, typer.Option("--no-color", help="Plain text output.")] = False,
    strict: Annotated[
        bool,
        typer.Option(
            "--strict",
            help="Refuse a trace cut short instead of reading its complete events.",
        ),
    ] = False,
    max_memory: Annotated[
        str | None,
        typer.Option(
            "--max-memory",
            envvar=memory.ENV,
            help="Stop (one line, exit 2) past this much memory: 6G, 512M or 80% (default 90%).",
        ),
    ] = None,
) -> None:
    """Make GPU/NPU profiler traces of LLM inference readable."""
    # The terminal views (polars, the models) are imported by the commands that print; one
    # not yet imported starts with NO_COLOR off.
    if no_color or "tracekit.reports.terminal" in sys.modules:
        from tracekit.reports import terminal

        terminal.NO_COLOR = no_color
    if strict:
        os.environ[STRICT_ENV] = "1"  # worker processes inherit it
    try:
        limit = memory.parse_limit(max_memory)
    except TraceError as exc:
        stderr.print(f"error: {escape(str(exc))}", highlight=False)
        raise typer.Exit(2) from None
    memory.start_guard(limit)


# One example line per command (its --help ends with it; the reference page shows it).
EXAMPLES = {
    "info": "tracekit info tracekit/data/demo.sqlite",
    "summary": "tracekit summary tracekit/data/demo.sqlite --top 5",
    "report": "tracekit report tracekit/data/demo.sqlite -o report.html",
    "analyze": "tracekit analyze tracekit/data/demo.sqlite --rules overlap,bubbles",
    "check": "tracekit check tracekit/data/demo.sqlite",
    "rules": "tracekit rules --json",
    "convert": "tracekit convert tracekit/data/demo.sqlite -o demo.parquet",
    "demo": "tracekit demo -o tracekit-demo.html",
    "formats": "tracekit formats",
    "diff": "tracekit diff 'runs/base-*.sqlite' 'runs/head-*.sqlite' --threshold 5% -f md",
    "cluster": "tracekit cluster ranks/ -f html -o cluster.html",
    "trend": "tracekit trend 'nightly/*.sqlite' -f html -o trend.html",
}
COMMANDS = {
    "info": info,
    "summary": summary,
    "report": report,
    "analyze": analyze,
    "check": check,
    "rules": list_rules,
    "convert": convert,
    "demo": demo,
    "formats": formats,
    "diff": diff_command,
    "cluster": cluster_command,
    "trend": trend_command,
}
for _name, _command in COMMANDS.items():
    app.command(name=_name, epilog=f"Example: {EXAMPLES[_name]}")(_command)


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
