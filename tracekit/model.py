"""What the stages hand each other: the :class:`Context` a rule reads and the
:class:`Finding` it returns, the :class:`Check` of tracekit's own numbers, and the order of
severities and of check statuses (most severe first)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import polars as pl

from tracekit.stack import Stack
from tracekit.steps.model import Steps

SEVERITIES = ("error", "warning", "info")  # most severe first
STATUSES = ("fail", "warn", "pass", "skip")  # most severe first; skip: nothing to check
QUIET = ("pass", "skip")  # statuses that need no attention (``tracekit check`` exits 0)
NO_DEVICE = "no device work in this trace"


def severity_rank(severity: str) -> int:
    """0 for the most severe; a severity tracekit does not know ranks after all others."""
    return SEVERITIES.index(severity) if severity in SEVERITIES else len(SEVERITIES)


@dataclass
class Finding:
    """One pattern a rule found, across the steps and ranks where it occurs: what it costs
    over the whole trace and what to do about it.

    ``pattern`` is a stable key within the rule (the same fallback chain, the same exposed
    collective, the same bubble cause between the same two kernels …): two traces' findings
    with equal ``(rule, pattern)`` describe the same thing. ``steps`` and ``ranks`` list
    where it occurs; ``impact_ns`` is the most that fixing it could save over the trace (each
    rule documents its formula) and ``impact_share`` that time over the summed step time;
    ``stats`` holds per-step statistics of its metrics (``{"median", "p90", "max"}`` each);
    ``step``/``rank``/``device`` name the worst step, whose ``metrics`` and ``evidence`` are
    given; ``advice`` says what to change. ``warm_up`` marks a pattern seen only in the
    trace's first steps (start-up cost, not the steady state): info, ranked after the others.
    """

    rule: str
    severity: str
    title: str
    detail: str
    step: int | None = None
    rank: int | None = None
    device: int | None = None
    metrics: dict[str, float | int | None] = field(default_factory=dict)
    evidence: dict[str, Any] = field(default_factory=dict)
    pattern: str = ""
    steps: list[int] = field(default_factory=list)
    ranks: list[int] = field(default_factory=list)
    impact_ns: int = 0
    impact_share: float | None = None
    stats: dict[str, dict[str, float]] = field(default_factory=dict)
    advice: str = ""
    warm_up: bool = False

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return asdict(self)


# The pattern of a finding that sums a rule's patterns beyond its limit (its
# ``max_patterns`` option): not one thing to fix, so it ranks after every other finding.
FOLDED = "(folded)"


def ranked(findings: list[Finding]) -> list[Finding]:
    """Findings by impact, largest first; ties by severity, rule and pattern; warm-up
    patterns after the steady state's, and the findings that fold a rule's smallest
    patterns (pattern :data:`FOLDED`) last."""
    return sorted(
        findings,
        key=lambda f: (
            f.pattern == FOLDED,
            f.warm_up,
            -f.impact_ns,
            severity_rank(f.severity),
            f.rule,
            f.pattern,
        ),
    )


@dataclass
class Context:
    """What a rule reads: every row with taxonomy columns, the device work rows with their
    ``step``, those rows cut to their step's window, the step windows and metrics, how
    steps were found, and the collectives matched across ranks with their waits
    (:func:`tracekit.metrics.waits.collectives`), the ranks' clock offsets and the software
    ``stack`` the trace shows (advice names only what it holds) and its ``roofline`` (work
    and bound of the rows with shapes: :mod:`tracekit.metrics.roofline`).

    A cluster merged from per-rank results has empty ``rows``, ``work``, ``in_windows`` and
    no ``steps``: rules that need rows return nothing there.

    ``cut`` is the cut rows, or what makes them on each read of :attr:`in_windows` (at 10M
    rows they are 0.3 GB that the rules which do not read them would run beside)."""

    rows: pl.DataFrame
    work: pl.DataFrame
    cut: pl.DataFrame | Callable[..., pl.DataFrame]
    windows: pl.DataFrame
    step_metrics: pl.DataFrame
    steps: Steps | None
    meta: dict[str, Any]
    collectives: pl.DataFrame = field(default_factory=pl.DataFrame)
    clocks: pl.DataFrame = field(default_factory=pl.DataFrame)
    stack: Stack = field(default_factory=Stack)
    # a tracekit.metrics.roofline.Roofline (metrics sit above this module: not imported)
    roofline: Any = None
    memo: dict[Any, Any] = field(default_factory=dict)  # what several rules compute alike

    def shared(self, key: Any, make: Callable[[], Any]) -> Any:
        """``make()``, computed once per context and ``key``: rules that need the same
        derived frame (the unfused GEMM + collective pairs) share it."""
        if key not in self.memo:
            self.memo[key] = make()
        return self.memo[key]

    @property
    def in_windows(self) -> pl.DataFrame:
        """The work rows cut to their step's window."""
        return self.cut() if callable(self.cut) else self.cut

    def in_windows_of(self, columns: list[str]) -> pl.DataFrame:
        """:attr:`in_windows`, only ``columns`` (with ``rank, device, step, ts, dur``): the cut
        copies the rows it keeps, so a rule that reads a few columns asks for those."""
        if callable(self.cut):
            return self.cut(columns)
        return self.cut.select([c for c in columns if c in self.cut.columns])


@dataclass(frozen=True)
class Check:
    """One verification: ``name`` (a stable id), ``status`` (``fail``/``warn``/``pass``, or
    ``skip`` when its input is empty and it could verify nothing), one line of ``detail``, and
    the ``expected`` and ``actual`` numbers when there are any."""

    name: str
    status: str
    detail: str
    expected: float | int | str | None = None
    actual: float | int | str | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return asdict(self)


def skipped(name: str, why: str = NO_DEVICE) -> Check:
    """A check that had nothing to verify (``why``: what was missing), never a pass."""
    return Check(name, "skip", why)


def ordered(checks: list[Check]) -> list[Check]:
    """Failing checks first, then warnings, passes and skipped ones (each in the order made)."""
    return sorted(checks, key=lambda c: STATUSES.index(c.status))


def ns_text(value: float) -> str:
    """``14,472,221 ns``: a check's exact number, never rounded to a unit."""
    return f"{value:,.0f} ns"
