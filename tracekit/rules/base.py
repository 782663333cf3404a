"""What every rule shares: the :class:`Finding` it returns, the :class:`Context` it reads,
and the :class:`Rule` base class with typed, documented options."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

import polars as pl

from tracekit.errors import TraceError
from tracekit.steps import Steps

SEVERITIES = ("info", "warning", "error")


@dataclass
class Finding:
    """One thing a rule found: where (rank, device, step), how bad, and the evidence."""

    rule: str
    severity: str
    title: str
    detail: str
    step: int | None = None
    rank: int | None = None
    device: int | None = None
    metrics: dict[str, float | int | None] = field(default_factory=dict)
    evidence: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return asdict(self)


@dataclass
class Context:
    """What a rule reads: every row with taxonomy columns, the device work rows with their
    ``step``, those rows cut to their step's window, the step windows and metrics, and how
    steps were found."""

    rows: pl.DataFrame
    work: pl.DataFrame
    in_windows: pl.DataFrame
    windows: pl.DataFrame
    step_metrics: pl.DataFrame
    steps: Steps
    meta: dict[str, Any]


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

    def at_step(self, row: dict[str, Any], severity: str, title: str, detail: str,
                metrics: dict[str, Any], evidence: dict[str, Any]) -> Finding:  # fmt: skip
        """A finding about the (rank, device, step) of ``row``."""
        return Finding(self.id, severity, title, detail, step=row["step"], rank=row["rank"],
                       device=row["device"], metrics=metrics, evidence=evidence)  # fmt: skip


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
