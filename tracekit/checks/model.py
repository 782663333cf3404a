"""What tracekit says about its own numbers: one :class:`Check` per thing it verified."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

STATUSES = ("fail", "warn", "pass")  # most severe first


@dataclass(frozen=True)
class Check:
    """One verification: ``name`` (a stable id), ``status`` (``pass``/``warn``/``fail``), one
    line of ``detail``, and the ``expected`` and ``actual`` numbers when there are any."""

    name: str
    status: str
    detail: str
    expected: float | int | str | None = None
    actual: float | int | str | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return asdict(self)


def ns_text(value: float) -> str:
    """``14,472,221 ns``: a check's exact number, never rounded to a unit."""
    return f"{value:,.0f} ns"


def ordered(checks: list[Check]) -> list[Check]:
    """Failing checks first, then warnings, then passes (each in the order made)."""
    return sorted(checks, key=lambda c: STATUSES.index(c.status))
