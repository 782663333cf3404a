"""Decode-step segmentation: find the steps, place device rows in them, derive windows.

:func:`find_steps` tries the methods in order (:mod:`.find`); :func:`assign` places every
device row in a step (:mod:`.placement`); :func:`windows` gives each step's device window;
:func:`infer_phases` fills phases from the attention kernels where markers said nothing;
:func:`review` lowers the confidence where the result looks wrong.
"""

from tracekit.steps.confidence import review
from tracekit.steps.find import find_steps
from tracekit.steps.model import PHASES, WORK_KINDS, Steps
from tracekit.steps.phase import infer_phases
from tracekit.steps.placement import PLACEMENTS, assign, windows, work_rows

__all__ = [
    "PHASES",
    "PLACEMENTS",
    "WORK_KINDS",
    "Steps",
    "assign",
    "find_steps",
    "infer_phases",
    "review",
    "windows",
    "work_rows",
]
