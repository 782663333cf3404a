"""The roofline of shaped rows: each row's bound on its device, ``max(FLOPs / peak, bytes /
bandwidth)``; per operator and shapes the achieved TFLOP/s and GB/s, arithmetic intensity,
efficiency (bound / time) and headroom (time - bound); per step ``roofline_ns``,
``shaped_share`` and ``bound``.

Bounds are computed once per (combination, device) on the small table of distinct operator
shapes (:func:`tracekit.metrics.roofline.rows.shaped`), then scaled by each row's share.
"""

from __future__ import annotations

import polars as pl

from tracekit.metrics.roofline.devices import Device, listed

# A step is memory- (compute-) bound when rows limited by bandwidth (throughput) hold at least
# this share of its roofline time; "mixed" otherwise.
BOUND_SHARE = 0.7
LIMIT_SCHEMA = {
    "device": pl.Int32(),
    "dtype": pl.String(),
    "matrix": pl.Boolean(),
    "peak_tflops": pl.Float64(),
    "hbm_gbps": pl.Float64(),
}
# An operator whose bound per launch is under this moves too little data for bandwidth or
# throughput to set its time: a kernel's launch and fixed start-up cost a few µs on current
# GPUs and NPUs, so its limit is latency, and its efficiency says nothing about its kernel.
LATENCY_NS = 1_000
WORK_COLUMNS = ("rank", "device", "step", "stream", "name", "dur", "category")
SCALED = ("flops", "bytes", "compute_ns", "memory_ns", "bound_ns")


def _limits(keys: pl.DataFrame, devices: dict[int, Device]) -> pl.DataFrame:
    """Peak TFLOP/s and HBM GB/s per distinct (device, dtype, matrix) of ``keys``."""
    out = []
    for device, dtype, matrix in keys.select("device", "dtype", "matrix").unique().iter_rows():
        key = listed(device, devices)
        if key is None:
            continue
        part = devices[key]
        peak = part.peak_tflops(dtype, bool(matrix)) if dtype else None
        out.append((device, dtype, matrix, peak, part.hbm_gbps))
    return pl.DataFrame(out, schema=LIMIT_SCHEMA, orient="row")


def bounded_rows(
    hits: pl.DataFrame, combos: pl.DataFrame, work: pl.DataFrame, devices: dict[int, Device]
) -> pl.DataFrame:
    """Per shaped row (``hits`` of :func:`.rows.shaped` on ``work``): its work columns
    (:data:`WORK_COLUMNS`), ``combo``, and its share of its operator's FLOPs, bytes,
    ``compute_ns`` (FLOPs at the peak of its dtype), ``memory_ns`` (bytes at the HBM
    bandwidth) and ``bound_ns`` (their maximum; null where its device has no entry)."""
    rows = pl.concat(
        [work.select(WORK_COLUMNS)[hits["_row"]], hits.select("combo", "_op", "share")],
        how="horizontal",
    )
    per = rows.select("combo", "device").unique()
    per = per.join(combos.select("combo", *SCALED[:2], "dtype", "matrix"), on="combo")
    per = per.join(_limits(per, devices), on=["device", "dtype", "matrix"], how="left")
    per = per.with_columns(
        compute_ns=pl.col("flops") / (pl.col("peak_tflops") * 1e3),
        memory_ns=pl.col("bytes") / pl.col("hbm_gbps"),
    )
    known = pl.col("compute_ns").is_not_null() | pl.col("memory_ns").is_not_null()
    per = per.with_columns(
        bound_ns=pl.when(known).then(pl.max_horizontal("compute_ns", "memory_ns"))
    ).select("combo", "device", *SCALED)
    rows = rows.join(per, on=["combo", "device"], how="left", maintain_order="left")
    return rows.with_columns(pl.col(c) * pl.col("share") for c in SCALED).drop("share")


def _bound_kind(memory: pl.Expr, compute: pl.Expr) -> pl.Expr:
    total = memory + compute
    return (
        pl.when(total <= 0)
        .then(None)
        .when(memory >= BOUND_SHARE * total)
        .then(pl.lit("memory"))
        .when(compute >= BOUND_SHARE * total)
        .then(pl.lit("compute"))
        .otherwise(pl.lit("mixed"))
    )


