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
    """Each rank's clock offset from its reference rank's, the spread it leaves and how many
    collectives it rests on (called when some collective was matched, so some rank is
    aligned); warn when offsets rest on few collectives, when ends still
    disagree by more than :data:`END_SLACK_NS`, and name the ranks that cannot be aligned
    (no collective shared) and the sets of ranks that share none with each other."""
    aligned = clocks.filter(pl.col("instances") > 0)
    lowest = int(aligned["reference"].min())
    shifted = ", ".join(
        f"rank {r} {o:+,} ns" + (f" (against rank {ref})" if ref != lowest else "")
        for r, o, ref in aligned.filter(pl.col("applied"))
        .select("rank", "offset_ns", "reference")
        .iter_rows()
    )
    worst = int(aligned["spread_ns"].max() or 0)
    fewest = int(aligned["instances"].min() or 0)
    what = f"clocks shifted: {shifted}" if shifted else "clocks agree: no rank shifted"
    detail = (
        f"{what}; ends of matched collectives then differ by {ns_text(worst)} (median, worst"
        f" rank), from {fewest:,} collectives or more per rank"
    )
    problems = []
    alone = clocks.filter(pl.col("instances") == 0)["rank"].to_list()
    if alone:
        problems.append(f"{_ranks(alone)} share no collective with another rank: not aligned")
    sets = aligned.group_by("reference").agg(pl.col("rank").sort()).sort("reference")
    if sets.height > 1:
        listed = "; ".join(_ranks(r) for r in sets["rank"].to_list()[:4])
        problems.append(
            f"the ranks form {sets.height} sets that share no collective ({listed}): each"
            " set is aligned to its own lowest rank"
        )
    if fewest < MIN_INSTANCES or worst > END_SLACK_NS:
        problems.append("waits may be off by that much")
    if problems:
        return Check("ranks.clocks", "warn", f"{detail}; " + "; ".join(problems))
    return Check("ranks.clocks", "pass", detail, actual=worst)


def _ranks(ranks: list[int], shown: int = 8) -> str:
    text = ", ".join(str(r) for r in ranks[:shown])
    more = f" … (+{len(ranks) - shown})" if len(ranks) > shown else ""
    return f"rank{'s' * (len(ranks) != 1)} {text}{more}"


def collective_matching(collectives: pl.DataFrame, meta: dict[str, Any]) -> Check:
    """The share of communication launches matched across ranks; warn on groups whose
    ends disagree (their waits are not used) and on groups with ranks not in the trace."""
    total = collectives.height
    matched = int(collectives["matched"].sum())
    present = collectives["rank"].n_unique()
    problems = []
    p2p = collectives.filter(pl.col("kind") == "send_recv").height
    if p2p:
        problems.append(
            f"{p2p:,} point-to-point launches (send/recv): tracekit does not pair a send with"
            " its receive, so they are not counted as waits"
        )
    loose = (
        collectives.filter(
            ~pl.col("matched") & (pl.col("ranks") > 1) & (pl.col("kind") != "send_recv")
        )
        .group_by("group")
        .agg(pl.len(), pl.col("end_spread_ns").median())
        .sort("len", "group", descending=[True, False])
    )
    for group, n, spread in loose.head(3).iter_rows():
        problems.append(
            f"{group}: {n:,} launches whose ends differ by {ns_text(spread or 0)} (median)"
            " after alignment (not the same collective on each rank?): their waits are not"
            " counted"
        )
    usual = pl.col("ranks").mode().max().over("group")
    short = collectives.filter((pl.col("ranks") > 1) & (pl.col("ranks") < usual)).height
    if short:
        problems.append(
            f"{short:,} launches belong to instances seen on fewer ranks than the rest of their"
            " group (a launch missing on some rank?)"
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
    pairable = collectives.filter((pl.col("ranks") > 1) & (pl.col("kind") != "send_recv"))
    if pairable.height and matched == 0:
        problems.insert(
            0,
            "most collectives do not line up across ranks (steps numbered differently, e.g."
            " profiles that start at different iterations, or launches missing): no waits"
            " are measured",
        )
    detail = f"{matched:,} of {total:,} communication launches matched across {present} ranks"
    if problems:
        return Check("ranks.matching", "warn", f"{detail}; " + "; ".join(problems))
    return Check("ranks.matching", "pass", detail, expected=total, actual=matched)
