"""The roofline of shaped rows: each row's bound on its device, ``max(FLOPs / peak, bytes /
bandwidth)``; per operator and shapes the achieved TFLOP/s and GB/s, arithmetic intensity,
efficiency (bound / time) and headroom (time - bound); per step ``roofline_ns``,
``shaped_share`` and ``bound``."""

from __future__ import annotations

import polars as pl

from tracekit.roofline.devices import ANY, Device

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


def _limits(shaped: pl.DataFrame, devices: dict[int, Device]) -> pl.DataFrame:
    """Peak TFLOP/s and HBM GB/s per distinct (device, dtype, matrix) of the shaped rows."""
    keys = shaped.filter(pl.col("flops").is_not_null()).select("device", "dtype", "matrix")
    # a trace that names one model for all its devices covers the indices it does not list
    # (Kineto's deviceProperties may list device 0 while the kernels run on device 2)
    models = {d.id: d for d in devices.values()}
    only = next(iter(models.values())) if len(models) == 1 else None
    out = []
    for device, dtype, matrix in keys.unique().iter_rows():
        part = devices.get(device if device is not None else ANY) or only
        if part is None:
            continue
        peak = part.peak_tflops(dtype, bool(matrix)) if dtype else None
        out.append((device, dtype, matrix, peak, part.hbm_gbps))
    return pl.DataFrame(out, schema=LIMIT_SCHEMA, orient="row")


def with_bounds(shaped: pl.DataFrame, devices: dict[int, Device]) -> pl.DataFrame:
    """``shaped`` (from :func:`tracekit.roofline.rows.shaped_rows`) with ``compute_ns``
    (FLOPs at the peak of the row's dtype), ``memory_ns`` (bytes at the HBM bandwidth) and
    ``bound_ns``, their maximum; null where the row has no work or its device no entry."""
    limits = _limits(shaped, devices)
    out = shaped.join(limits, on=["device", "dtype", "matrix"], how="left", maintain_order="left")
    compute = pl.col("flops") / (pl.col("peak_tflops") * 1e3)
    memory = pl.col("bytes") / pl.col("hbm_gbps")
    out = out.with_columns(compute_ns=compute, memory_ns=memory)
    bound = pl.max_horizontal("compute_ns", "memory_ns")
    known = pl.col("compute_ns").is_not_null() | pl.col("memory_ns").is_not_null()
    return out.with_columns(bound_ns=pl.when(known).then(bound))


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


def step_roofline(bounded: pl.DataFrame) -> pl.DataFrame:
    """Per (rank, device, step): ``roofline_ns`` (the sum of the bounds of the step's rows
    with shapes; null where none has one), ``shaped_share`` (their share of the step's
    device-row time) and ``bound`` (``memory`` / ``compute`` where rows limited by that hold
    at least :data:`BOUND_SHARE` of the roofline time, else ``mixed``)."""
    placed = bounded.filter(pl.col("step").is_not_null())
    memory_bound = pl.col("memory_ns") >= pl.col("compute_ns").fill_null(0)
    has_bound = pl.col("bound_ns").is_not_null()
    dur = pl.col("dur").clip(0)
    grouped = placed.group_by("rank", "device", "step").agg(
        roofline_ns=pl.when(has_bound.any()).then(pl.col("bound_ns").sum()),
        _shaped=dur.filter(pl.col("flops").is_not_null()).sum(),
        _all=dur.sum(),
        _memory=pl.col("bound_ns").filter(has_bound & memory_bound).sum(),
        _compute=pl.col("bound_ns").filter(has_bound & ~memory_bound).sum(),
    )
    share = pl.when(pl.col("_all") > 0).then(pl.col("_shaped") / pl.col("_all"))
    return grouped.select(
        "rank",
        "device",
        "step",
        pl.col("roofline_ns").round(0).cast(pl.Int64),
        shaped_share=share.fill_null(0.0),
        bound=_bound_kind(pl.col("_memory"), pl.col("_compute")),
    )


def operators(bounded: pl.DataFrame) -> pl.DataFrame:
    """Per operator, shapes and device: launches, time, FLOPs, bytes and the roofline
    numbers (achieved ``tflops`` and ``gbps``, ``intensity`` in FLOP/byte, ``bound_ns``,
    ``efficiency`` = bound / time, ``headroom_ns`` = time - bound), the kernels it ran and
    its steps; largest headroom first."""
    shaped = bounded.filter(pl.col("flops").is_not_null())
    keys = ["op", "family", "shapes", "dtype", "device"]
    time = pl.col("dur").clip(0).sum()
    grouped = shaped.group_by(keys).agg(
        rows=pl.len(),
        time_ns=time,
        flops=pl.col("flops").sum(),
        bytes=pl.col("bytes").sum(),
        bound_ns=pl.when(pl.col("bound_ns").is_not_null().all()).then(pl.col("bound_ns").sum()),
        compute_ns=pl.col("compute_ns").sum(),
        memory_ns=pl.col("memory_ns").sum(),
        exact=pl.col("exact").all(),
        note=pl.col("note").drop_nulls().first(),
        kernels=pl.col("name").cast(pl.String).unique(maintain_order=True).head(3),
        steps=pl.col("step").drop_nulls().n_unique(),
    )
    per_ns = pl.when(pl.col("time_ns") > 0)
    return grouped.with_columns(
        tflops=per_ns.then(pl.col("flops") / pl.col("time_ns") / 1e3),
        gbps=per_ns.then(pl.col("bytes") / pl.col("time_ns")),
        intensity=pl.when(pl.col("bytes") > 0).then(pl.col("flops") / pl.col("bytes")),
        efficiency=per_ns.then(pl.col("bound_ns") / pl.col("time_ns")),
        headroom_ns=(pl.col("time_ns") - pl.col("bound_ns")).clip(0),
        limit=pl.when(pl.col("bound_ns").is_null())
        .then(None)
        .when(pl.col("memory_ns") >= pl.col("compute_ns"))
        .then(pl.lit("memory"))
        .otherwise(pl.lit("compute")),
    ).sort(["headroom_ns", "time_ns", "op", "shapes"], descending=[True, True, False, False])
