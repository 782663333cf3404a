"""The rules tracekit knows: the built-in seven and any registered by other packages under
the entry-point group ``tracekit.rules`` (each entry point names a :class:`Rule` subclass)."""

from __future__ import annotations

import inspect
from importlib.metadata import entry_points
from typing import Any

from tracekit.errors import TraceError
from tracekit.rules.base import Rule
from tracekit.rules.bubbles import Bubbles
from tracekit.rules.efficiency import Efficiency
from tracekit.rules.fallback import Fallback
from tracekit.rules.mc2 import Mc2
from tracekit.rules.overlap import Overlap
from tracekit.rules.stragglers import Stragglers
from tracekit.rules.transfers import Transfers

BUILTIN: tuple[type[Rule], ...] = (
    Overlap,
    Fallback,
    Mc2,
    Bubbles,
    Stragglers,
    Transfers,
    Efficiency,
)
GROUP = "tracekit.rules"


def available() -> dict[str, type[Rule]]:
    """Rule id -> class: built-in rules first, then plugins (a plugin cannot replace one)."""
    rules = {rule.id: rule for rule in BUILTIN}
    for point in entry_points(group=GROUP):
        try:
            rule = point.load()
        except Exception as exc:  # a broken plugin must not break tracekit
            raise TraceError(
                f"rule plugin {point.name!r} ({point.value}) failed to load: "
                f"{type(exc).__name__}: {exc}"
            ) from None
        if not (isinstance(rule, type) and issubclass(rule, Rule) and rule.id):
            raise TraceError(
                f"rule plugin {point.name!r} ({point.value}) is not a Rule subclass with an id"
            )
        rules.setdefault(rule.id, rule)
    return rules


def select(ids: list[str] | None, options: dict[str, dict] | None = None) -> list[Rule]:
    """Instances of the rules ``ids`` (all when None) with their ``options``."""
    known = available()
    ids = list(known) if ids is None else ids
    unknown = [i for i in ids if i not in known]
    if unknown:
        raise TraceError(f"unknown rule(s) {', '.join(unknown)}; known: {', '.join(known)}")
    options = options or {}
    stray = sorted(set(options) - set(ids))
    if stray:
        raise TraceError(f"options given for rule(s) not selected: {', '.join(stray)}")
    return [known[i](**options.get(i, {})) for i in ids]


def describe(rule: type[Rule]) -> dict[str, Any]:
    """What ``tracekit rules`` and the reference page show of a rule: ``id``, ``name``, its
    docstring (``doc``, dedented) and each option's ``default`` and ``help``."""
    options = {
        k: {"default": v, "help": rule.option_help.get(k, "")} for k, v in rule.options.items()
    }
    doc = inspect.cleandoc(rule.__doc__ or "")
    return {"id": rule.id, "name": rule.name, "doc": doc, "options": options}
