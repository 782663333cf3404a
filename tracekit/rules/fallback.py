"""Rule ``fallback``: kernels that betray a slow path."""

from __future__ import annotations

from typing import ClassVar

import polars as pl

from tracekit.model import Context, Finding
from tracekit.rules.base import Rule


class Fallback(Rule):
    """Kernels that betray a slow path, per decode step.

    Detects the rows the taxonomy flags ``is_fallback``: PyTorch-eager ``at::native``
    elementwise/reduce kernels (an unfused op chain where one fused kernel is expected),
    TorchInductor Triton kernels on ROCm where AITER/CK kernels are expected, and Ascend
    operators that run on the AI CPU. Why it matters: each such chain costs several
    launches and memory round trips instead of one fused kernel, and AI CPU operators are
    slow and serialise the stream; in a decode step they add up to a visible share.

    Triggers: a step running ``at::native::vectorized_elementwise_kernel<... silu_kernel ...>``
    and ``... MulFunctor ...`` instead of ``vllm::act_and_mul_kernel`` -> one finding for the
    step with the fallback time, its share of compute and the top offenders.
    Clean: the same step with the fused ``act_and_mul_kernel`` -> nothing.
    """

    id: ClassVar[str] = "fallback"
    name: ClassVar[str] = "fallback kernels"
    options: ClassVar[dict] = {"min_share": 0.0, "error_share": 0.1, "top": 5}
    option_help: ClassVar[dict] = {
        "min_share": "report a step when fallback time / compute kernel time exceeds this",
        "error_share": "severity error from this share on (warning below)",
        "top": "offending kernel names listed per finding",
    }

    def run(self, ctx: Context) -> list[Finding]:
        """One finding per (rank, device, step) that runs fallback kernels."""
        steps = ctx.step_metrics.filter(
            (pl.col("fallback_ns") > 0)
            & (pl.col("fallback_share").fill_null(1.0) > self.opts["min_share"])
        )
        if steps.height == 0:
            return []
        key = ["rank", "device", "step"]
        offenders = (
            ctx.work.filter(pl.col("is_fallback") & pl.col("step").is_not_null())
            .group_by(*key, pl.col("name").cast(pl.String))
            .agg(count=pl.len(), ns=pl.col("dur").sum())
            .sort("ns", "name", descending=[True, False])
            .group_by(key, maintain_order=True)
            .agg(
                total=pl.col("count").sum(),
                top=pl.struct("name", "count", "ns").head(self.opts["top"]),
            )
        )
        findings = []
        for row in steps.join(offenders, on=key, how="left").sort(key).iter_rows(named=True):
            top, share, count = row["top"] or [], row["fallback_share"], row["total"] or 0
            severity = (
                "error" if share is not None and share >= self.opts["error_share"] else "warning"
            )
            findings.append(
                self.at_step(
                    row,
                    severity,
                    f"{count} fallback kernels, {row['fallback_ns']:,} ns",
                    "slow-path kernels (eager at::native chains, ROCm Triton fallbacks or AI CPU "
                    "operators) where fused kernels are expected; largest: "
                    + (top[0]["name"] if top else "-"),
                    metrics={
                        "fallback_ns": row["fallback_ns"],
                        "fallback_share": share,
                        "fallback_count": count,
                    },
                    evidence={"kernels": top},
                )
            )
        return findings
