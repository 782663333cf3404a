"""The columns of the ``step_metrics`` table, and one label table for them that every
rendering (terminal, Markdown, the diff) takes its headings and names from."""

from __future__ import annotations

from typing import NamedTuple

from tracekit.taxonomy import CATEGORIES

METRIC_COLUMNS = (
    "rank",
    "device",
    "step",
    "phase",
    "tokens",
    "start",
    "dur",
    "ns_per_token",
    "busy_ns",
    "idle_ns",
    "compute_ns",
    "comm_ns",
    "exposed_comm_ns",
    "sync_wait_ns",
    "stream_wait_ns",
    "comm_overlap_ratio",
    "fallback_ns",
    "fallback_share",
    "fused_comm_ns",
    "bubble_ns",
    "bubble_count",
    "largest_bubble_ns",
    "comm_bubble_ns",
    *(f"cat_{c}_ns" for c in CATEGORIES),
)


# what the roofline adds per step (tracekit.metrics.roofline): not computed by step_metrics
ROOFLINE_COLUMNS = ("roofline_ns", "shaped_share", "bound")


class Label(NamedTuple):
    """How a column is shown: ``heading`` over a table column, ``text`` in a sentence."""

    heading: str
    text: str


LABELS: dict[str, Label] = {
    "rank": Label("rank", "rank"),
    "device": Label("dev", "device"),
    "step": Label("step", "step"),
    "phase": Label("phase", "phase"),
    "tokens": Label("tokens", "tokens"),
    "dur": Label("dur", "step time"),
    "ns_per_token": Label("per token", "time per token"),
    "busy_ns": Label("busy", "busy time"),
    "idle_ns": Label("idle", "idle time"),
    "compute_ns": Label("compute", "compute time"),
    "comm_ns": Label("comm", "communication time"),
    "exposed_comm_ns": Label("exposed", "exposed communication"),
    "sync_wait_ns": Label("sync wait", "waiting for other ranks at collectives"),
    # the device idle while a stream was blocked on an event (another stream's record, a host
    # callback): the idle time the waits explain (tracekit.metrics.stream_waits)
    "stream_wait_ns": Label("stream wait", "device idle while a stream waited on an event"),
    "comm_overlap_ratio": Label("overlap", "compute-communication overlap"),
    "fallback_ns": Label("fallback", "fallback kernel time"),
    "fallback_share": Label("fallback share", "fallback share of compute"),
    "fused_comm_ns": Label("fused comm", "fused communication time"),
    "bubble_ns": Label("bubbles", "idle bubbles"),
    "bubble_count": Label("bubble count", "idle bubble count"),
    "largest_bubble_ns": Label("largest bubble", "largest idle bubble"),
    "comm_bubble_ns": Label("comm bubbles", "communication-only stretches"),
    # tracekit.metrics.roofline: the summed roofline bounds of the step's rows with shapes, their
    # share of the step's device time, and whether memory or compute bounds most of it
    "roofline_ns": Label("roofline", "roofline bound of the rows with shapes"),
    "shaped_share": Label("shaped", "share of device time with shapes"),
    "bound": Label("bound", "what bounds the step's roofline"),
}
