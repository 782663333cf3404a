"""What a parser is: :class:`Parser` (how to recognise a format, how to read it)."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tracekit.parsers.probe import Probe
    from tracekit.timeline import Timeline

Progress = Callable[[str], None]
STRICT_ENV = "TRACEKIT_STRICT"


def strict() -> bool:
    """Whether a trace cut short is refused (``TRACEKIT_STRICT=1``, set by ``--strict``)
    rather than read up to the cut, with a warning."""
    return os.environ.get(STRICT_ENV) == "1"


@dataclass(frozen=True)
class Parser:
    """A trace format: how to recognise it from content and how to read it."""

    name: str
    description: str
    sniff: Callable[[Probe], bool]
    parse: Callable[..., Timeline]


def cut_short_warning(
    name: str, what: str, how: str | None, kept: int, unit: str, dropped: int, ends: str = ""
) -> str:
    """The one warning line of a ``what`` (trace, file) read up to a cut: ``how`` it ends,
    how many complete ``unit`` s (events, rows) were kept, the bytes of the one the cut went
    through, and ``ends`` (where the kept ones end), the same words for every format."""
    told = f" ({how})" if how else ""
    return (
        f"{name}: the {what} is cut short{told}: kept its {kept:,} complete {unit}s, dropped"
        f" {dropped:,} bytes of the {unit} the cut went through{ends}; the last step may be"
        " incomplete (TRACEKIT_STRICT=1 or --strict refuses it)"
    )
