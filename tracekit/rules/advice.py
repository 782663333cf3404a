"""What to do about a finding: the texts of ``tracekit/data/advice.toml`` by rule, pattern
kind and vendor (the file documents its layout)."""

from __future__ import annotations

import sys
from functools import cache
from importlib import resources
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

ANY = "any"  # the table of a rule the file does not list
DEFAULT = "default"


@cache
def table() -> dict[str, dict[str, dict[str, str]]]:
    """The advice table: rule -> kind -> vendor (or ``default``) -> text, read once."""
    text = resources.files("tracekit.data").joinpath("advice.toml").read_text("utf-8")
    doc: dict[str, Any] = tomllib.loads(text)
    return doc


def advice(rule: str, kind: str, vendor: str | None) -> str:
    """The advice for a finding of ``rule`` whose pattern is of ``kind`` on ``vendor``'s
    hardware: that vendor's text, else the kind's ``default``, else the rule's ``default``
    kind, else the text for any rule."""
    texts = table()
    kinds = texts.get(rule) or texts[ANY]
    entry = kinds.get(kind) or kinds.get(DEFAULT) or texts[ANY][DEFAULT]
    return entry.get(vendor or DEFAULT) or entry[DEFAULT]
