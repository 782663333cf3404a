"""Rule ``bubbles``: device idle stretches inside a step, one finding per cause and place."""

from __future__ import annotations

from typing import Any, ClassVar

import polars as pl

from tracekit.metrics import KEY, MIN_BUBBLE_NS
from tracekit.metrics.bubbles import ATTRIBUTION_COLUMNS, attributed_bubbles
from tracekit.model import Context, Finding
from tracekit.rules.base import Rule
from tracekit.rules.patterns import (
    PATTERN_HELP,
    PATTERN_OPTIONS,
    findings,
    labelled,
    step_time,
    summarise,
)

STATS = ("bubble_ns", "bubble_count", "largest_bubble_ns", "bubble_share")
KINDS = {  # cause -> advice kind
    "host-bound: launch": "host_launch",
    "host-bound: sync": "host_sync",
    "host-bound: memory allocation": "host_alloc",
    "host-bound: setup": "host_setup",
    "communication": "communication",
    "waiting on a host callback": "host_callback",
    "waiting on an event": "stream_wait",
    "unknown": "unknown",
}
ON_STREAM = "waiting on stream "  # + the stream's id: advice kind ``stream_wait``


def _kind(cause: str) -> str:
    """The advice kind of a bubble's cause."""
    return "stream_wait" if cause.startswith(ON_STREAM) else KINDS.get(cause, "default")


class Bubbles(Rule):
    """Device idle stretches inside a decode step, attributed to a cause: one finding per
    cause between the same two kernels.

    Inside each step's window, every stretch of at least ``min_bubble_ns`` where no kernel,
    copy or collective runs on the device is a bubble (``bubble_ns``, ``bubble_count`` and
    ``largest_bubble_ns`` in ``Analysis.step_metrics``). Each bubble is attributed:
    *host-bound: memory allocation* or *host-bound: setup* (for at least half of it the host
    sat in runtime calls that allocate or free memory, or that create streams, events,
    library handles or load modules: why the next launch came late, so checked first),
    *host-bound: launch* (the launch of the work after it was still being issued when the
    device went idle), *host-bound: sync* (the host sat in a synchronize call),
    *communication* (the device waits next to a collective), a stream wait the device
    recorded (*waiting on a host callback*, *waiting on stream N*, *waiting on an event*:
    :mod:`tracekit.metrics.stream_waits`; checked right after a late launch), or *unknown*.
    The pattern is
    the cause with the kernels before and after the bubble (their short names), so the same
    stall in every step is one finding listing those steps. A pattern is reported when one
    of its bubbles reaches ``report_ns`` or its bubbles reach ``report_share`` of a step.
    Why it matters: idle device time in decode is pure latency; its cause tells whether to
    fix the host (device graphs, fewer syncs) or the communication schedule.

    Impact: the idle time of the pattern's bubbles summed over its steps, ranks and devices
    (what removing the stall could save). Severity from its share of the summed step time;
    advice by cause and vendor (CUDA / HIP / ACL graphs for a host-bound launch …).

    Triggers: the host stalls 150 µs before a layer in one step -> one finding, host-bound:
    launch, listing that step, impact 150,000 ns. Clean: back-to-back launches with 1-8 µs
    gaps -> nothing.
    """

    id: ClassVar[str] = "bubbles"
    name: ClassVar[str] = "idle bubbles"
    options: ClassVar[dict] = {
        "min_bubble_ns": MIN_BUBBLE_NS,
        "report_ns": 20_000,
        "report_share": 0.05,
        "max_places": 8,
        **PATTERN_OPTIONS,
    }
    option_help: ClassVar[dict] = {
        "min_bubble_ns": "shortest idle stretch counted as a bubble (ns)",
        "report_ns": "report a pattern when one of its bubbles reaches this (ns)",
        "report_share": "... or when its bubbles reach this share of a step",
        "max_places": "a cause whose bubbles sit between more kernel pairs than this, none "
        "holding half its idle time, is one finding (the step is bound by it everywhere)",
        **PATTERN_HELP,
    }

    def run(self, ctx: Context) -> list[Finding]:
        """One finding per (cause, kernel before, kernel after) with a large bubble."""
        cut = ctx.in_windows_of(ATTRIBUTION_COLUMNS)
        found = attributed_bubbles(cut, ctx.rows, self.opts["min_bubble_ns"])
        if found.height == 0:
            return []
        found = labelled(labelled(found, "before", "_before"), "after", "_after")
        found = _folded_places(found, self.opts["max_places"])
        obs = (
            found.sort("start")
            .group_by("pattern", *KEY)
            .agg(
                impact_ns=pl.col("ns").sum(),
                bubble_count=pl.len(),
                largest_bubble_ns=pl.col("ns").max(),
                cause=pl.col("cause").first(),
                places=pl.col("_places").first(),
                before=pl.col("before").sort_by("ns").last(),
                after=pl.col("after").sort_by("ns").last(),
                ranges=pl.concat_list("start", "end"),
            )
            .join(ctx.windows.select(*KEY, "dur"), on=KEY, how="left")
            .with_columns(
                bubble_ns=pl.col("impact_ns"), bubble_share=pl.col("impact_ns") / pl.col("dur")
            )
        )
        table = summarise(obs, STATS, step_time(ctx)).filter(
            (pl.col("largest_bubble_ns_max") >= self.opts["report_ns"])
            | (pl.col("bubble_share_max") >= self.opts["report_share"])
        )
        return findings(self, ctx, table, _describe, STATS)


