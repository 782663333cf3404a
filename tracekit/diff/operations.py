"""Time per launching operator on each side of a diff: where both traces record the host
operator that launched each kernel (PyTorch ``record_shapes``), the per-operation view reads
the same across vendors whatever the kernels are called (``aten::mm``: cuBLAS ``sm90_xmma…``
on one side, hipBLASLt ``Cijk_…`` on the other). It is read when kernel names differ between
the sides (where names alone pair every kernel, the kernel rows already read per operation,
and the lookup is not worth its time on millions of rows). Point values per step; it
explains, it does not gate."""

from __future__ import annotations

from typing import Any

import polars as pl

from tracekit.diff.samples import RunSamples


def _steps(runs: list[RunSamples]) -> int:
    return max(sum(r.steps.height for r in runs), 1)


def member_times(runs: list[RunSamples]) -> dict[str, tuple[float, float]]:
    """Per kernel key of one side: its time and launches per step (over the side's steps)."""
    frames = [r.kernels.select("key", "ns", "count") for r in runs]
    if not frames:
        return {}
    steps = _steps(runs)
    totals = pl.concat(frames).group_by("key").agg(pl.col("ns").sum(), pl.col("count").sum())
    return {k: (ns / steps, n / steps) for k, ns, n in totals.iter_rows()}


def _per_op(runs: list[RunSamples]) -> dict[str, tuple[float, float, str]]:
    """Per operator: the time per step of the device rows it launched (a row whose operator
    the trace does not link counts for none), its kernel launches per step (all its rows where
    it launched no kernel: a copy), and their main category."""
    steps = _steps(runs)
    out: dict[str, list[Any]] = {}
    for run in runs:
        if run.ops.height == 0:
            continue
        categories = run.kernels.group_by("key").agg(pl.col("category").first())
        per_op = (
            run.ops.join(categories, on="key", how="left")
            .group_by("op")
            .agg(
                pl.col("ns").sum(),
                pl.col("n").sum(),
                pl.col("kernels").sum(),
                pl.col("category").sort_by("ns", descending=True).first(),
            )
            .select(
                "op",
                "ns",
                pl.when(pl.col("kernels") > 0).then("kernels").otherwise("n").alias("n"),
                "category",
            )
        )
        for op, ns, count, category in per_op.iter_rows():
            row = out.setdefault(op, [0.0, 0.0, category])
            row[0] += ns
            row[1] += count / run.devices
    return {op: (ns / steps, n / steps, cat) for op, (ns, n, cat) in out.items()}


def compare_operations(base: list[RunSamples], head: list[RunSamples]) -> list[dict[str, Any]]:
    """Per launching operator of either side: ``{op, category, base_ns, head_ns, delta_ns,
    count_base, count_head}`` per step, largest absolute change first; empty unless both
    sides record launching operators."""
    b, h = _per_op(base), _per_op(head)
    if not b or not h:
        return []
    rows = []
    for op in set(b) | set(h):
        bn, bc, bcat = b.get(op, (0.0, 0.0, None))
        hn, hc, hcat = h.get(op, (0.0, 0.0, None))
        rows.append(
            {
                "op": op,
                "category": bcat or hcat,
                "base_ns": bn,
                "head_ns": hn,
                "delta_ns": hn - bn,
                "count_base": bc,
                "count_head": hc,
            }
        )
    return sorted(rows, key=lambda r: (-abs(r["delta_ns"]), r["op"]))
