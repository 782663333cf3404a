"""Plain numbers about a timeline for `tracekit info` and `tracekit summary`.

Both functions return JSON-ready dicts; the reports only format them.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from tracekit.intervals import union_length
from tracekit.timeline import Timeline

BUSY_KINDS = ("kernel", "memcpy", "memset", "comm")


def device_rows(timeline: Timeline) -> pl.DataFrame:
    """Rows that occupy a device (kernels, copies, memsets, communication)."""
    return timeline.df.filter(pl.col("kind").cast(pl.String).is_in(BUSY_KINDS))


def info(timeline: Timeline) -> dict[str, Any]:
    """Format, producer, devices, event counts per kind, streams per device, span, warnings."""
    df = timeline.df
    meta = timeline.meta
    counts = df.group_by(pl.col("kind").cast(pl.String)).len().sort("kind")
    dev = device_rows(timeline)
    streams = (
        dev.group_by("device")
        .agg(pl.col("stream").unique().drop_nulls().sort())
        .sort("device")
        .rows()
    )
    span = df.select(start=pl.col("ts").min(), end=(pl.col("ts") + pl.col("dur")).max()).row(0)
    devices = list(meta.get("devices", []))
    described = {d.get("index") for d in devices}
    for device, _ in streams:
        if device not in described:  # rows on a device the trace does not describe
            devices.append({"index": device, "name": None})
    return {
        "source": meta.get("source"),
        "format": meta.get("format"),
        "producer": meta.get("producer"),
        "origin_ns": meta.get("origin_ns"),
        "devices": devices,
        "ranks": meta.get("ranks", []),
        "events": len(timeline),
        "events_per_kind": dict(counts.rows()),
        "streams_per_device": {str(d): list(s) for d, s in streams},
        "start_ns": span[0],
        "end_ns": span[1],
        "span_ns": None if span[0] is None else span[1] - span[0],
        "warnings": meta.get("warnings", []),
    }


def summary(timeline: Timeline, top: int = 15) -> dict[str, Any]:
    """Device busy time per kind and stream, and the top kernels by total time."""
    dev = device_rows(timeline).with_columns(pl.col("kind").cast(pl.String))
    total_device_ns = int(dev["dur"].sum() or 0)
    per_device = []
    for (device,), rows in dev.group_by(["device"], maintain_order=True):
        span_start = rows["ts"].min()
        span_end = (rows["ts"] + rows["dur"]).max()
        busy = int(union_length(rows)["busy"][0] or 0)
        per_device.append({
            "device": device,
            "span_ns": span_end - span_start,
            "busy_ns": busy,
            "utilization": busy / (span_end - span_start) if span_end > span_start else None,
        })  # fmt: skip
    per_device.sort(key=lambda r: r["device"])
    by_kind = (
        dev.group_by("kind")
        .agg(count=pl.len(), total_ns=pl.col("dur").sum())
        .join(union_length(dev, ["kind"]).rename({"busy": "busy_ns"}), on="kind")
    )
    by_stream = (
        dev.group_by("device", "stream")
        .agg(count=pl.len(), total_ns=pl.col("dur").sum())
        .join(union_length(dev, ["device", "stream"]), on=["device", "stream"], nulls_equal=True)
        .rename({"busy": "busy_ns"})
        .sort("device", "stream")
    )
    kernels = dev.filter(pl.col("kind").is_in(["kernel", "comm"]))
    top_kernels = (
        kernels.group_by("name")
        .agg(count=pl.len(), total_ns=pl.col("dur").sum(), mean_ns=pl.col("dur").mean())
        .with_columns(pl.col("name").cast(pl.String))
        .with_columns(share=pl.col("total_ns") / max(total_device_ns, 1))
        .sort(["total_ns", "name"], descending=[True, False])
        .head(top)
    )
    return {
        "source": timeline.meta.get("source"),
        "format": timeline.meta.get("format"),
        "device_time_ns": total_device_ns,
        "devices": per_device,
        "kinds": by_kind.sort("total_ns", descending=True).to_dicts(),
        "streams": by_stream.to_dicts(),
        "top_kernels": top_kernels.to_dicts(),
        "kernel_count": kernels.height,
        "warnings": timeline.meta.get("warnings", []),
    }
