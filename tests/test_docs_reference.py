"""The reference pages are generated from the code (issue 35, item 2): every command of the
typer app and every registered rule (a plugin's too) is on its page, the schema page lists
the timeline's columns, kinds and metadata, and the MkDocs hook adds the three pages."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Annotated, Any, ClassVar

import pytest
import typer
import typer.main

import tracekit.rules.registry as registry
from tracekit import taxonomy, timeline
from tracekit.cli import app
from tracekit.rules.base import Rule

ROOT = Path(__file__).resolve().parents[1]
_SPEC = importlib.util.spec_from_file_location("reference", ROOT / "docs/hooks/reference.py")
assert _SPEC and _SPEC.loader
ref = importlib.util.module_from_spec(_SPEC)
sys.modules["reference"] = ref
_SPEC.loader.exec_module(ref)


def _headings(page: str) -> list[str]:
    return re.findall(r"^## `([^`]+)`", page, flags=re.M)


def _table_rows(page: str, heading: str) -> list[str]:
    """The table lines of the section under ``## `heading```."""
    section = page.split(f"## `{heading}`", 1)[1].split("\n## ", 1)[0]
    return [line for line in section.splitlines() if line.startswith("| `")]


def test_every_command_and_option_is_on_the_cli_page() -> None:
    """One section per command of the app (13 with the global options), in the order of
    ``tracekit --help``, each listing every argument and option of the command."""
    root = typer.main.get_command(app)
    page = ref.cli_page()
    names = ["tracekit", *(f"tracekit {n}" for n in root.list_commands(None))]  # type: ignore[arg-type]
    assert _headings(page) == names
    assert len(names) == 13
    for name in names:
        command = root if name == "tracekit" else root.commands[name.split()[1]]
        rows = _table_rows(page, name)
        assert len(rows) == len([p for p in command.params if not p.hidden]), name
        for param, row in zip(command.params, rows):
            first = param.name.upper() if param.param_type_name == "argument" else param.opts[0]
            assert row.startswith(f"| `{first}`"), (name, row)


def test_cli_page_values() -> None:
    """Types, defaults, environment variables and the example line, as the app defines them."""
    page = ref.cli_page()
    summary = _table_rows(page, "tracekit summary")
    assert summary[0] == (
        "| `TRACE` | path | required |  | Trace file (nsys .sqlite/.nsys-rep, ...). |"
    )
    assert "| `--top` | int ≥ 1 | `15` |  | How many kernels to list. |" in summary
    assert any(r.startswith("| `--option`, `-O` | text (repeatable) | — |") for r in summary)
    demo = _table_rows(page, "tracekit demo")
    assert any(r.startswith("| `--html`, `--no-html` | flag | `--html` |") for r in demo)
    assert any("`tracekit-demo.html`" in r for r in demo)
    top = _table_rows(page, "tracekit")
    assert any(r.startswith("| `--max-memory` | text | — | `TRACEKIT_MAX_MEMORY` |") for r in top)
    cluster = _table_rows(page, "tracekit cluster")
    assert any("`TRACEKIT_SCHEDULER`" in r and r.startswith("| `--scheduler`") for r in cluster)
    assert "Usage: tracekit report [OPTIONS] TRACES..." in page
    assert "Usage: tracekit diff [OPTIONS] BASE HEAD" in page
    section = page.split("## `tracekit convert`", 1)[1].split("\n## ", 1)[0]
    assert "```sh\ntracekit convert tracekit/data/demo.sqlite -o demo.parquet\n```" in section


def test_a_planted_command_appears(monkeypatch: pytest.MonkeyPatch) -> None:
    """A command added to the app is on the page, with its option, help and example."""
    monkeypatch.setattr(app, "registered_commands", list(app.registered_commands))

    def planted(
        level: Annotated[int, typer.Option("--level", help="How | deep.")] = 3,
    ) -> None:
        """A planted command <for> the test."""

    app.command(name="planted", epilog="Example: tracekit planted --level 2")(planted)
    page = ref.cli_page()
    assert _headings(page)[-1] == "tracekit planted"
    assert _table_rows(page, "tracekit planted") == ["| `--level` | int | `3` |  | How \\| deep. |"]
    assert "A planted command &lt;for&gt; the test." in page
    assert "```sh\ntracekit planted --level 2\n```" in page


