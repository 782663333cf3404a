"""Plain numbers about a timeline for `tracekit info` and `tracekit summary`.

Both functions return JSON-ready dicts; the reports only format them.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from tracekit.intervals import union_length
from tracekit.timeline import Timeline, part_mask

BUSY_KINDS = ("kernel", "memcpy", "memset", "comm")
STREAM_KEYS = ["device", "pid", "stream"]


def device_rows(timeline: Timeline) -> pl.DataFrame:
    """Rows that occupy a device (kernels, copies, memsets, communication)."""
    return timeline.df.filter(pl.col("kind").is_in(BUSY_KINDS))


def info(timeline: Timeline) -> dict[str, Any]:
    """Format, producer, devices, event counts per kind, streams per device, span, warnings."""
    df = timeline.df
    meta = timeline.meta
    counts = df.group_by(pl.col("kind").cast(pl.String)).len().sort("kind")
    dev = device_rows(timeline)
    streams = (
        dev.group_by("device")
        .agg(pl.col("stream").unique().drop_nulls().sort())
        .sort("device", nulls_last=True)
        .rows()
    )
    span = df.select(start=pl.col("ts").min(), end=(pl.col("ts") + pl.col("dur")).max()).row(0)
    devices = _as_list(meta.get("devices"))
    described = {d.get("index") for d in devices if isinstance(d, dict)}
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
        "rank_source": meta.get("rank_source"),
        "events": len(timeline),
        "events_per_kind": dict(counts.rows()),
        "streams_per_device": {str(d): list(s) for d, s in streams},
        "start_ns": span[0],
        "end_ns": span[1],
        "span_ns": None if span[0] is None else span[1] - span[0],
        "warnings": meta.get("warnings", []),
    }


def summary(timeline: Timeline, top: int = 15) -> dict[str, Any]:
    """Device busy time per device, kind and stream, and the top kernels by total time.

    Busy time is the union of intervals on one device: per kind it is merged per
    (device, kind) and then summed over devices; per stream it is keyed by
    (device, pid, stream), since CUPTI stream ids are unique only within a process.
    Rows without a device (or pid, stream) form one group each, listed last.
    """
    dev = device_rows(timeline)
    # the kind's category code beside it: unions by (device, code) sort one packed integer
    dev = dev.with_columns(part_mask(dev), _kind=pl.col("kind").to_physical())
    total_device_ns = int(dev.select(pl.col("dur").filter(~pl.col("is_part")).sum()).item() or 0)
    end = pl.col("ts") + pl.col("dur")
    per_device = (
        dev.group_by("device")
        .agg(span_ns=end.max() - pl.col("ts").min())
        .join(union_length(dev, ["device"]), on="device", nulls_equal=True)
        .select(
            "device",
            "span_ns",
            busy_ns="busy",
            utilization=pl.when(pl.col("span_ns") > 0).then(pl.col("busy") / pl.col("span_ns")),
        )
        .sort("device", nulls_last=True)
    )
    by_kind = (
        dev.group_by("kind", "_kind")
        .agg(count=pl.len(), total_ns=pl.col("dur").sum())
        .join(_busy(dev, "_kind"), on="_kind")
        .select(pl.col("kind").cast(pl.String), "count", "total_ns", "busy_ns")
        .sort(["total_ns", "kind"], descending=[True, False])
    )
    by_stream = (
        dev.group_by(STREAM_KEYS)
        .agg(count=pl.len(), total_ns=pl.col("dur").sum())
        .join(union_length(dev, STREAM_KEYS), on=STREAM_KEYS, nulls_equal=True)
        .rename({"busy": "busy_ns"})
        .sort(STREAM_KEYS, nulls_last=True)
    )
    kernels = dev.filter(pl.col("kind").is_in(["kernel", "comm"]) & ~pl.col("is_part"))
    top_kernels = (
        kernels.group_by("name")
        .agg(count=pl.len(), total_ns=pl.col("dur").sum(), mean_ns=pl.col("dur").mean())
        .with_columns(pl.col("name").cast(pl.String))
        .with_columns(share=pl.col("total_ns") / max(total_device_ns, 1))
        .sort(["total_ns", "name"], descending=[True, False], nulls_last=True)
        .head(top)
    )
    return {
        "source": timeline.meta.get("source"),
        "format": timeline.meta.get("format"),
        "device_time_ns": total_device_ns,
        "devices": per_device.to_dicts(),
        "kinds": by_kind.to_dicts(),
        "streams": by_stream.to_dicts(),
        "top_kernels": top_kernels.to_dicts(),
        "kernel_count": kernels.height,
        "warnings": timeline.meta.get("warnings", []),
    }


def _busy(dev: pl.DataFrame, key: str) -> pl.DataFrame:
    """Busy ns per ``key``: the union per (device, key), summed over devices (``busy_ns``)."""
    per_device = union_length(dev, ["device", key])
    return per_device.group_by(key).agg(busy_ns=pl.col("busy").sum())


def _as_list(value: Any) -> list[Any]:
    """A metadata list as a new list (a saved timeline's JSON may hold anything)."""
    if isinstance(value, list):
        return list(value)
    return [] if value is None else [value]
