"""The :class:`Rule` base class with typed, documented options; the :class:`Context` a rule
reads and the :class:`Finding` it returns are in :mod:`tracekit.model`."""

from __future__ import annotations

from typing import Any, ClassVar

from tracekit.errors import TraceError
from tracekit.model import Context, Finding


class Rule:
    """Base class: subclasses set ``id``, ``name``, ``options`` (defaults) and ``run``.

    The class docstring is the rule's documentation (``tracekit rules`` shows it): what it
    detects, why it matters, and a triggering and a clean example.
    """

    id: ClassVar[str] = ""
    name: ClassVar[str] = ""
    options: ClassVar[dict[str, Any]] = {}
    option_help: ClassVar[dict[str, str]] = {}

    def __init__(self, **overrides: Any) -> None:
        unknown = sorted(set(overrides) - set(self.options))
        if unknown:
            known = ", ".join(sorted(self.options)) or "none"
            raise TraceError(
                f"rule {self.id}: unknown option(s) {', '.join(unknown)}; known: {known}"
            )
        self.opts = dict(self.options)
        for key, value in overrides.items():
            self.opts[key] = _coerce(self.id, key, value, self.options[key])

    def run(self, ctx: Context) -> list[Finding]:
        """The findings of this rule on one analysed timeline."""
        raise NotImplementedError

    def finding(self, severity: str, title: str, detail: str, **fields: Any) -> Finding:
        """A :class:`Finding` of this rule."""
        return Finding(self.id, severity, title, detail, **fields)


def _coerce(rule: str, key: str, value: Any, default: Any) -> Any:
    """``value`` (maybe text from the command line) as the type of the option's default."""
    kind = type(default)
    try:
        if kind is bool and isinstance(value, str):
            if value.lower() not in ("true", "false", "1", "0", "yes", "no"):
                raise ValueError(value)
            return value.lower() in ("true", "1", "yes")
        if kind in (int, float) and isinstance(value, str):
            return kind(value.replace("_", ""))
        return kind(value)
    except (TypeError, ValueError):
        raise TraceError(
            f"rule {rule}: option {key} must be {kind.__name__}, got {value!r}"
        ) from None
