"""tracekit: make GPU/NPU profiler traces of LLM inference readable."""

from __future__ import annotations

import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from tracekit.errors import TraceError

if TYPE_CHECKING:
    from tracekit.timeline import Timeline


def load(
    path: str | Path, format: str | None = None, progress: Callable[[str], None] | None = None
) -> Timeline:
    """Read a trace into a :class:`Timeline` (see :func:`tracekit.load.load`); the readers,
    pyarrow and polars are imported on first use, so ``import tracekit`` stays light."""
    from tracekit.load import load as run

    return run(path, format, progress)


class _Package(types.ModuleType):
    """The package's module type: importing the submodule ``tracekit.load`` leaves the
    attribute ``tracekit.load`` the function, as an eager ``from tracekit.load import load``
    did."""

    def __setattr__(self, name: str, value: object) -> None:
        if name == "load" and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


def analyze(*args, **kwargs):  # type: ignore[no-untyped-def]
    """Analyse a timeline (see :func:`tracekit.analysis.analyze`); imported on first use."""
    from tracekit.analysis import analyze as run

    return run(*args, **kwargs)


def __getattr__(name: str) -> object:
    """``Analysis``, ``Finding`` and ``Timeline``, imported on first use (keeps ``import
    tracekit`` light)."""
    if name == "Analysis":
        from tracekit.analysis import Analysis

        return Analysis
    if name == "Timeline":
        from tracekit.timeline import Timeline

        return Timeline
    if name == "Finding":
        from tracekit.model import Finding

        return Finding
    raise AttributeError(f"module 'tracekit' has no attribute {name!r}")


__all__ = ["Analysis", "Finding", "Timeline", "TraceError", "analyze", "load"]
__version__ = "0.1.0"
