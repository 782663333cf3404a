"""The shell examples of README.md and docs/ run and print what they show (issue 35, item 3).

One test per ```console block (id ``file:line``) fails with a unified diff when tracekit's
output drifted (``python tools/doc_examples.py update`` rewrites them); the other tests check
the checker itself on edited copies: an edited output fails, ``…`` cuts the comparison (at the
end) or stands for the lines between (in the middle), an output marked as varying is run but
not compared, a skipped block is not run.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_SPEC = importlib.util.spec_from_file_location("doc_examples", ROOT / "tools" / "doc_examples.py")
assert _SPEC and _SPEC.loader
dx = importlib.util.module_from_spec(_SPEC)
sys.modules["doc_examples"] = dx
_SPEC.loader.exec_module(dx)

EXAMPLES = [e for path in dx.doc_files() for e in dx.parse(path)]
FORMATS_HEAD = [  # `tracekit formats | head -3`: the first readers of the registry
    "nsys-sqlite        Nsight Systems SQLite export (.sqlite)",
    "rpd                rocmProfileData .rpd SQLite (rpd_tracer; schema v1-v3, .rpd.gz too)",
    "rocpd              rocprofv3 rocpd SQLite database (schema 3)",
]


def _key(example: dx.Example) -> tuple[str, ...]:
    return tuple(c.text for c in example.commands)


@pytest.fixture(scope="session")
def outcomes(request: pytest.FixtureRequest) -> dict[tuple[str, ...], dx.Outcome]:
    """Outcome per block's commands: the doc examples this session selected, run in parallel
    once."""
    chosen = {
        item.callspec.params["example"].id
        for item in request.session.items
        if hasattr(item, "callspec") and "example" in item.callspec.params
    }
    todo = [e for e in EXAMPLES if e.id in chosen]
    ran = dx.run_all(todo)
    return {_key(e): ran[e.id] for e in todo if e.id in ran}


def _outcome(cache: dict[tuple[str, ...], dx.Outcome], example: dx.Example) -> dx.Outcome:
    if _key(example) not in cache:
        cache[_key(example)] = dx.run(example)
    return cache[_key(example)]


def _doc(tmp_path: Path, text: str) -> list[dx.Example]:
    path = tmp_path / "page.md"
    path.write_text(text, encoding="utf-8")
    return dx.parse(path)


@pytest.mark.parametrize("example", EXAMPLES, ids=[e.id for e in EXAMPLES])
def test_example_prints_what_it_shows(example: dx.Example, outcomes: dict) -> None:
    """Each command exits as the text says and (unless marked as varying) prints its shown
    output."""
    reason = dx.runnable(example)
    if reason:
        pytest.skip(reason)
    found = dx.problems(example, _outcome(outcomes, example))
    assert not found, "\n\n".join(found) + "\n(python tools/doc_examples.py update rewrites them)"


def test_the_readme_holds_examples_that_are_compared() -> None:
    """The README's worked examples are console blocks the checker runs and compares."""
    readme = [e for e in EXAMPLES if e.path.name == "README.md"]
    assert any(e.mode == "compare" and dx.runnable(e) is None for e in readme)


def test_an_edited_output_of_the_docs_fails_with_a_diff(tmp_path: Path, outcomes: dict) -> None:
    """A copy of the first compared example of the docs with one shown line edited fails,
    with a diff naming the line as shown and as printed; the copy unedited passes."""
    examples = [e for path in dx.doc_files() for e in dx.parse(path)]  # as the files are now
    example = next(e for e in examples if e.mode == "compare" and dx.runnable(e) is None)
    command = next(c for c in example.commands if dx.expected_and_actual(c, [])[0])
    lines = example.path.read_text(encoding="utf-8").split("\n")
    index = command.line - 1 + command.n_lines  # the first shown line
    original = lines[index].rstrip()
    lines[index] = f"{original} drifted"
    copy = tmp_path / example.path.name
    copy.write_text("\n".join(lines), encoding="utf-8")
    edited = next(e for e in dx.parse(copy) if e.line == example.line)
    outcome = _outcome(outcomes, example)
    assert not dx.problems(example, outcome)
    found = dx.problems(edited, outcome)
    assert len(found) == 1
    assert f"\n-{dx._clean([lines[index]])[0][len(example.indent) :]}\n" in found[0]
    assert f"\n+{original[len(example.indent) :]}\n" in found[0]


