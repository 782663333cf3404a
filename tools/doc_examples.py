"""Run the shell examples of README.md and docs/**/*.md and compare their output.

An example is a fenced ```console block holding lines ``$ <command>``, each followed by the
output expected with NO_COLOR=1, COLUMNS=100 and TERM=dumb, run with bash from the repository
root (stdout and stderr interleaved as in a terminal). A command may go on over lines ending
in ``\\``. The commands of one block run in one shell, so a block may write a file and read it
back, and ``$ echo $?`` shows the previous command's exit code.

- A line ``…`` in a shown output stands for zero or more printed lines: as its last line, for
  the rest of the output (only the lines before it are compared); elsewhere, for the lines up
  to where the shown lines after it match again. Trailing spaces and trailing blank lines are
  ignored.
- ``<!-- example: output varies -->`` on the line before a block: it runs and must exit as
  usual, its output is not compared. ``<!-- example: skip -->``: not run.
- A command exits 0 unless the text shows its code (``$?`` in it or in the next command).
- A block naming ``../shared/traces`` runs only when that folder exists.
- Each block runs in a sandbox that mirrors the root (and its parent) by symbolic links, so
  the files it writes (``tracekit-demo.html``, ``*.parquet`` ...) never land in the root and
  blocks can run in parallel.

``python tools/doc_examples.py check [FILE ...]`` exits 1 with a unified diff per drifted
example; ``update [FILE ...]`` rewrites the shown outputs of the compared blocks in place
(blocks marked as varying keep theirs). tests/test_doc_examples.py runs the same checks.
"""

from __future__ import annotations

import difflib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = "../shared/traces"
ELLIPSIS = "…"
VARIES = "<!-- example: output varies -->"
SKIP = "<!-- example: skip -->"
FENCE = re.compile(r"^(?P<indent>\s*)```console\s*$")
MARK = "\x1etk-example"
TIMEOUT_S = 300


@dataclass
class Command:
    """One ``$ command`` of a block and the output shown under it."""

    line: int  # 1-based line of the ``$``
    text: str  # the command, continuation lines joined with newlines
    shown: list[str]
    n_lines: int  # lines the command itself takes in the file


@dataclass
class Example:
    """A ```console block: where it is, how it is marked, its commands."""

    path: Path
    line: int  # 1-based line of the opening fence
    end: int  # 1-based line of the closing fence
    indent: str
    mode: str  # "compare", "varies" or "skip"
    commands: list[Command] = field(default_factory=list)

    @property
    def id(self) -> str:
        """``file:line`` relative to the root."""
        try:
            name = self.path.resolve().relative_to(ROOT).as_posix()
        except ValueError:
            name = self.path.as_posix()
        return f"{name}:{self.line}"

    @property
    def needs_shared(self) -> bool:
        """A command names ``../shared/traces``."""
        return any(SHARED in c.text for c in self.commands)


@dataclass
class Outcome:
    """What each command of a block printed and its exit code; ``error`` when it did not run."""

    outputs: list[list[str]]
    codes: list[int]
    error: str | None = None


def doc_files(root: Path = ROOT) -> list[Path]:
    """README.md and every Markdown file under docs/."""
    readme = [root / "README.md"] if (root / "README.md").exists() else []
    return readme + sorted((root / "docs").rglob("*.md"))


def parse(path: Path) -> list[Example]:
    """The ```console blocks of ``path`` that hold at least one ``$`` command."""
    lines = path.read_text(encoding="utf-8").split("\n")
    examples, i = [], 0
    while i < len(lines):
        match = FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        indent = match["indent"]
        end = i + 1
        while end < len(lines) and lines[end].strip() != "```":
            end += 1
        body = [
            line[len(indent) :] if line.startswith(indent) else line for line in lines[i + 1 : end]
        ]
        previous = next((lines[k].strip() for k in range(i - 1, -1, -1) if lines[k].strip()), "")
        mode = {VARIES: "varies", SKIP: "skip"}.get(previous, "compare")
        example = Example(path, i + 1, end + 1, indent, mode, _commands(body, i + 2))
        if example.commands:
            examples.append(example)
        i = end + 1
    return examples


def _commands(body: list[str], first_line: int) -> list[Command]:
    """The ``$`` commands of a block's lines, with the output lines after each."""
    commands: list[Command] = []
    k = 0
    while k < len(body):
        if not body[k].startswith("$ "):
            if commands:
                commands[-1].shown.append(body[k])
            k += 1
            continue
        start, parts = k, [body[k][2:]]
        while parts[-1].endswith("\\") and k + 1 < len(body):
            k += 1
            parts.append(body[k])
        commands.append(Command(first_line + start, "\n".join(parts), [], k - start + 1))
        k += 1
    return commands


