"""The `tracekit` command line (typer): info, summary, convert, demo."""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, TypeVar

import msgspec
import typer
from rich.console import Console

from tracekit import stats
from tracekit.errors import TraceError
from tracekit.load import load
from tracekit.reports import terminal
from tracekit.reports.format import printable
from tracekit.timeline import Timeline, check_output

app = typer.Typer(
    name="tracekit",
    help="Make GPU/NPU profiler traces of LLM inference readable.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
stderr = Console(stderr=True)

F = TypeVar("F", bound=Callable[..., Any])
TraceArg = Annotated[Path, typer.Argument(help="Trace file (nsys .sqlite/.nsys-rep, ...).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]
FormatOpt = Annotated[
    str | None, typer.Option("--format", help="Force a parser instead of sniffing the content.")
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
    """Load a trace, showing a transient progress line on stderr when it is a terminal."""
    if not stderr.is_terminal:
        return load(path, format=format)
    name = _escape(path.name)
    with stderr.status(f"reading {name}", spinner="dots") as status:

        def progress(phase: str) -> None:
            status.update(f"reading {name}: {_escape(phase)}")

        return load(path, format=format, progress=progress)


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


@app.command()
@one_line_errors
def summary(
    trace: TraceArg,
    json: JsonOpt = False,
    top: Annotated[int, typer.Option(min=1, help="How many kernels to list.")] = 15,
    format: FormatOpt = None,
) -> None:
    """Device busy time per kind and stream, and the top kernels."""
    data = stats.summary(read_trace(trace, format), top=top)
    if json:
        _print_json(data)
    else:
        terminal.print_renderable(terminal.render_summary(data, _name_width()))


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
def demo(json: JsonOpt = False) -> None:
    """Run the pipeline on the bundled DeepSeek-V4-like decode trace and print the summary."""
    with resources.as_file(resources.files("tracekit.data") / "demo.sqlite") as path:
        timeline = load(path)
    data = stats.summary(timeline)
    if json:
        _print_json(data)
    else:
        terminal.print_renderable(terminal.render_summary(data, _name_width()))


@app.command()
def formats() -> None:
    """List the trace formats tracekit reads."""
    from tracekit.parsers import registry

    for parser in registry():
        typer.echo(f"{parser.name:18} {parser.description}")
