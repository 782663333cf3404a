"""`tracekit diff`: compare the runs of a baseline with those of a candidate."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated, Any

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
    read_trace,
    rule_ids,
    rule_options,
)
from tracekit.errors import TraceError

SideArg = Annotated[
    str, typer.Argument(help="A trace, a folder of runs (or one trace), or a quoted glob of runs.")
]
FORMATS = ("term", "md", "json", "github")
DiffFormatOpt = Annotated[
    str,
    typer.Option(
        "--format",
        "-f",
        help="term (default), md (for a PR comment), json, or github (workflow annotations, "
        "and the Markdown verdict appended to $GITHUB_STEP_SUMMARY when it is set).",
    ),
]


def share(text: str, option: str) -> float:
    """``5%`` or ``0.05`` -> 0.05 (a fraction in (0, 1))."""
    value = text.strip()
    try:
        fraction = float(value[:-1]) / 100 if value.endswith("%") else float(value)
    except ValueError:
        fraction = -1.0
    if not 0 < fraction < 1:
        raise TraceError(f"{option} {text!r}: give a percentage (5%) or a fraction below 1 (0.05)")
    return fraction


def run_diff(
    base: str,
    head: str,
    threshold: str = "5%",
    min_impact: str = "1%",
    *,
    rules: str | None = None,
    step_marker: str | None = None,
    patterns: Path | None = None,
    option: list[str] | None = None,
    device: str | None = None,
    allow_low_confidence: bool = False,
) -> dict[str, Any]:
    """Analyse the runs of both sides and compare them: ``Diff.to_dict()``. What ``tracekit
    diff`` and the GitHub gate (:mod:`tracekit.cli.github_gate`) share; TraceError on bad
    input."""
    from tracekit.analysis import analyze
    from tracekit.diff import compare
    from tracekit.runs import find_runs

    limits = share(threshold, "--threshold"), share(min_impact, "--min-impact")
    ids, opts = rule_ids(rules), rule_options(option)
    sides = [
        [
            analyze(
                read_trace(path),
                ids,
                opts,
                step_marker=step_marker,
                patterns=patterns,
                device=device,
            )
            for path in find_runs(spec)
        ]
        for spec in (base, head)
    ]
    return compare(sides[0], sides[1], *limits, allow_low_confidence=allow_low_confidence).to_dict()


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
    output: DiffFormatOpt = "term",
    top: Annotated[int, typer.Option(min=1, help="How many categories and kernels to list.")] = 10,
    rules: RulesOpt = None,
    step_marker: MarkerOpt = None,
    patterns: PatternsOpt = None,
    option: OptionOpt = None,
    device: DeviceOpt = None,
    allow_low_confidence: Annotated[
        bool,
        typer.Option(help="Gate even when steps were found with low confidence (else exit 2)."),
    ] = False,
) -> None:
    """Compare a baseline with a candidate: exit 0 when no regression beyond the threshold is
    significant, 1 when one is, 2 on an error (low-confidence steps included)."""
    from tracekit.reports import terminal

    if output not in FORMATS:
        raise TraceError(f"--format {output!r}: choose term, md, json or github")
    data = run_diff(
        base,
        head,
        threshold,
        min_impact,
        rules=rules,
        step_marker=step_marker,
        patterns=patterns,
        option=option,
        device=device,
        allow_low_confidence=allow_low_confidence,
    )
    if output == "json":
        print_json(data)
    elif output == "github":
        from tracekit.reports import diff_github

        sys.stdout.write("".join(line + "\n" for line in diff_github.annotations(data)))
        if os.environ.get("GITHUB_STEP_SUMMARY"):
            diff_github.append_summary(os.environ["GITHUB_STEP_SUMMARY"], data, top)
    elif output == "md":
        from tracekit.reports.diff_markdown import render_diff_markdown

        sys.stdout.write(render_diff_markdown(data, top))
    else:
        from tracekit.reports.diff_terminal import render_diff

        terminal.print_renderable(render_diff(data, top, Console().width))
    raise typer.Exit(data["exit_code"])
