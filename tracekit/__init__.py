"""tracekit: make GPU/NPU profiler traces of LLM inference readable."""

from tracekit.errors import TraceError
from tracekit.load import load
from tracekit.timeline import Timeline


def analyze(*args, **kwargs):  # type: ignore[no-untyped-def]
    """Analyse a timeline (see :func:`tracekit.analysis.analyze`); imported on first use."""
    from tracekit.analysis import analyze as run

    return run(*args, **kwargs)


def __getattr__(name: str) -> object:
    """``Analysis`` and ``Finding``, imported on first use (keeps ``import tracekit`` light)."""
    if name == "Analysis":
        from tracekit.analysis import Analysis

        return Analysis
    if name == "Finding":
        from tracekit.model import Finding

        return Finding
    raise AttributeError(f"module 'tracekit' has no attribute {name!r}")


__all__ = ["Analysis", "Finding", "Timeline", "TraceError", "analyze", "load"]
__version__ = "0.1.0"
