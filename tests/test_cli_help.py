"""Help that teaches (issue 35, item 4): ``tracekit --help`` and each command's help end with
one example line whose command parses, and every option a message of tracekit names exists.

The second test walks every string literal of tracekit/**/*.py (f-strings as one text,
docstrings included): each ``--option`` it names must be an option of the tracekit app, of
the command the text names (``tracekit diff ... --threshold``) where it names one, unless the
text names another tool whose option it is (:data:`OTHER_TOOLS`).
"""

from __future__ import annotations

import ast
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import typer.main
from typer.testing import CliRunner

from tracekit.cli import EXAMPLES, _usage_errors, app

ROOT = Path(__file__).resolve().parents[1]
COMMAND = typer.main.get_command(app)
OPTION = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")
NAMED_COMMAND = re.compile(r"\btracekit (?:--[a-z-]+(?: \S+)? )*([a-z]+)\b([^`;)\n]*)")
# Options of the profilers tracekit tells the user to run, allowed where the text names the
# tool (checked against each tool's documentation when the message was written).
OTHER_TOOLS: dict[str, set[str]] = {
    "nsys": {"--trace", "--type", "--output", "--cuda-graph-trace", "--export"},
    "rocprofv3": {"--kernel-trace", "--sys-trace", "--output-format", "--agent-index"},
    "rocprof": {"--hip-trace", "--stats", "--timestamp", "--tool-version", "--sys-trace"},
    "msprof": {"--export", "--type", "--output"},
}


def _options(command: Any) -> set[str]:
    options = [p for p in command.params if p.param_type_name == "option"]
    return {o for p in options for o in (*p.opts, *getattr(p, "secondary_opts", ()))}


ROOT_OPTIONS = _options(COMMAND) | {"--help"}
BY_COMMAND = {name: _options(cmd) | ROOT_OPTIONS for name, cmd in COMMAND.commands.items()}
ALL_OPTIONS = set().union(*BY_COMMAND.values())


def _help(*argv: str) -> str:
    result = CliRunner().invoke(app, [*argv, "--help"], env={"NO_COLOR": "1", "COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    return result.output


def _parses(line: str) -> None:
    """``line`` (``tracekit [global options] COMMAND ...``) parses: every option exists on its
    command and every value converts; nothing runs."""
    argv = shlex.split(line)
    assert argv[0] == "tracekit"
    root_ctx = COMMAND.make_context("tracekit", argv[1:], resilient_parsing=False)
    protected = getattr(root_ctx, "_protected_args", None) or root_ctx.protected_args or []
    rest = [*protected, *root_ctx.args]  # click 8.2 keeps the command name apart
    name, command, args = COMMAND.resolve_command(root_ctx, rest)
    assert command is not None, line
    command.make_context(name, args, parent=root_ctx)


def test_every_command_has_an_example() -> None:
    """The table of examples covers exactly the app's 12 commands."""
    assert set(EXAMPLES) == set(COMMAND.commands)
    assert len(EXAMPLES) == 12


@pytest.mark.parametrize("name", sorted(COMMAND.commands))
def test_command_help_ends_with_an_example_that_parses(name: str) -> None:
    """``tracekit NAME --help`` shows ``Example: tracekit NAME ...`` and that line parses."""
    text = _help(name)
    lines = [line.strip() for line in text.splitlines() if "Example:" in line]
    assert lines == [f"Example: {EXAMPLES[name]}"]
    assert EXAMPLES[name].startswith(f"tracekit {name}")
    _parses(EXAMPLES[name])


def test_top_level_help_shows_an_example_that_parses() -> None:
    """``tracekit --help`` lists the commands and ends with one example line."""
    text = _help()
    example = re.search(r"Example: (tracekit .+?)\s*│?\s*$", text, flags=re.M)
    assert example and example[1] == "tracekit report tracekit/data/demo.sqlite -o report.html"
    _parses(example[1])


def test_the_parse_check_catches_a_wrong_example() -> None:
    """An option the command lacks, or a value that does not convert, does not parse."""
    usage_error, _ = _usage_errors()
    with pytest.raises(usage_error, match="--threshold"):
        _parses("tracekit summary tracekit/data/demo.sqlite --threshold 5%")
    with pytest.raises(usage_error, match="integer"):
        _parses("tracekit summary tracekit/data/demo.sqlite --top many")
    _parses("tracekit --no-color summary tracekit/data/demo.sqlite --top 3")


def _texts(path: Path) -> list[tuple[int, str]]:
    """Every message of ``path`` with its line: its string literals holding a space (not an
    option's bare name, nor a docstring); an f-string as one text with ``{}`` for its
    values."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    skip = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}
    skip |= {id(n.body[0].value) for n in ast.walk(tree) if _has_docstring(n)}
    texts = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            parts = [v.value if isinstance(v, ast.Constant) else "{}" for v in node.values]
            texts.append((node.lineno, "".join(map(str, parts))))
        elif (
            isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip
        ):
            texts.append((node.lineno, node.value))
    return [(line, text) for line, text in texts if re.search(r"\s", text.strip())]


def _has_docstring(node: ast.AST) -> bool:
    kinds = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    return (
        isinstance(node, kinds)
        and bool(node.body)
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    )


def wrong_options(text: str) -> list[str]:
    """The options ``text`` names that neither tracekit nor a tool it names has; after
    ``tracekit CMD`` (up to a backtick, ``;``, ``)`` or the line's end), those CMD lacks."""
    tools = set().union(
        *(
            opts
            for tool, opts in OTHER_TOOLS.items()
            if re.search(rf"(?<![\w-]){tool}(?![\w-])", text)
        )
    )
    wrong = [o for o in OPTION.findall(text) if o not in ALL_OPTIONS | tools]
    for name, line in NAMED_COMMAND.findall(text):  # `tracekit CMD ... --opt`: CMD's own
        if name in BY_COMMAND:
            wrong += [o for o in OPTION.findall(line) if o not in BY_COMMAND[name] | tools]
    return wrong


def test_every_option_a_message_names_exists() -> None:
    """No message (error, hint, option help) of tracekit names an option that is not
    there; the 71 messages naming options today name 21 distinct tracekit options."""
    bad, seen, messages = [], set(), 0
    for path in sorted((ROOT / "tracekit").rglob("*.py")):
        for line, text in _texts(path):
            seen |= set(OPTION.findall(text)) & ALL_OPTIONS
            messages += bool(OPTION.search(text))
            for option in wrong_options(text):
                bad.append(f"{path.relative_to(ROOT)}:{line}: {option} in {text[:120]!r}")
    assert not bad, "\n".join(bad)
    assert len(seen) >= 21 and messages >= 71, (messages, sorted(seen))  # more may come


def test_the_option_walk_catches_a_wrong_option() -> None:
    """A made-up option fails, an option of another command than the one named fails, an
    other tool's option passes only where the text names that tool."""
    assert wrong_options("pass --no-such-thing") == ["--no-such-thing"]
    assert wrong_options("rerun `tracekit summary --threshold 5%`") == ["--threshold"]
    assert wrong_options("rerun `tracekit diff a b --threshold 5%`") == []
    assert wrong_options("rerun `tracekit --strict diff a b --threshold 5%`") == []
    assert wrong_options("--step-marker: no range; `tracekit info` lists the ranges") == []
    assert wrong_options("profile with --kernel-trace") == ["--kernel-trace"]
    assert wrong_options("profile with `rocprofv3 --kernel-trace`") == []
    assert wrong_options("profile with `nsys profile --trace=cuda,nvtx`") == []
