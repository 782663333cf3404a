"""Whether the roofline can be trusted: the trace recorded shapes, every device with shaped
rows matched an entry of the device table, and how much of the shaped time the formulas
bound only from above (paged KV caches read up to the block table's capacity)."""

from __future__ import annotations

import polars as pl

from tracekit.metrics.roofline import Roofline
from tracekit.model import Check, skipped

NAME = "roofline.devices"
# an operator faster than its bound by more than this is impossible: the device matched, its
# shapes or the formula is wrong (timer resolution on a µs-rounded trace stays well below)
IMPOSSIBLE = 1.1
MIN_IMPOSSIBLE_NS = 10_000  # ... judged over at least this much time per operator and shapes
NO_SHAPES = (
    "no operator shapes in the trace (PyTorch profiler record_shapes=True, torch_npu / msprof"
    " Input Shapes): no roofline"
)


def roofline_check(roof: Roofline) -> Check:
    """``warn`` where shaped rows run on a device with no entry in the device table or a name
    that fits several (their bounds are unknown or a guess), where operators ran faster than
    the roofline allows, or where bounds from above cover a large share of the shaped time;
    ``pass`` naming the matched devices; ``skip`` when no row has shapes. A warning lists
    every problem found, most severe first."""
    if not roof.shaped:
        return skipped(NAME, NO_SHAPES)
    ops = roof.operators
    time = ops["time_ns"].sum() or 0
    unbounded = ops.filter(pl.col("bound_ns").is_null())
    unmatched = int(unbounded["time_ns"].sum() or 0)
    names = sorted({d.name for d in roof.devices.values()})
    problems = list(roof.warnings)
    if not roof.devices and not problems:
        problems.append(
            "the trace names no device model: no bound; pass --device NAME (an id of"
            " tracekit/data/devices.toml)"
        )
    # work the shapes only bound from above may well beat its bound: not judged here
    fast = ops.filter(
        (pl.col("efficiency") > IMPOSSIBLE)
        & (pl.col("time_ns") >= MIN_IMPOSSIBLE_NS)
        & pl.col("exact")
    ).sort("efficiency", descending=True)
    if fast.height:
        top = fast.row(0, named=True)
        share = (fast["time_ns"].sum() or 0) / time if time else 0.0
        problems.append(
            f"{fast.height:,} operator shape(s) ({share:.0%} of the shaped time) ran faster than"
            f" the roofline of {', '.join(names)} allows (e.g. {top['op']} {top['shapes']} at"
            f" {top['efficiency']:.0%}): their data came from on-chip cache (L2, Infinity"
            " Cache) rather than HBM, or the device or the shapes are wrong; their efficiency"
            " says nothing of their kernel"
        )
    loose = ops.filter(~pl.col("exact"))["time_ns"].sum() or 0
    if loose and loose >= 0.25 * time:
        problems.append(
            f"{loose / time:.0%} of the shaped time has work bounded only from above by its"
            " shapes (e.g. a paged KV cache's capacity): efficiency there may be overstated"
        )
    detail = f"{ops['rows'].sum():,} shaped device rows, bounds on {', '.join(names) or 'none'}"
    if unmatched:
        dtypes = unbounded["dtype"].unique().sort()
        detail += (
            f"; {unmatched / time:.0%} of their time has no bound: the device table gives no"
            f" peak for {', '.join(d or '?' for d in dtypes.to_list())} there"
        )
    if problems:
        return Check(NAME, "warn", "; ".join(problems), expected=0, actual=len(problems))
    return Check(NAME, "pass", detail)