SPREAD = 0.5  # a cause is spread when no kernel pair holds this share of its idle time


def _folded_places(found: pl.DataFrame, max_places: int) -> pl.DataFrame:
    """``found`` (bubbles with labels) with ``pattern``: the cause with the kernels before and
    after, or for a cause whose bubbles sit between more than ``max_places`` kernel pairs
    with none of them holding half its idle time, the cause ``across N kernel pairs`` for all
    its bubbles, large and small (an eager step stalled before every layer is one thing to
    fix, not one per layer; one large stall among many small ones keeps its own finding);
    ``_places`` is N, null for the others."""
    pair = pl.format("{} → {}", "_before", "_after")
    found = found.with_columns(_pair=pair)
    per_pair = found.group_by("cause", "_pair").agg(_ns=pl.col("ns").sum())
    spread = per_pair.group_by("cause").agg(
        _n=pl.len(), _top=(pl.col("_ns").max() / pl.col("_ns").sum())
    )
    fold = (pl.col("_n") > max_places) & (pl.col("_top") < SPREAD)
    found = found.join(spread, on="cause", how="left").with_columns(
        _places=pl.when(fold).then(pl.col("_n"))
    )
    folded = pl.format("{}: across {} kernel pairs", "cause", "_places")
    single = pl.format("{}: {}", "cause", "_pair")
    return found.with_columns(
        pattern=pl.when(pl.col("_places").is_not_null()).then(folded).otherwise(single)
    ).drop("_pair", "_n", "_top")


def _describe(row: dict[str, Any]) -> dict[str, Any]:
    share = row["bubble_share"]
    where = (
        f"between {row['places']:,} different kernel pairs (the largest between {row['before']}"
        f" and {row['after']})"
        if row["places"]
        else f"between {row['before']} and {row['after']}"
    )
    return {
        "kind": _kind(row["cause"]),
        "title": f"idle, {row['pattern']}: {row['impact_ns']:,} ns in {len(row['steps']):,} "
        "step(s)",
        "detail": f"the device sat idle ({row['cause']}) {where}; worst in step {row['step']} "
        f"(rank {row['rank']}, device {row['device']}): {row['bubble_count']} bubble(s), "
        f"{row['worst_ns']:,} ns" + (f", {share:.1%} of the step" if share is not None else ""),
        "metrics": {
            "bubble_ns": row["worst_ns"],
            "bubble_count": row["bubble_count"],
            "largest_bubble_ns": row["largest_bubble_ns"],
            "bubble_share": share,
        },
        "evidence": {
            "ranges": row["ranges"],
            "causes": [row["cause"]] * len(row["ranges"]),
            "names": [row["before"], row["after"]],
        },
    }
