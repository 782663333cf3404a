"""The GitHub Action's gate (``python -m tracekit.cli.github_gate``): ``tracekit diff`` with
its settings from the environment, the verdict for the runner.

The composite action (``action.yml``) passes its inputs as environment variables (a composite
action gets no ``INPUT_*`` and a ``${{ }}`` inside a script would be code injection):

- ``TRACEKIT_BASE``, ``TRACEKIT_HEAD``: a trace, a folder of runs or a glob, relative to
  ``$GITHUB_WORKSPACE``;
- ``TRACEKIT_THRESHOLD`` (``5%``), ``TRACEKIT_MIN_IMPACT`` (``1%``);
- ``TRACEKIT_ARGS``: more ``tracekit diff`` options (``--step-marker X -O rule.key=v``), split
  like a shell would (:func:`shlex.split`) but never run by one;
- ``TRACEKIT_FAIL_ON_REGRESSION`` (``true``/``false``).

It appends the Markdown verdict to ``$GITHUB_STEP_SUMMARY``, writes the outputs (verdict,
median-change, median-change-ns, exit-code, markdown) to ``$GITHUB_OUTPUT``, prints the
annotations, and exits 1 on a regression when fail-on-regression is true, else 0; on bad
input it prints one ``::error::`` line, sets verdict ``inconclusive`` and exits 2.
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import typer

from tracekit.cli.diff_command import diff_command, run_diff
from tracekit.errors import TraceError
from tracekit.reports import diff_github

try:  # typer >= 0.2x carries its own copy of click
    from typer._click.exceptions import ClickException
except ImportError:  # pragma: no cover - older typer runs on click itself
    from click.exceptions import ClickException  # type: ignore[no-redef]

SETTINGS = {
    "TRACEKIT_BASE": "base",
    "TRACEKIT_HEAD": "head",
    "TRACEKIT_THRESHOLD": "threshold",
    "TRACEKIT_MIN_IMPACT": "min-impact",
    "TRACEKIT_ARGS": "args",
    "TRACEKIT_FAIL_ON_REGRESSION": "fail-on-regression",
}
# set by inputs of their own, or meaningless for the gate
NOT_HERE = "is not allowed (threshold and min-impact are inputs; the gate writes its own output)"
RESERVED = ("--threshold", "--min-impact", "--format", "--help")


def _side(environ: Mapping[str, str], key: str) -> str:
    """One side's trace path; relative paths (and globs) are under $GITHUB_WORKSPACE."""
    value = environ.get(key, "").strip()
    if not value:
        raise TraceError(f"input {SETTINGS[key]} is empty: name the trace(s) of that side")
    workspace = environ.get("GITHUB_WORKSPACE")
    if workspace and not Path(value).is_absolute():
        return str(Path(workspace) / value)
    return value


def _flag(environ: Mapping[str, str], key: str, default: str) -> bool:
    value = (environ.get(key) or default).strip().lower()
    if value not in ("true", "false"):
        raise TraceError(f"input {SETTINGS[key]} {value!r}: give true or false")
    return value == "true"


def settings(environ: Mapping[str, str]) -> tuple[dict[str, Any], bool]:
    """The diff's parameters (parsed as ``tracekit diff`` parses its command line) and
    whether a regression fails the step; TraceError on bad input."""
    try:
        extra = shlex.split(environ.get("TRACEKIT_ARGS", ""))
    except ValueError as exc:
        raise TraceError(f"input args: {exc}") from None
    for token in extra:
        if token.split("=", 1)[0] in RESERVED:
            raise TraceError(f"input args: {token.split('=', 1)[0]} {NOT_HERE}")
    argv = [
        "--threshold",
        environ.get("TRACEKIT_THRESHOLD") or "5%",
        "--min-impact",
        environ.get("TRACEKIT_MIN_IMPACT") or "1%",
        *extra,
        "--",  # a path that starts with - is still a path
        _side(environ, "TRACEKIT_BASE"),
        _side(environ, "TRACEKIT_HEAD"),
    ]
    app = typer.Typer(add_completion=False)
    app.command("diff")(diff_command)
    try:
        params = typer.main.get_command(app).make_context("tracekit diff", argv).params
    except ClickException as exc:
        raise TraceError(f"input args: {exc.format_message()}") from None
    except typer.Exit:  # an eager option such as --help
        raise TraceError(f"input args: {' '.join(extra)}: not options of tracekit diff") from None
    if params.pop("output") != "term":
        raise TraceError(f"input args: --format {NOT_HERE}")
    return params, _flag(environ, "TRACEKIT_FAIL_ON_REGRESSION", "true")


def _append(path: str | None, text: str) -> None:
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(text)


def _fail(environ: Mapping[str, str], message: str) -> int:
    """One ``::error::`` line, verdict inconclusive in the outputs and the summary: exit 2."""
    message = " ".join(message.split())
    print(diff_github.command("error", message, title="tracekit gate"), flush=True)
    _append(environ.get("GITHUB_STEP_SUMMARY"), diff_github.error_summary(message))
    _append(
        environ.get("GITHUB_OUTPUT"),
        diff_github.output_file_text(diff_github.error_outputs(message)),
    )
    return 2


def gate(environ: Mapping[str, str]) -> int:
    """Run the diff for the runner (see the module docstring); the exit status."""
    try:
        params, fail_on_regression = settings(environ)
        top = params.pop("top")
        data = run_diff(**params)
    except TraceError as exc:
        return _fail(environ, str(exc))
    except Exception as exc:
        if environ.get("TRACEKIT_DEBUG"):
            raise
        return _fail(environ, f"internal error ({type(exc).__name__}: {exc}); report it")
    _append(environ.get("GITHUB_STEP_SUMMARY"), diff_github.summary(data, top=top))
    _append(
        environ.get("GITHUB_OUTPUT"),
        diff_github.output_file_text(diff_github.outputs(data, top)),
    )
    sys.stdout.write("".join(line + "\n" for line in diff_github.annotations(data)))
    sys.stdout.flush()
    return 1 if data["exit_code"] == 1 and fail_on_regression else 0


def main() -> None:
    """Console entry: :func:`gate` on ``os.environ``."""
    raise SystemExit(gate(os.environ))


if __name__ == "__main__":
    main()