def step_roofline(rows: pl.DataFrame, work: pl.DataFrame) -> pl.DataFrame:
    """Per (rank, device, step): ``roofline_ns`` (the sum of the bounds of the step's shaped
    ``rows``; null where none has one), ``shaped_share`` (their share of the time of the
    step's device rows in ``work``) and ``bound`` (``memory`` / ``compute`` where rows
    limited by that hold at least :data:`BOUND_SHARE` of the roofline time, else ``mixed``)."""
    key = ["rank", "device", "step"]
    dur = pl.col("dur").clip(0)
    memory_bound = pl.col("memory_ns") >= pl.col("compute_ns").fill_null(0)
    has_bound = pl.col("bound_ns").is_not_null()
    shaped = (
        rows.filter(pl.col("step").is_not_null())
        .group_by(key)
        .agg(
            roofline_ns=pl.when(has_bound.any()).then(pl.col("bound_ns").sum()),
            _shaped=dur.sum(),
            _memory=pl.col("bound_ns").filter(has_bound & memory_bound).sum(),
            _compute=pl.col("bound_ns").filter(has_bound & ~memory_bound).sum(),
        )
    )
    every = work.filter(pl.col("step").is_not_null()).group_by(key).agg(_all=dur.sum())
    out = shaped.join(every, on=key, how="left")
    share = pl.when(pl.col("_all") > 0).then(pl.col("_shaped") / pl.col("_all"))
    return out.select(
        *key,
        pl.col("roofline_ns").round(0).cast(pl.Int64),
        shaped_share=share.fill_null(0.0),
        bound=_bound_kind(pl.col("_memory"), pl.col("_compute")),
    )


def operators(rows: pl.DataFrame, combos: pl.DataFrame) -> pl.DataFrame:
    """Per operator, shapes and device: ``launches`` (operator calls), ``rows`` (their
    device rows: a GEMM and its memset are two), time, FLOPs, bytes and the
    roofline numbers (achieved ``tflops`` and ``gbps``, ``intensity`` in FLOP/byte,
    ``bound_ns``, ``efficiency`` = bound / time, ``headroom_ns`` = time - bound, ``limit``:
    memory, compute, or latency where a launch's bound is under :data:`LATENCY_NS`),
    the kernels it ran and its steps; largest headroom first."""
    grouped = (
        rows.group_by("combo", "device")
        .agg(
            launches=pl.col("_op").n_unique(),
            rows=pl.len(),
            time_ns=pl.col("dur").clip(0).sum(),
            flops=pl.col("flops").sum(),
            bytes=pl.col("bytes").sum(),
            bound_ns=pl.when(pl.col("bound_ns").is_not_null().all()).then(pl.col("bound_ns").sum()),
            compute_ns=pl.col("compute_ns").sum(),
            memory_ns=pl.col("memory_ns").sum(),
            kernels=pl.col("name").unique(maintain_order=True).head(3),
            steps=pl.col("step").drop_nulls().n_unique(),
        )
        .with_columns(pl.col("kernels").cast(pl.List(pl.String)))
    )  # texts of the few kept
    attributes = combos.select("combo", "op", "family", "shapes", "dtype", "exact", "note")
    grouped = grouped.join(attributes, on="combo")
    per_ns = pl.when(pl.col("time_ns") > 0)
    return (
        grouped.with_columns(
            tflops=per_ns.then(pl.col("flops") / pl.col("time_ns") / 1e3),
            gbps=per_ns.then(pl.col("bytes") / pl.col("time_ns")),
            intensity=pl.when(pl.col("bytes") > 0).then(pl.col("flops") / pl.col("bytes")),
            efficiency=per_ns.then(pl.col("bound_ns") / pl.col("time_ns")),
            headroom_ns=(pl.col("time_ns") - pl.col("bound_ns")).clip(0),
            limit=pl.when(pl.col("bound_ns").is_null())
            .then(None)
            .when(pl.col("bound_ns") < LATENCY_NS * pl.col("launches"))
            .then(pl.lit("latency"))
            .when(pl.col("memory_ns") >= pl.col("compute_ns"))
            .then(pl.lit("memory"))
            .otherwise(pl.lit("compute")),
        )
        .sort(  # the combination's id (from its texts) last: equal shown texts, one order
            ["headroom_ns", "time_ns", "op", "shapes", "device", "combo"],
            descending=[True, True, False, False, False, False],
        )
        .drop("combo")
    )
