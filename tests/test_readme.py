"""The README stays a short front page: at most 150 lines, the two set-up commands exactly
as the project card names them, and links that lead to pages of the documentation site."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
SET_UP = (
    "```sh\npip install -e . && tracekit demo\n```",
    '```sh\npip install -e ".[test]" && TRACEKIT_REAL_TRACES=../shared/traces'
    " python -m pytest\n```",
)


def test_the_readme_is_short() -> None:
    assert len(README.splitlines()) <= 150


def test_the_two_set_up_commands_are_there_as_written() -> None:
    for block in SET_UP:
        assert README.count(block) == 1
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "python -m pytest" in ci and "TRACEKIT_REAL_TRACES" in ci


def test_every_local_link_leads_to_a_file() -> None:
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README)
    local = [link for link in links if "://" not in link]
    assert len(local) >= 10  # the guides, architecture, changelog, the screenshot
    assert [link for link in local if not (ROOT / link).exists()] == []
