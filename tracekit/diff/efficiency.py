"""Efficiency changes between two sides, per operator family: the operators both sides ran
with the same shapes (and dtype), their time per launch and their efficiency against each
side's own roofline (:mod:`tracekit.metrics.roofline`). Same work, different time: a kernel got
faster or slower, not the model."""

from __future__ import annotations

from typing import Any

import polars as pl

from tracekit.analysis import Analysis

KEY = ["family", "op", "shapes", "dtype"]
SHAPES_KEPT = 5  # shapes listed per family, largest change first


def _side(runs: list[Analysis]) -> pl.DataFrame:
    """Per (family, op, shapes, dtype) over a side's runs: launches, time, bound."""
    parts = [
        r.roofline.operators.select(*KEY, "launches", "time_ns", "bound_ns")
        for r in runs
        if r.roofline.shaped
    ]
    if not parts:
        return pl.DataFrame()
    rows = pl.concat(parts, how="vertical_relaxed")
    return rows.group_by(KEY).agg(
        launches=pl.col("launches").sum(),
        time_ns=pl.col("time_ns").sum(),
        bound_ns=pl.when(pl.col("bound_ns").is_not_null().all()).then(pl.col("bound_ns").sum()),
    )


def _efficiency(bound: pl.Expr, time: pl.Expr) -> pl.Expr:
    return pl.when(time > 0).then(bound / time)


def compare_efficiency(
    base: list[Analysis], head: list[Analysis], threshold: float
) -> list[dict[str, Any]]:
    """Per operator family, over the (op, shapes, dtype) both sides ran: time per launch and
    efficiency on each side (a side's time scaled to the base's launches, so that a side
    with more steps does not look slower), the relative change, and the shapes whose time
    per launch changed by at least ``threshold``, largest change first. Families whose
    matched time moved by less than ``threshold`` are left out; none without shapes."""
    b, h = _side(base), _side(head)
    if b.height == 0 or h.height == 0:
        return []
    both = b.join(h, on=KEY, suffix="_head")
    if both.height == 0:
        return []
    per_launch = pl.col("time_ns_head") / pl.col("launches_head")
    both = both.with_columns(
        head_ns=per_launch * pl.col("launches"),  # head's time for the base's launches
        head_bound=pl.col("bound_ns_head") / pl.col("launches_head") * pl.col("launches"),
    ).with_columns(rel=(pl.col("head_ns") - pl.col("time_ns")) / pl.col("time_ns"))
    out: list[dict[str, Any]] = []
    for family, rows in both.sort("family").group_by("family", maintain_order=True):
        base_ns, head_ns = float(rows["time_ns"].sum()), float(rows["head_ns"].sum())
        if base_ns <= 0 or abs(head_ns - base_ns) < threshold * base_ns:
            continue
        moved = rows.filter(pl.col("rel").abs() >= threshold).sort(
            (pl.col("head_ns") - pl.col("time_ns")).abs(), descending=True
        )
        eff = rows.select(
            base=_efficiency(pl.col("bound_ns").sum(), pl.col("time_ns").sum()),
            head=_efficiency(pl.col("head_bound").sum(), pl.col("head_ns").sum()),
        ).row(0, named=True)
        out.append(
            {
                "family": family[0],
                "shapes": rows.height,
                "base_ns": base_ns,
                "head_ns": head_ns,
                "rel": (head_ns - base_ns) / base_ns,
                "efficiency": eff,
                "moved": [
                    {
                        "op": r["op"],
                        "shapes": r["shapes"],
                        "dtype": r["dtype"],
                        "launches": (r["launches"], r["launches_head"]),
                        "base_ns_per_launch": r["time_ns"] / r["launches"],
                        "head_ns_per_launch": r["time_ns_head"] / r["launches_head"],
                        "rel": r["rel"],
                        "efficiency": (
                            _ratio(r["bound_ns"], r["time_ns"]),
                            _ratio(r["bound_ns_head"], r["time_ns_head"]),
                        ),
                    }
                    for r in moved.head(SHAPES_KEPT).iter_rows(named=True)
                ],
            }
        )
    return sorted(out, key=lambda f: -abs(f["head_ns"] - f["base_ns"]))


def _ratio(bound: float | None, time: float) -> float | None:
    return bound / time if bound is not None and time > 0 else None
