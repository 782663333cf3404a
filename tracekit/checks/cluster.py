"""Checks of the cross-rank numbers: how well the ranks' clocks were aligned and how many
collectives could be matched, so that waits that rest on guesses say so."""

from __future__ import annotations

from typing import Any

import polars as pl

from tracekit.metrics.waits import END_SLACK_NS
from tracekit.model import Check, ns_text

CHECKS = ("ranks.clocks", "ranks.matching")
MIN_INSTANCES = 3  # offsets resting on fewer collectives are a guess


def cluster_checks(
    collectives: pl.DataFrame, clocks: pl.DataFrame, meta: dict[str, Any], ranks: int
) -> list[Check]:
    """``ranks.clocks`` and ``ranks.matching`` when the trace holds several
    (``ranks``) ranks; none for one rank."""
    if ranks < 2:
        return []
    if collectives.height == 0:
        return [
            Check(
                "ranks.matching",
                "warn",
                f"no communication launches in {ranks} ranks: clocks not aligned, no waits"
                " measured",
            )
        ]
    if not collectives["matched"].any():
        spread = int(collectives["end_spread_ns"].max() or 0)
        clock = Check(
            "ranks.clocks",
            "warn",
            f"no collective lines up across ranks (ends {ns_text(spread)} apart): the ranks'"
            " clocks are not aligned and no waits are measured",
        )
        return [clock, collective_matching(collectives, meta)]
    return [clock_alignment(clocks), collective_matching(collectives, meta)]


def clock_alignment(clocks: pl.DataFrame) -> Check:
    """Each rank's clock offset from the lowest rank's, the spread it leaves and how many
    collectives it rests on; warn when offsets rest on few collectives or ends still
    disagree by more than :data:`END_SLACK_NS`."""
    applied = clocks.filter(pl.col("applied"))
    shifted = ", ".join(
        f"rank {r} {o:+,} ns" for r, o in applied.select("rank", "offset_ns").iter_rows()
    )
    worst = int(clocks["spread_ns"].max() or 0)
    fewest = int(clocks["instances"].min() or 0)
    what = f"clocks shifted: {shifted}" if shifted else "clocks agree: no rank shifted"
    detail = (
        f"{what}; ends of matched collectives then differ by {ns_text(worst)} (median, worst"
        f" rank), from {fewest:,} collectives or more per rank"
    )
    if fewest == 0:
        return Check(
            "ranks.clocks",
            "warn",
            "no collective was seen on two ranks: the ranks' clocks are not aligned and no"
            " waits are measured",
        )
    if fewest < MIN_INSTANCES or worst > END_SLACK_NS:
        return Check("ranks.clocks", "warn", f"{detail}; waits may be off by that much")
    return Check("ranks.clocks", "pass", detail, actual=worst)


def collective_matching(collectives: pl.DataFrame, meta: dict[str, Any]) -> Check:
    """The share of communication launches matched across ranks; warn on groups whose
    ends disagree (their waits are not used) and on groups with ranks not in the trace."""
    total = collectives.height
    if total == 0:
        return Check("ranks.matching", "pass", "no communication launches")
    matched = int(collectives["matched"].sum())
    present = collectives["rank"].n_unique()
    problems = []
    loose = (
        collectives.filter(~pl.col("matched") & (pl.col("ranks") > 1))
        .group_by("group")
        .agg(pl.len(), pl.col("end_spread_ns").first())
        .sort("len", descending=True)
    )
    for group, n, spread in loose.head(3).iter_rows():
        problems.append(
            f"{group}: {n:,} launches whose ends differ by {ns_text(spread or 0)} after"
            " alignment (not the same collective on each rank?): their waits are not counted"
        )
    alone = collectives.filter(pl.col("ranks") == 1).height
    if alone:
        problems.append(
            f"{alone:,} launches were seen on one rank only (not profiled on the others, or a"
            " trace cut short): they wait for nobody here"
        )
    sizes = collectives.select(pl.col("group_size").max()).item()
    world = meta.get("world_size")
    largest = max(int(sizes or 0), int(world or 0) if sizes is None else 0)
    if largest > present:
        problems.append(
            f"groups of up to {largest:,} ranks, {present} in the trace: the last rank may be"
            " one that was not profiled, so waits count only the ranks present"
        )
    detail = f"{matched:,} of {total:,} communication launches matched across {present} ranks"
    if problems:
        return Check("ranks.matching", "warn", f"{detail}; " + "; ".join(problems))
    return Check("ranks.matching", "pass", detail, expected=total, actual=matched)
