"""What the commands share: their options, one-line errors, reading a trace with a progress
line, rule options from the command line, analysing a timeline and printing the result."""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import msgspec
import typer
from rich.console import Console

from tracekit import memory
from tracekit.errors import TraceError
from tracekit.names import printable
from tracekit.progress import Spinner

if TYPE_CHECKING:  # imported where a command reads a trace, not for --help
    from tracekit.analysis import Analysis
    from tracekit.timeline import Timeline

stderr = Console(stderr=True)
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
DeviceOpt = Annotated[
    str | None,
    typer.Option(
        "--device",
        help="Device table entry for the roofline (e.g. h100-sxm, mi300x, 910b3; see "
        "tracekit/data/devices.toml) or a TOML file of entries, instead of the trace's names.",
    ),
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
            _fail(escape(str(exc)))
        except KeyboardInterrupt:
            _fail("interrupted")
        except Exception as exc:
            if os.environ.get("TRACEKIT_DEBUG"):
                raise
            _fail(
                escape(
                    f"internal error ({type(exc).__name__}: {exc});"
                    " rerun with TRACEKIT_DEBUG=1 and report it"
                )
            )

    return wrapper  # type: ignore[return-value]


def escape(text: str) -> str:
    """One line of plain text for rich markup: no markup, no control characters."""
    from rich.markup import escape as markup_escape

    return markup_escape(printable(" ".join(text.split())))


def read_trace(path: Path, format: str | None = None) -> Timeline:
    """Load a trace, with a transient progress line on stderr when it is a terminal and the
    load takes a while."""
    from tracekit.load import load

    name = escape(path.name)
    memory.state.update(doing=f"reading {path.name}", input=path)
    with Spinner(stderr, f"reading {name}") as spinner:
        return load(path, format, lambda phase: spinner.update(f"reading {name}: {escape(phase)}"))


def name_width() -> int:
    """Room for kernel names in the top-kernels table of the current terminal."""
    return max(24, min(90, Console().width - 42))


def print_json(data: Any) -> None:
    """``data`` as indented JSON on stdout."""
    sys.stdout.buffer.write(msgspec.json.format(msgspec.json.encode(data), indent=2) + b"\n")
    sys.stdout.flush()


def rule_ids(rules: str | None) -> list[str] | None:
    """``--rules a,b`` -> ``["a", "b"]``; None (every rule) when not given."""
    return None if rules is None else [r.strip() for r in rules.split(",") if r.strip()]


def rule_options(options: list[str] | None) -> dict[str, dict[str, str]]:
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


def analysis_of(
    timeline: Timeline,
    rules: str | None,
    marker: str | None,
    patterns: Path | None,
    options: list[str] | None,
    device: str | None = None,
) -> Analysis:
    """``timeline`` analysed with the rules, step marker, patterns, rule options and roofline
    device given on the command line."""
    from tracekit.analysis import analyze

    source = timeline.meta.get("source") or "the trace"
    memory.state.update(doing=f"analysing {source} ({len(timeline):,} events)")
    with Spinner(stderr, f"analysing {escape(str(source))}"):
        return analyze(
            timeline,
            rule_ids(rules),
            rule_options(options),
            step_marker=marker,
            patterns=patterns,
            device=device,
        )


def emit(data: dict[str, Any], output: str, terminal_view: Callable[[], Any]) -> None:
    """Print an analysis as ``term``, ``md`` or ``json``."""
    from tracekit.reports import terminal

    if output == "json":
        print_json(data)
    elif output == "md":
        from tracekit.reports.markdown import render_markdown

        sys.stdout.write(render_markdown(data))
    elif output == "term":
        terminal.print_renderable(terminal_view())
    else:
        raise TraceError(f"--format {output!r}: choose term, md or json")
