"""tracekit: make GPU/NPU profiler traces of LLM inference readable."""

from tracekit.errors import TraceError
from tracekit.load import load
from tracekit.timeline import Timeline

__all__ = ["Timeline", "TraceError", "load"]
__version__ = "0.1.0"
