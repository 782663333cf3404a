"""What to do about a finding: the texts of ``tracekit/data/advice.toml`` by rule, pattern
kind, vendor and software stack (the file documents its layout)."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from tracekit.stack import specs

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

ANY = "any"  # the table of a rule the file does not list, and the vendor of a stack key
DEFAULT = "default"
VENDORS = ("nvidia", "amd", "ascend")


@dataclass(frozen=True)
class Key:
    """What a text's key asks of a trace: a vendor (None: any) and stack component ids."""

    vendor: str | None
    needs: frozenset[str]


@cache
def table() -> dict[str, dict[str, dict[str, str]]]:
    """The advice table: rule -> kind -> key -> text, read once."""
    text = resources.files("tracekit.data").joinpath("advice.toml").read_text("utf-8")
    doc: dict[str, Any] = tomllib.loads(text)
    return doc


@cache
def parse_key(key: str) -> Key:
    """The :class:`Key` of ``default``, a vendor, or ``<vendor|any>+<id>[+<id>…]``; a
    ValueError for anything else (an unknown vendor or component id)."""
    vendor, *ids = key.split("+")
    if key == DEFAULT:
        return Key(None, frozenset())
    if vendor not in (*VENDORS, ANY) or (vendor == ANY and not ids):
        raise ValueError(f"advice key {key!r}: want default, a vendor or <vendor|any>+<id>")
    known = {s.id for s in specs()}
    unknown = sorted(set(ids) - known)
    if unknown:
        raise ValueError(f"advice key {key!r}: unknown stack component(s) {', '.join(unknown)}")
    return Key(None if vendor == ANY else vendor, frozenset(ids))


def _engines() -> frozenset[str]:
    return frozenset(s.id for s in specs() if s.layer == "engine")


def choose(entry: dict[str, str], vendor: str | None, stack: frozenset[str]) -> str:
    """The text of ``entry`` for a trace of ``vendor`` with the component ids ``stack``:
    among the keys whose vendor and ids match, the one naming the most engines, then the
    most components, then a vendor's over ``any``, then the first listed."""
    engines = _engines()
    best: tuple[int, int, int, int] | None = None
    chosen = entry[DEFAULT]
    for position, (name, text) in enumerate(entry.items()):
        key = parse_key(name)
        if (key.vendor is not None and key.vendor != vendor) or not key.needs <= stack:
            continue
        score = (len(key.needs & engines), len(key.needs), key.vendor is not None, -position)
        if best is None or score > best:
            best, chosen = score, text
    return chosen


def advice(rule: str, kind: str, vendor: str | None, stack: frozenset[str] = frozenset()) -> str:
    """The advice for a finding of ``rule`` whose pattern is of ``kind`` on ``vendor``'s
    hardware with the software ``stack`` (component ids): the kind's table, else the rule's
    ``default`` kind, else the table for any rule; within it, :func:`choose`."""
    texts = table()
    kinds = texts.get(rule) or texts[ANY]
    entry = kinds.get(kind) or kinds.get(DEFAULT) or texts[ANY][DEFAULT]
    return choose(entry, vendor, stack)
