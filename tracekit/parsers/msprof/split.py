"""Where to cut a large timeline so that every process gets the same amount of work.

Bytes are a poor measure of it: a complete (``X``) event is decoded *and* read field by field
into its layer, while the HostToDevice flow events, a third of a torch_npu timeline and written
in one run, are only decoded and grouped. The events array is sampled in :data:`WINDOWS`
windows; each window's work is estimated from its bytes, its events and the share of them that
are complete (their fields, hence their bytes, are what a layer reads), and the cuts are
placed where the running total reaches each process's share.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

WINDOWS = 256
SAMPLE = 1 << 15  # bytes read from the middle of each window
# work in units of one byte of JSON decoded: an event is also grouped (per event), a complete
# event is also read into its layer (per byte; measured on the 1M-task torch_npu bench)
EVENT_COST = 80
COMPLETE_BYTE_COST = 1.4
_EVENT = re.compile(rb'"ph"\s*:')
_COMPLETE = re.compile(rb'"ph"\s*:\s*"X"')


def cuts(data: Any, count: int, head_extra: float) -> list[float] | None:
    """Fractions of ``data`` at which to cut it into ``count`` slices of equal work, the first
    one (the caller's own) with ``head_extra`` units less than the others; None when the first
    slice would be empty."""
    size = len(data)
    edges = np.linspace(0, size, WINDOWS + 1).astype(np.int64)
    work = np.zeros(WINDOWS)
    for k in range(WINDOWS):  # a fixed number of windows, not a loop over events
        middle = (edges[k] + edges[k + 1]) // 2
        start = max(0, middle - SAMPLE // 2)
        sample = bytes(data[start : min(size, start + SAMPLE)])
        if not sample:
            continue
        events = len(_EVENT.findall(sample))
        complete = len(_COMPLETE.findall(sample)) / max(events, 1)
        per_byte = 1 + EVENT_COST * events / len(sample) + COMPLETE_BYTE_COST * complete
        work[k] = per_byte * (edges[k + 1] - edges[k])
    total = np.concatenate([[0.0], np.cumsum(work)])
    head = (total[-1] - head_extra * (count - 1)) / count
    if head <= 0:
        return None
    targets = head + (total[-1] - head) * np.arange(count - 1) / max(count - 1, 1)
    return [float(x) for x in np.interp(targets, total, edges) / size]
