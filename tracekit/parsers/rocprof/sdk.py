"""What the rocprofiler-sdk outputs (rocprofv3 CSV and JSON, rocpd) share: their clock, their
producer entry, and how their API rows are told from roctx ranges and marks."""

from __future__ import annotations

import numpy as np
import polars as pl

CLOCK = "CLOCK_BOOTTIME"
PRODUCER = "rocprofv3 (rocprofiler-sdk)"

# Marker domains whose rows are user annotations (the Function column holds the message)
MARKER_DOMAINS = ("MARKER_CORE_API", "MARKER_CORE_RANGE_API")
# roctx calls that are bookkeeping, not annotations, when they appear under a marker domain
ROCTX_CALLS = (
    "roctxRangePop",
    "roctxRangeStop",
    "roctxGetThreadId",
    "roctxProfilerPause",
    "roctxProfilerResume",
    "roctxNameOsThread",
    "roctxNameHsaAgent",
    "roctxNameHipDevice",
    "roctxNameHipStream",
)
API_KINDS = ("api", "range", "marker")  # the codes api_kinds returns: 0, 1, 2


def api_kinds(domain: pl.Series, name: pl.Series, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Per row a code into :data:`API_KINDS`: ``api``, ``range`` (a marker-domain row with a
    duration) or ``marker`` (start == end). String or Categorical columns."""
    codes = np.zeros(len(domain), dtype=np.int8)
    in_domain = domain.is_in(MARKER_DOMAINS).fill_null(False)
    if not in_domain.any():
        return codes
    marker = (in_domain & ~name.is_in(ROCTX_CALLS).fill_null(False)).to_numpy()
    codes[marker] = np.where(start[marker] == end[marker], 2, 1)
    return codes
