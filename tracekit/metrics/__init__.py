"""Metrics of the work rows, below the rules: each computed by one function that the
analysis, the rules, the checks and the reports share.

:mod:`.steps` makes the ``step_metrics`` table (one row per rank, device and step) and its
per-phase summary; :mod:`.streams` busy time per stream, overlap per pair of streams and
communication exposure; :mod:`.bubbles` idle gaps inside steps and their causes;
:mod:`.columns` the table's columns and their labels. The definitions they share are here.
"""

from __future__ import annotations

import polars as pl

KEY = ["rank", "device", "step"]
DEVICE = ["rank", "device"]
# Compute: every kernel that is not communication (copy kernels and fallbacks included; on
# Ascend this is the "Computing" of step_trace_time, on NVIDIA what HTA calls computation).
IS_COMPUTE = (pl.col("kind") == "kernel") & ~pl.col("is_comm")
MIN_BUBBLE_NS = 2_000
