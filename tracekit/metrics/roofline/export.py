"""The roofline as JSON-ready records (``Roofline.to_dict()``, read by the reports and written
by ``--format json``): each matched device's figures and the compute roofs its operators were
held to, the per-family totals, and the operators by headroom, capped at
:data:`MAX_OPERATORS` (the count left out said)."""

from __future__ import annotations

from typing import Any

import polars as pl

from tracekit.metrics.roofline.devices import Device, listed

MAX_OPERATORS = 200  # operators written out, largest headroom first


def device_record(device: Device) -> dict[str, Any]:
    """One device table entry's figures: id, name, vendor, HBM GB/s, dense (and sparse) peak
    TFLOP/s per dtype, the vector FP32 peak, link GB/s and the datasheet."""
    return {
        "id": device.id,
        "name": device.name,
        "vendor": device.vendor,
        "hbm_gbps": device.hbm_gbps,
        "tflops": dict(device.tflops),
        "sparse_tflops": dict(device.sparse_tflops),
        "vector_tflops": device.vector_tflops,
        "bf16_tflops": device.peak_tflops("bf16", True),
        "link_gbps": device.link_gbps,
        "source": device.source,
    }


def _roof(device: Device, dtype: str, peak: float) -> dict[str, Any]:
    """The device's roof an operator of ``dtype`` was held to: the matrix or the vector
    peak, whichever its bound used (``peak``: its FLOPs over its compute time)."""
    options = [(device.peak_tflops(dtype, m), m) for m in (False, True)]  # a tie: vector
    known = [(p, m) for p, m in options if p]
    tflops, matrix = min(known, key=lambda o: abs(o[0] - peak)) if known else (peak, True)
    return {"dtype": dtype, "tflops": tflops, "matrix": matrix}


def device_roofs(operators: pl.DataFrame, devices: dict[int, Device]) -> dict[int, list[dict]]:
    """Per device index with operators: the distinct compute roofs (dtype, TFLOP/s, matrix
    or vector units) its operators' bounds used, highest first."""
    if operators.height == 0 or not devices:
        return {}
    used = (
        operators.filter((pl.col("compute_ns") > 0) & (pl.col("flops") > 0))
        .select("device", "dtype", peak=(pl.col("flops") / pl.col("compute_ns") / 1e3).round(3))
        .unique()
        .sort("device", "dtype", "peak")
    )
    out: dict[int, list[dict]] = {}
    for index, dtype, peak in used.iter_rows():
        key = listed(index, devices)
        part = devices.get(key) if key is not None else None
        if part is None or dtype is None:
            continue
        roof = _roof(part, dtype, peak)
        roofs = out.setdefault(key, [])
        if roof not in roofs:
            roofs.append(roof)
    return {i: sorted(r, key=lambda x: (-x["tflops"], x["dtype"])) for i, r in out.items()}


def family_totals(operators: pl.DataFrame) -> list[dict[str, Any]]:
    """Per operator family: launches, time, FLOPs, bytes, the summed bound (null where some
    operator has none), efficiency (bound / time) and headroom; largest headroom first."""
    if operators.height == 0:
        return []
    totals = operators.group_by("family").agg(
        rows=pl.col("rows").sum(),
        launches=pl.col("launches").sum(),
        time_ns=pl.col("time_ns").sum(),
        flops=pl.col("flops").sum(),
        bytes=pl.col("bytes").sum(),
        bound_ns=pl.when(pl.col("bound_ns").is_not_null().all()).then(pl.col("bound_ns").sum()),
        exact=pl.col("exact").all(),
    )
    return (
        totals.with_columns(
            efficiency=pl.when(pl.col("time_ns") > 0).then(pl.col("bound_ns") / pl.col("time_ns")),
            headroom_ns=(pl.col("time_ns") - pl.col("bound_ns")).clip(0),
        )
        .sort(["headroom_ns", "time_ns", "family"], descending=[True, True, False])
        .to_dicts()
    )


def roofline_record(
    operators: pl.DataFrame, devices: dict[int, Device], warnings: list[str]
) -> dict[str, Any]:
    """``devices`` (per index: :func:`device_record` and its ``roofs``), ``warnings``,
    ``families`` (:func:`family_totals`), ``operators`` (the first :data:`MAX_OPERATORS` by
    headroom), ``operators_total`` and ``operators_left_out``; a timeline without shapes
    only the first three (empty), as before the roofline had totals."""
    if operators.height == 0:
        known = {str(i): device_record(d) for i, d in sorted(devices.items())}
        return {"devices": known, "warnings": list(warnings), "operators": []}
    roofs = device_roofs(operators, devices)
    shown = operators.head(MAX_OPERATORS)
    serves: dict[int, list[int]] = {}
    for index in sorted(operators["device"].drop_nulls().unique().to_list()):
        key = listed(index, devices)
        if key is not None:
            serves.setdefault(key, []).append(index)
    return {
        "devices": {
            str(i): {**device_record(d), "roofs": roofs.get(i, []), "serves": serves.get(i, [])}
            for i, d in sorted(devices.items())
        },
        "warnings": list(warnings),
        "families": family_totals(operators),
        "operators": shown.to_dicts() if shown.height else [],
        "operators_total": operators.height,
        "operators_left_out": operators.height - shown.height,
    }