def test_every_registered_rule_is_on_the_rules_page() -> None:
    """The seven built-in rules, each with its docstring and every option's default."""
    rules = registry.available()
    page = ref.rules_page()
    assert _headings(page) == list(rules) == [
        "overlap", "fallback", "mc2", "bubbles", "stragglers", "transfers", "efficiency"
    ]  # fmt: skip
    assert "7 rules" in page
    for rule_id, rule in rules.items():
        assert f"## `{rule_id}`: {rule.name} {{#{rule_id}}}" in page
        first = rule.__doc__.strip().splitlines()[0]
        assert ref.md_text(first) in page
        for key, value in rule.options.items():
            assert f"| `{rule_id}.{key}` | `{value!r}` |" in page
    options = sum(len(rule.options) for rule in rules.values())
    assert len(re.findall(r"^\| `", page, flags=re.M)) == options  # one row per option


class Planted(Rule):
    """Planted rule: detects <nothing> and says so.

    Triggers: never. Clean: always.
    """

    id: ClassVar[str] = "planted"
    name: ClassVar[str] = "planted rule"
    options: ClassVar[dict[str, Any]] = {"limit_ns": 5000}
    option_help: ClassVar[dict[str, str]] = {"limit_ns": "a limit | in ns"}


class _Point:
    name, value = "planted", "tests:Planted"

    @staticmethod
    def load() -> type[Rule]:
        return Planted


def test_a_plugin_rule_appears(monkeypatch: pytest.MonkeyPatch) -> None:
    """A rule registered under the entry-point group (a plugin) is on the page after the
    built-in ones, its docstring escaped and its option documented."""
    monkeypatch.setattr(registry, "entry_points", lambda group: [_Point()])
    page = ref.rules_page()
    assert _headings(page)[-1] == "planted"
    assert "8 rules" in page
    assert "Planted rule: detects &lt;nothing&gt; and says so." in page
    assert "| `planted.limit_ns` | `5000` | a limit \\| in ns |" in page


def test_the_schema_page_is_the_code_schema() -> None:
    """Every column with its Arrow type and a meaning, every kind, every metadata key; the
    meanings cover exactly the code's columns, kinds and keys."""
    page = ref.schema_page()
    assert set(ref.COLUMN_MEANING) == set(timeline.COLUMNS)
    assert set(ref.KIND_MEANING) == set(timeline.KINDS)
    assert set(ref.META_MEANING) == set(timeline.empty_meta())
    assert "| `ts` | `int64` | never | start, ns since the trace origin" in page
    assert "| `kind` | `dictionary<string>` | yes | what the row is" in page
    assert "| `comm` | yes | yes |" in page and "| `sync` | yes |  |" in page
    assert "| `api` |  |  |" in page
    rows = [line for line in page.splitlines() if line.startswith("| `")]
    assert len(rows) == len(timeline.COLUMNS) + len(timeline.KINDS) + len(timeline.empty_meta())
    assert len(rows) == 12 + 9 + 8
    assert all(f"`{c}`" in page for c in (*taxonomy.CATEGORIES, *taxonomy.FLAG_COLUMNS))


def test_the_site_builds_with_the_generated_pages(tmp_path: Path) -> None:
    """``mkdocs build --strict`` (as CI runs it) renders the generated pages with a section
    per command and per rule, and leaves docs/hooks/ out of the site."""
    pytest.importorskip("mkdocs", reason="the docs extra is not installed")
    if not (ROOT / "mkdocs.yml").exists():
        pytest.skip("no mkdocs.yml")
    site = tmp_path / "site"
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    cli = (site / "reference/cli/index.html").read_text(encoding="utf-8")
    root = typer.main.get_command(app)
    for name in ["tracekit", *(f"tracekit-{n}" for n in root.commands)]:
        assert f'id="{name}"' in cli, name
    rules = (site / "reference/rules/index.html").read_text(encoding="utf-8")
    assert all(f'id="{rule_id}"' in rules for rule_id in registry.available())
    assert (site / "reference/schema/index.html").exists()
    assert 'id="tracekit.load.load"' in (site / "reference/api/index.html").read_text()
    assert not (site / "hooks").exists()
