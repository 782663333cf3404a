"""``analyze()``: taxonomy + steps + metrics + rules + checks -> :class:`Analysis`.

:mod:`.pipeline` runs the stages; :mod:`.result` holds what they produce.
"""

from tracekit.analysis.pipeline import analyze
from tracekit.analysis.result import Analysis, steps_summary

__all__ = ["Analysis", "analyze", "steps_summary"]