def test_check_and_update_on_a_page(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """``check`` exits 1 and prints the diff when a shown output is wrong, 0 when it is right;
    ``update`` puts the real output in place and keeps the text around it."""
    text = "Intro\n\n```console\n$ tracekit formats | head -3\n{}\n```\n\nAfter.\n"
    wrong = [FORMATS_HEAD[0], FORMATS_HEAD[1].replace("rpd ", "rdp "), FORMATS_HEAD[2]]
    page = tmp_path / "page.md"
    page.write_text(text.format("\n".join(wrong)), encoding="utf-8")
    assert dx.main(["check", str(page)]) == 1
    out = capsys.readouterr().out
    assert "-rdp " in out and "+rpd " in out and "1 with problems" in out
    assert dx.main(["update", str(page)]) == 0
    assert page.read_text(encoding="utf-8") == text.format("\n".join(FORMATS_HEAD))
    assert dx.main(["check", str(page)]) == 0


def test_an_ellipsis_cuts_the_comparison(tmp_path: Path) -> None:
    """Lines after ``…`` are not compared, lines before it are; update keeps the cut."""
    good, bad = _doc(
        tmp_path,
        f"```console\n$ tracekit formats\n{FORMATS_HEAD[0]}\n…\n```\n\n"
        f"```console\n$ tracekit formats\n{FORMATS_HEAD[1]}\n…\n```\n",
    )
    outcome = dx.run(good)
    assert len(outcome.outputs[0]) == 18  # every reader, though one line is shown
    assert dx.problems(good, outcome) == []
    assert len(dx.problems(bad, outcome)) == 1
    lines = (tmp_path / "page.md").read_text().split("\n")
    dx.updated(bad, outcome, lines)
    assert lines[7:10] == ["$ tracekit formats", FORMATS_HEAD[0], "…"]


def test_an_ellipsis_in_the_middle_stands_for_the_lines_between(tmp_path: Path) -> None:
    """A ``…`` between shown lines covers zero or more printed lines up to where the shown
    lines after it match; a line after it edited (or missing from the output) fails with a
    diff naming it; update keeps the ``…`` and puts the printed line in place."""
    ten = "$ seq 10\n1\n2\n{}\n…\n9\n10\n"
    page = "".join(
        f"```console\n{body}```\n\n"
        for body in (
            ten.format(3),  # covers 4..8
            "$ seq 3\n1\n…\n2\n3\n",  # covers nothing
            "$ seq 10\n1\n…\n5\n…\n",  # a middle and a trailing one
            ten.format("3 drifted"),
            "$ seq 10\n1\n…\n11\n",  # the line after it is never printed
            "$ seq 10\n1\n…\n5\n",  # printed, but the output goes on after it
        )
    )
    good, none, both, edited, missing, early = _doc(tmp_path, page)
    for example in (good, none, both):
        assert dx.problems(example, dx.run(example)) == [], example.id
    outcome = dx.run(edited)
    assert outcome.outputs[0] == [str(n) for n in range(1, 11)]
    (problem,) = dx.problems(edited, outcome)
    assert "\n-3 drifted\n+3\n" in problem
    assert "\n 9\n" in problem and "\n+4\n" not in problem  # the … still covers 4..8
    (problem,) = dx.problems(missing, dx.run(missing))
    assert "\n-11\n" in problem
    (problem,) = dx.problems(early, dx.run(early))
    assert "\n 5\n+6\n" in problem and problem.endswith("\n+10")
    lines = (tmp_path / "page.md").read_text().split("\n")
    dx.updated(edited, outcome, lines)
    start = edited.line  # the line after the fence
    assert lines[start : start + 7] == ["$ seq 10", "1", "2", "3", "…", "9", "10"]


def test_output_varies_runs_but_does_not_compare(tmp_path: Path) -> None:
    """A block marked as varying is not compared, but a command that fails where the text
    does not show its exit code still fails it; ``; echo $?`` or a next ``$ echo $?`` shows
    the code."""
    varies, failing, shown, next_line = _doc(
        tmp_path,
        f"{dx.VARIES}\n```console\n$ tracekit formats | head -1\nwhatever\n```\n\n"
        f"{dx.VARIES}\n```console\n$ tracekit info nosuch.sqlite\n```\n\n"
        "```console\n$ tracekit info nosuch.sqlite; echo $?\n"
        "error: nosuch.sqlite: no such file\n2\n```\n\n"
        "```console\n$ tracekit info nosuch.sqlite\nerror: nosuch.sqlite: no such file\n"
        "$ echo $?\n2\n```\n",
    )
    assert varies.mode == failing.mode == "varies" and shown.mode == "compare"
    assert dx.problems(varies, dx.run(varies)) == []
    (problem,) = dx.problems(failing, dx.run(failing))
    assert "`tracekit info nosuch.sqlite` exited 2" in problem
    assert dx.problems(shown, dx.run(shown)) == []
    assert dx.problems(next_line, dx.run(next_line)) == []


def test_skip_and_missing_shared_traces_are_not_run(tmp_path: Path) -> None:
    """A block marked skip is not run; one naming ../shared/traces runs only where the folder
    is; neither reaches the runner."""
    skipped, shared = _doc(
        tmp_path,
        f"{dx.SKIP}\n```console\n$ nsys export --type sqlite report1.nsys-rep\n```\n\n"
        "```console\n$ tracekit info ../shared/traces/nvidia/x.sqlite\n```\n",
    )
    assert dx.runnable(skipped) == "marked skip"
    assert dx.runnable(shared, root=tmp_path) == "../shared/traces is not here"
    assert dx.run_all([skipped, shared], root=tmp_path) == {}


def test_written_files_stay_out_of_the_root(tmp_path: Path) -> None:
    """A block writes a file and reads it back; the file never appears in the repository."""
    before = sorted(p.name for p in ROOT.iterdir())
    (example,) = _doc(
        tmp_path,
        "```console\n$ tracekit convert tracekit/data/demo.sqlite -o tk-example.parquet\n"
        "wrote tk-example.parquet (2,328 events)\n$ tracekit info tk-example.parquet | head -1\n"
        "…\n```\n",
    )
    outcome = dx.run(example)
    assert dx.problems(example, outcome) == []
    assert outcome.outputs[1] == ["source    demo.sqlite"]  # the saved timeline keeps its source
    assert sorted(p.name for p in ROOT.iterdir()) == before