def _script(example: Example) -> str:
    """A bash script running the block's commands, each output framed by markers."""
    out = ["exec 2>&1", "__tk_rc=0"]
    for n, command in enumerate(example.commands):
        out.append(f"printf '\\n{MARK} start {n}\\n'; (exit $__tk_rc)")
        out.append(command.text)
        out.append(f"__tk_rc=$?; printf '\\n{MARK} end {n} %d\\n' \"$__tk_rc\"")
    return "\n".join(out) + "\n"


def _sandbox(root: Path) -> Path:
    """A temporary folder holding a mirror of ``root`` and of its siblings (symbolic links);
    returns the mirrored root."""
    top = Path(tempfile.mkdtemp(prefix="tk-examples-"))
    for entry in root.parent.iterdir():
        if entry.name != root.name:
            (top / entry.name).symlink_to(entry)
    mirror = top / root.name
    mirror.mkdir()
    for entry in root.iterdir():
        (mirror / entry.name).symlink_to(entry)
    return mirror


def environment() -> dict[str, str]:
    """The environment the examples run in: plain, 100 columns, this interpreter's tools."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FORCE_COLOR", "CLICOLOR"))}
    env.update(NO_COLOR="1", COLUMNS="100", LINES="50", TERM="dumb", PYTHONUNBUFFERED="1")
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    for name in ("GITHUB_STEP_SUMMARY", "GITHUB_ACTIONS", "TRACEKIT_DEBUG"):
        env.pop(name, None)
    return env


def run(example: Example, root: Path = ROOT) -> Outcome:
    """Run the block's commands in one bash in a sandbox of ``root``."""
    sandbox = _sandbox(root)
    try:
        done = subprocess.run(
            ["bash", "-c", _script(example)],
            cwd=sandbox,
            env=environment(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            timeout=TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        return Outcome([], [], f"timed out after {TIMEOUT_S} s")
    finally:
        shutil.rmtree(sandbox.parent, ignore_errors=True)
    return _split(done.stdout.decode("utf-8", "replace"), len(example.commands))


def _split(text: str, count: int) -> Outcome:
    """The markers' frames of ``text``: each command's output lines and exit code."""
    outputs, codes = [], []
    for n in range(count):
        start = re.search(rf"\n{MARK} start {n}\n", text)
        end = re.search(rf"\n{MARK} end {n} (\d+)\n", text)
        if not (start and end):
            return Outcome(outputs, codes, f"the shell stopped before command {n + 1} ended")
        outputs.append(_clean(text[start.end() : end.start()].split("\n")))
        codes.append(int(end[1]))
    return Outcome(outputs, codes)


def _clean(lines: list[str]) -> list[str]:
    """Lines without trailing spaces and without trailing blank lines."""
    out = [line.rstrip() for line in lines]
    while out and not out[-1]:
        out.pop()
    return out


def _is_ellipsis(line: str) -> bool:
    return line.strip() == ELLIPSIS


def _segments(shown: list[str]) -> list[list[str]]:
    """The runs of shown lines between ``…`` lines (one more than there are ``…``)."""
    segments: list[list[str]] = [[]]
    for line in shown:
        if _is_ellipsis(line):
            segments.append([])
        else:
            segments[-1].append(line)
    return segments


def _closest(segment: list[str], output: list[str], start: int, stop: int) -> int:
    """The first index in ``start..stop`` where ``segment`` matches ``output``, else the one
    where its lines are most alike (so that a diff shows the edited line against its
    counterpart, a window cut by the end counting too)."""
    n = len(segment)
    for p in range(start, stop + 1):
        if output[p : p + n] == segment:
            return p

    def likeness(p: int) -> float:
        pairs = zip(segment, output[p : p + n])
        return sum(difflib.SequenceMatcher(None, a, b).ratio() for a, b in pairs)

    return max(range(start, max(start, len(output) - 1) + 1), key=lambda p: (likeness(p), -p))


def aligned(shown: list[str], output: list[str]) -> list[str]:
    """The printed lines laid out as ``shown``: each run of lines a ``…`` stands for becomes
    one ``…`` line; equal to ``shown`` exactly when the output matches it."""
    segments = _segments(shown)
    if len(segments) == 1:
        return output
    got = output[: len(segments[0])]
    pos = len(got)
    for j, segment in enumerate(segments[1:], 1):
        got.append(ELLIPSIS)
        if j == len(segments) - 1:  # the last run of shown lines ends the output
            end = len(output) - len(segment)
            if segment and end >= pos and output[end:] == segment:
                got += segment
            elif segment:
                got += output[_closest(segment, output, pos, end) :]
            break
        p = _closest(segment, output, pos, len(output) - len(segment))
        got += output[p : p + len(segment)]
        pos = p + len(segment)
    return got


def expected_and_actual(command: Command, output: list[str]) -> tuple[list[str], list[str]]:
    """The shown lines and the printed lines as compared: ``…`` lines stand in both for the
    printed lines they cover; a trailing ``…`` is dropped from both."""
    shown = _clean(command.shown)
    got = aligned(shown, output)
    if shown and _is_ellipsis(shown[-1]):
        return shown[:-1], got[:-1]
    return shown, got


def problems(example: Example, outcome: Outcome, compare: bool = True) -> list[str]:
    """What is wrong with a run of ``example``: exit codes, and (compared blocks, when
    ``compare``) a unified diff per command whose output drifted; empty when all is as
    shown."""
    if outcome.error:
        return [f"{example.id}: {outcome.error}"]
    found = []
    for n, (command, output, code) in enumerate(
        zip(example.commands, outcome.outputs, outcome.codes)
    ):
        follower = example.commands[n + 1].text if n + 1 < len(example.commands) else ""
        if code and "$?" not in command.text and "$?" not in follower:
            tail = "\n".join(output[-5:])
            found.append(f"{example.id}: `{command.text}` exited {code}:\n{tail}")
        if example.mode != "compare" or not compare:
            continue
        want, got = expected_and_actual(command, output)
        if want != got:
            where = f"{example.path.name}:{command.line}"
            diff = difflib.unified_diff(
                want, got, f"{where} (shown)", f"{where} (printed)", lineterm=""
            )
            found.append(f"$ {command.text}\n" + "\n".join(diff))
    return found


def runnable(example: Example, root: Path = ROOT) -> str | None:
    """Why ``example`` is not run here (a skip mark, no shared traces); None when it runs."""
    if example.mode == "skip":
        return "marked skip"
    if example.needs_shared and not (root / SHARED).is_dir():
        return f"{SHARED} is not here"
    return None


def run_all(
    examples: Iterable[Example], root: Path = ROOT, jobs: int | None = None
) -> dict[str, Outcome]:
    """Outcome per example id for the runnable ``examples``, run in parallel; blocks of the
    same commands (the README and a guide showing one example) run once."""
    todo = [e for e in examples if runnable(e, root) is None]
    keys = {e.id: tuple(c.text for c in e.commands) for e in todo}
    unique = {key: e for e in todo for key in [keys[e.id]]}
    workers = jobs or max(2, min(4, os.cpu_count() or 2))
    with ThreadPoolExecutor(workers) as pool:
        done = dict(zip(unique, pool.map(lambda e: run(e, root), unique.values())))
    return {e.id: done[keys[e.id]] for e in todo}


def updated(example: Example, outcome: Outcome, lines: list[str]) -> None:
    """Put the printed outputs of ``example`` in place in the file's ``lines``; a shown output
    holding ``…`` keeps them, each standing for the lines it covers (see ``aligned``)."""
    first = example.commands[0].line - 1
    body = [line[len(example.indent) :] for line in lines[example.line : first]]
    for command, output in zip(example.commands, outcome.outputs):
        start = command.line - 1
        body += [line[len(example.indent) :] for line in lines[start : start + command.n_lines]]
        body += aligned(_clean(command.shown), output)
    lines[example.line : example.end - 1] = [
        (example.indent + line) if line else line for line in body
    ]


def main(argv: list[str]) -> int:
    """``check`` or ``update`` the examples of the files given (default: README and docs)."""
    if not argv or argv[0] not in ("check", "update"):
        print("usage: doc_examples.py check|update [FILE ...]", file=sys.stderr)
        return 2
    files = [Path(a).resolve() for a in argv[1:]] or doc_files()
    examples = [e for path in files for e in parse(path)]
    outcomes = run_all(examples)
    bad = 0
    for example in examples:
        if example.id not in outcomes:
            continue
        found = problems(example, outcomes[example.id], compare=argv[0] == "check")
        bad += bool(found)
        print(*found, sep="\n\n", end="\n\n" if found else "")
    if argv[0] == "update":
        for path in files:
            text = path.read_text(encoding="utf-8")
            lines = text.split("\n")
            for example in reversed([e for e in examples if e.path == path]):
                outcome = outcomes.get(example.id)
                if example.mode == "compare" and outcome and not outcome.error:
                    updated(example, outcome, lines)
            if "\n".join(lines) != text:
                path.write_text("\n".join(lines), encoding="utf-8")
                print(f"updated {path}")
    ran = len(outcomes)
    print(f"{ran} examples run, {len(examples) - ran} not run, {bad} with problems")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
