"""Parser registry: one module per profiler family, each exposing a :class:`Parser`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tracekit.load import Probe
    from tracekit.timeline import Timeline

Progress = Callable[[str], None]


@dataclass(frozen=True)
class Parser:
    """A trace format: how to recognise it from content and how to read it."""

    name: str
    description: str
    sniff: Callable[[Probe], bool]
    parse: Callable[..., Timeline]


def registry() -> list[Parser]:
    """All built-in parsers, most specific first."""
    from tracekit.parsers import kineto, msprof, nsys, perfetto, rocprof, saved

    return [
        nsys.SQLITE,
        rocprof.RPD,
        rocprof.ROCPD,
        *rocprof.LEGACY_PARSERS,
        nsys.REPORT,
        perfetto.PERFETTO,
        rocprof.ROCPROFV3_JSON,
        rocprof.ROCPROFV3_CSV,
        rocprof.RPD_JSON,
        msprof.MSPROF_DB,
        msprof.MSPROF,
        kineto.KINETO,
        saved.PARQUET,
        saved.ARROW,
    ]
