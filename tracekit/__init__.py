"""tracekit: make GPU/NPU profiler traces of LLM inference readable."""

from tracekit.errors import TraceError
from tracekit.load import load
from tracekit.timeline import Timeline


def analyze(*args, **kwargs):  # type: ignore[no-untyped-def]
    """Analyse a timeline (see :func:`tracekit.analysis.analyze`); imported on first use."""
    from tracekit.analysis import analyze as run

    return run(*args, **kwargs)


__all__ = ["Timeline", "TraceError", "analyze", "load"]
__version__ = "0.1.0"
