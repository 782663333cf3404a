"""Rule ``efficiency``: operators far from their roofline, one finding per operator family
and operator, with the time above the roofline bound (the headroom) as its impact."""

from __future__ import annotations

from typing import Any, ClassVar

import polars as pl

from tracekit.metrics import KEY
from tracekit.metrics.roofline.bounds import LATENCY_NS
from tracekit.model import Context, Finding
from tracekit.rules.base import Rule
from tracekit.rules.patterns import PATTERN_HELP, PATTERN_OPTIONS, findings, step_time, summarise

STATS = ("time_ns", "headroom_ns", "efficiency", "tflops", "gbps", "step_share")
SHAPES_KEPT = 5  # shapes listed as evidence, largest headroom first
# advice kind per family; GEMMs and attention split by what limits them
_KINDS = {
    "gemm": "gemm",
    "grouped_gemm": "grouped_gemm",
    "attention": "attention",
    "norm": "vector",
    "activation": "vector",
    "elementwise": "vector",
    "embedding": "vector",
    "sampling": "vector",
    "memory": "vector",
}


class Efficiency(Rule):
    """Operators that run far from what the device can do: one finding per operator family
    and operator (``gemm: aten::mm``) whose time above its roofline bound is large.

    Every device row whose launching operator's shapes are in the trace has FLOPs and minimum
    bytes from a documented formula (:mod:`tracekit.metrics.roofline.formulas`) and, on a device of
    ``tracekit/data/devices.toml``, a roofline bound ``max(FLOPs / peak of its dtype, bytes /
    HBM bandwidth)``. Per step the rule sums each operator's time, bound and headroom
    (time - bound) and reports the operators whose headroom reaches ``report_share`` of a
    step while their efficiency (bound / time) stays under ``max_efficiency``. Rows without
    shapes, or on a device with no table entry, are not judged: no guess. Why it matters:
    the headroom is what a better kernel, a fused one, another tile or quantisation could
    save; a memory-bound decode GEMM at full bandwidth has none, and batching more tokens
    is then the only lever.

    Impact: the headroom summed over the pattern's steps, ranks and devices. Where the
    shapes bound the work only from above (a paged KV cache read up to its block table's
    capacity) the bound is an upper bound and the headroom a lower one; the detail says so.

    Triggers: a bf16 ``aten::mm`` [64, 7168] x [7168, 2048] taking 40 µs on an H100 SXM whose
    roofline bound (30.5 MB at 3.35 TB/s) is 9.1 µs, in each of 8 steps of 1 ms -> one finding
    ``gemm: aten::mm``, impact 247 µs, efficiency 23 %. Clean: the same GEMM in 9.5 µs
    (efficiency 96 %) -> nothing. The device is matched from the trace's device name
    (``tracekit --device NAME`` chooses the table entry instead).
    """

    id: ClassVar[str] = "efficiency"
    name: ClassVar[str] = "operators far from the roofline"
    options: ClassVar[dict] = {
        "report_share": 0.02,
        "max_efficiency": 0.6,
        **PATTERN_OPTIONS,
    }
    option_help: ClassVar[dict] = {
        "report_share": "report an operator when its headroom reaches this share of a step",
        "max_efficiency": "... and its efficiency (roofline bound / time) in that step is "
        "below this",
        **PATTERN_HELP,
    }

    def run(self, ctx: Context) -> list[Finding]:
        """One finding per (family, operator) with a large headroom."""
        roof = ctx.roofline
        if roof is None or not roof.shaped:  # None: a cluster merged from per-rank results
            return []
        patterns = roof.combos.select(
            "combo", "dtype", pattern=pl.format("{}: {}", "family", "op")
        ).with_columns(_pattern=pl.col("pattern").rank("dense").cast(pl.UInt32))
        rows = roof.bounded.filter(
            pl.col("step").is_not_null() & pl.col("bound_ns").is_not_null()
        ).join(patterns.select("combo", "_pattern"), on="combo")
        if rows.height == 0:
            return []
        names = patterns.group_by("_pattern").agg(
            pl.col("pattern").first(), dtype=pl.col("dtype").mode().first()
        )
        obs = self._observations(ctx, rows, names)
        table = summarise(obs, STATS, step_time(ctx))
        table = table.filter(
            (pl.col("impact_ns") > 0)
            & (pl.col("step_share_max") >= self.opts["report_share"])
            & (pl.col("efficiency_median") < self.opts["max_efficiency"])
        )
        totals = self._totals(obs, roof.operators).join(
            names.select("pattern", "dtype"), on="pattern", how="left"
        )
        table = table.join(totals, on="pattern", how="left", maintain_order="left")
        return findings(self, ctx, table, self._describe, STATS)

    @staticmethod
    def _observations(ctx: Context, rows: pl.DataFrame, names: pl.DataFrame) -> pl.DataFrame:
        """One row per (pattern, rank, device, step): time, bound (and the part of it limited
        by memory), headroom, efficiency, achieved TFLOP/s and GB/s, and the headroom's share
        of the step. Grouped by integer ids: the pattern texts join the few groups after."""
        memory = pl.col("memory_ns") >= pl.col("compute_ns").fill_null(0)
        grouped = rows.group_by("_pattern", *KEY).agg(
            time_ns=pl.col("dur").clip(0).sum(),
            bound_ns=pl.col("bound_ns").sum(),
            memory_bound_ns=pl.col("bound_ns").filter(memory).sum(),
            flops=pl.col("flops").sum(),
            bytes=pl.col("bytes").sum(),
            launches=pl.col("_op").n_unique(),
        )
        grouped = grouped.join(names.select("_pattern", "pattern"), on="_pattern").drop("_pattern")
        per_ns = pl.when(pl.col("time_ns") > 0)
        grouped = grouped.with_columns(
            impact_ns=(pl.col("time_ns") - pl.col("bound_ns")).clip(0).round(0).cast(pl.Int64),
            efficiency=per_ns.then(pl.col("bound_ns") / pl.col("time_ns")),
            tflops=per_ns.then(pl.col("flops") / pl.col("time_ns") / 1e3),
            gbps=per_ns.then(pl.col("bytes") / pl.col("time_ns")),
        ).with_columns(headroom_ns=pl.col("impact_ns"))
        steps = ctx.step_metrics.select(*KEY, pl.col("dur").alias("_step_ns"))
        grouped = grouped.join(steps, on=KEY, how="left")
        share = pl.when(pl.col("_step_ns") > 0).then(pl.col("impact_ns") / pl.col("_step_ns"))
        return grouped.with_columns(step_share=share).drop("_step_ns")

    @staticmethod
    def _totals(obs: pl.DataFrame, operators: pl.DataFrame) -> pl.DataFrame:
        """Per pattern over its steps: time, bound, the share of the bound limited by memory;
        and over the trace, whether its work is exact, its family and op, and its shapes
        with the most headroom (each with launches, time, efficiency and kernels)."""
        totals = obs.group_by("pattern").agg(
            total_ns=pl.col("time_ns").sum(),
            total_bound_ns=pl.col("bound_ns").sum(),
            memory_share=pl.col("memory_bound_ns").sum() / pl.col("bound_ns").sum(),
        )
        ops = operators.with_columns(pattern=pl.format("{}: {}", "family", "op"))
        per_shape = (
            ops.group_by("pattern", "shapes")
            .agg(
                launches=pl.col("launches").sum(),
                time_ns=pl.col("time_ns").sum(),
                bound_ns=pl.col("bound_ns").sum(),
                kernels=pl.col("kernels")
                .list.explode(keep_nulls=False, empty_as_null=False)
                .unique(maintain_order=True)
                .head(2),
            )
            .with_columns(
                efficiency=pl.when(pl.col("time_ns") > 0).then(
                    pl.col("bound_ns") / pl.col("time_ns")
                ),
                headroom_ns=(pl.col("time_ns") - pl.col("bound_ns")).clip(0),
            )
            .sort(["headroom_ns", "shapes"], descending=[True, False])
        )
        shapes = per_shape.group_by("pattern", maintain_order=True).agg(
            shapes=pl.struct("shapes", "launches", "time_ns", "efficiency", "kernels").head(
                SHAPES_KEPT
            )
        )
        latency = pl.col("time_ns").filter(pl.col("limit") == "latency").sum()
        kinds = ops.group_by("pattern").agg(
            pl.col("family").first(),
            pl.col("op").first(),
            total_exact=pl.col("exact").all(),
            latency_share=latency / pl.col("time_ns").sum(),
        )
        return totals.join(kinds, on="pattern", how="left").join(shapes, on="pattern", how="left")

    def _describe(self, row: dict[str, Any]) -> dict[str, Any]:
        family, op = row["family"], row["op"]
        memory = (row["memory_share"] or 0) >= 0.5
        launch_bound = (row["latency_share"] or 0) >= 0.5
        limit = "memory-bound" if memory else "compute-bound"
        if launch_bound:
            limit = f"latency-bound: each launch's bound is under {LATENCY_NS / 1e3:g} µs"
        total, bound = row["total_ns"], row["total_bound_ns"]
        eff = bound / total if total else None
        loose = (
            ""
            if row["total_exact"]
            else (
                "; its shapes bound the work only from above (e.g. a paged KV cache's capacity), so"
                " the efficiency is at most this and the headroom at least this"
            )
        )
        top = row["shapes"] or []
        shown = ", ".join(
            f"{s['shapes']} ×{s['launches']:,} at {s['efficiency']:.0%}"
            for s in top[:3]
            if s["efficiency"] is not None
        )
        text = (
            f"{op} ({family}, {row['dtype']}, {limit}) ran {total:,} ns where its roofline bound"
            f" is {bound:,.0f} ns: {eff:.1%} of what the device can do over "
            f"{len(row['steps']):,} step(s){loose}. Worst in step {row['step']} (rank "
            f"{row['rank']}, device {row['device']}): {row['time_ns']:,} ns, "
            f"{row['worst_ns']:,} ns above the bound ({row['tflops']:.1f} TFLOP/s, "
            f"{row['gbps']:.0f} GB/s). Shapes with the most headroom: {shown}"
        )
        kind = "latency" if launch_bound else _KINDS.get(family, "vector")
        if kind in ("gemm", "grouped_gemm", "attention"):
            kind = f"{kind}_{'memory' if memory else 'compute'}"
        return {
            "kind": kind,
            "title": f"{op} at {eff:.0%} of the roofline: {row['impact_ns']:,} ns of headroom "
            f"in {len(row['steps']):,} step(s)",
            "detail": text,
            "metrics": {
                "time_ns": row["time_ns"],
                "bound_ns": row["time_ns"] - row["worst_ns"],
                "headroom_ns": row["worst_ns"],
                "efficiency": row["efficiency"],
                "tflops": row["tflops"],
                "gbps": row["gbps"],
                "launches": row["launches"],
                "step_share": row["step_share"],
            },
            "evidence": {"shapes": top, "family": family, "dtype": row["dtype"], "limit": limit},
        }
