"""What a parser is: :class:`Parser` (how to recognise a format, how to read it)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tracekit.parsers.probe import Probe
    from tracekit.timeline import Timeline

Progress = Callable[[str], None]


@dataclass(frozen=True)
class Parser:
    """A trace format: how to recognise it from content and how to read it."""

    name: str
    description: str
    sniff: Callable[[Probe], bool]
    parse: Callable[..., Timeline]
