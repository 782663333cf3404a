"""Exposed communication credited to collectives, and the collectives that are never
overlapped with compute. Used by rule ``overlap`` (:mod:`tracekit.rules.overlap`).

:func:`credited` measures the exposed time of a set of communication rows (the part of them
with no compute kernel beside it) and credits each exposed piece to one collective, so that
two rows covering the same stretch (an MC² operator and its AI CPU communication row) count
it once. :func:`never_overlapped` gives the observations of the second pattern kind of the
rule: a collective whose instances almost never have compute beside them, with how much of
its exposed time the trace shows as waiting (HCCL Notify_Wait tasks inside it, cross-rank
waits of matched launches) rather than moving data.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from tracekit.intervals import intersect, lengths, subtract
from tracekit.metrics import IS_COMPUTE, KEY
from tracekit.model import Context
from tracekit.rules.fusion_pairs import fused_kind, outside_fused, step_pairs
from tracekit.rules.patterns import labelled

NEVER = "never"  # the ``mode`` of the never-overlapped observations
NOTIFY_WAIT = r"(?i)^notify[_ ]?wait"  # an HCCL task that waits on a notify (a peer's signal)
_OP = r'"op":\s*"((?:[^"\\]|\\.)*)"'  # the collective a task is part of (timeline.PART_OF)


def clusters(rows: pl.DataFrame) -> pl.DataFrame:
    """Rows that overlap or touch in time on a (rank, device, step) as one cluster (an MC²
    operator and its AI CPU communication row are one transfer): ``_cluster``, its start
    ``_cstart`` and ``collective``, the name of its main row (a fused operator before a plain
    one, a kernel before a communication task, then the longest)."""
    rows = rows.sort(*KEY, "ts", maintain_order=True).with_columns(
        _end=pl.col("ts") + pl.col("dur")
    )
    rows = rows.with_columns(_reach=pl.col("_end").cum_max().over(KEY))
    before = pl.col("_reach").shift(1).over(KEY)
    rows = rows.with_columns(_cluster=(before.is_null() | (pl.col("ts") > before)).cum_sum())
    main = rows.sort(
        "is_fused_comm",
        pl.col("kind") == "kernel",
        "dur",
        "name",
        descending=[True, True, True, False],
    ).unique(subset="_cluster", keep="first")
    return rows.join(main.select("_cluster", collective="name"), on="_cluster").with_columns(
        _cstart=pl.col("ts").min().over("_cluster")
    )


def credited(
    rows: pl.DataFrame, work: pl.DataFrame
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """The communication ``rows`` (with ``ts, dur``, their keys and names) clustered and
    labelled (``pattern``: the label of the cluster's main row), their exposed time per
    (``pattern``, rank, device, step) as ``impact_ns`` with ``count`` (clusters), and the
    exposed pieces (``*KEY, pattern, ts, dur``): the union of the rows minus the compute of
    ``work``, each piece credited to the cluster it lies in."""
    rows = clusters(rows)
    compute = work.lazy().filter(IS_COMPUTE)  # of the steps the rows are in
    compute = compute.join(rows.lazy().select(KEY).unique(), on=KEY, how="semi")
    pieces = subtract(rows, compute, KEY).sort("start")
    starts = rows.select(*KEY, "_cstart", "_cluster").unique().sort("_cstart")
    pieces = pieces.join_asof(
        starts, left_on="start", right_on="_cstart", by=KEY, check_sortedness=False
    )
    rows = labelled(rows, "collective", "pattern")
    per_cluster = rows.group_by("_cluster").agg(pl.col("pattern").first())
    pieces = pieces.join(per_cluster, on="_cluster").select(
        *KEY, "pattern", ts="start", dur=pl.col("end") - pl.col("start")
    )
    alone = pieces.group_by("pattern", *KEY).agg(impact_ns=pl.col("dur").sum())
    impact = (
        rows.group_by("pattern", *KEY)
        .agg(count=pl.col("_cluster").n_unique())
        .join(alone, on=["pattern", *KEY], how="left")
        .with_columns(pl.col("impact_ns").fill_null(0))
    )
    return rows, impact, pieces


def never_overlapped(
    ctx: Context, rows: pl.DataFrame, opts: dict[str, Any], skip: set[str]
) -> pl.DataFrame:
    """Observations (one row per ``pattern``, rank, device, step) of the collectives whose
    median instance ran with less than ``opts["exposed_below"]`` of its time beside compute.

    ``rows`` are the communication rows in steps with ``overlap_ns``, ``ratio`` and their
    ``name`` (:func:`tracekit.metrics.streams.comm_exposure`, at least ``min_ns``); fused
    compute-communication operators (and the rows that start inside one: their AI CPU
    communication side, :func:`_plain`) are left to rule ``mc2`` (it lists each with
    its exposed time), as are collectives it reports as an unfused GEMM + collective pair
    (:func:`mc2_pairs`); ``skip`` holds the patterns already reported otherwise. Columns:
    ``impact_ns`` (exposed ns), ``comm_ns``, ``overlap_ratio``, ``usual`` (the median
    instance's ratio), ``wait_ns`` (exposed ns in which the collective only waited on
    notifies, null where the trace has no such tasks), ``peer_wait_ns`` (cross-rank wait of
    its matched launches, at most the exposed ns; null where none matched), evidence."""
    below = opts["exposed_below"]
    rows = labelled(_plain(rows), "name", "pattern")
    rows = _mostly_exposed(rows.filter(~pl.col("pattern").is_in(skip)), below)
    if rows.height:  # mc2's pairs are looked for among the candidates only (costlier)
        pairs = mc2_pairs(ctx, rows, opts["pair_gap_ns"])
        rows = rows.drop("usual").join(pairs, on=pairs.columns, how="anti", nulls_equal=True)
        rows = _mostly_exposed(rows, below)
    if rows.height == 0:
        return pl.DataFrame()
    rows, impact, pieces = credited(rows.drop("pattern"), ctx.work)
    evidence = (
        rows.sort("ts")
        .group_by("pattern", *KEY)
        .agg(
            usual=pl.col("usual").first(),
            comm_ns=pl.col("dur").sum(),
            overlap_ratio=pl.col("overlap_ns").sum() / pl.col("dur").sum(),
            names=pl.col("name").unique(maintain_order=True),
            streams=pl.col("stream").unique().sort(),
            ranges=pl.concat_list("ts", "_end"),
        )
    )
    obs = impact.join(evidence, on=["pattern", *KEY])
    obs = obs.join(_notify_waits(ctx.work, rows, pieces), on=["pattern", *KEY], how="left")
    origin = int(ctx.meta.get("origin_ns") or 0)
    waits = _peer_waits(ctx.collectives, rows, origin)
    obs = obs.join(waits, on=["pattern", *KEY], how="left")
    return obs.with_columns(
        exposed_ns=pl.col("impact_ns"),
        peer_wait_ns=pl.when(pl.col("peer_wait_ns").is_not_null()).then(
            pl.min_horizontal("peer_wait_ns", "impact_ns")
        ),
        mode=pl.lit(NEVER),
    )


def _mostly_exposed(rows: pl.DataFrame, below: float) -> pl.DataFrame:
    """The ``rows`` of the patterns whose median instance has an overlap ratio below
    ``below``, with that median as ``usual``."""
    usual = rows.group_by("pattern").agg(usual=pl.col("ratio").median())
    return rows.join(usual.filter(pl.col("usual") < below), on="pattern")


def _plain(rows: pl.DataFrame) -> pl.DataFrame:
    """The plain communication ``rows`` (with ``ts, dur``): neither a fused
    compute-communication operator nor a row that starts inside one on its device (an MC²
    operator's AI CPU communication side is part of the operator)."""
    fused = rows.filter("is_fused_comm").with_columns(_end=pl.col("ts") + pl.col("dur"))
    plain = rows.filter(~pl.col("is_fused_comm")).with_row_index("_row")
    return outside_fused(plain, fused).sort("_row").drop("_row")


def mc2_pairs(ctx: Context, rows: pl.DataFrame, max_gap_ns: int) -> pl.DataFrame:
    """The collective instances (``rank, device, stream, ts``) on the devices of ``rows``
    that rule ``mc2`` reports as an unfused GEMM + collective pair:
    :func:`tracekit.rules.fusion_pairs.unfused_pairs` on the same work, kept where a fused
    operator fits the pair (the pairs mc2 lists, small shapes included)."""
    at = ["rank", "device", "stream", "ts"]
    pairs = step_pairs(ctx, max_gap_ns)  # mc2's own search, made once for both rules
    pairs = pairs.join(rows.select("rank", "device").unique(), on=["rank", "device"], how="semi")
    if pairs.height == 0:
        return rows.select(at).clear()
    named = pl.col("args").str.extract(r'("collective":\s*"[^"]*")')
    pairs = pairs.with_columns(_named=named)
    kinds = pairs.select("name", "order", "grouped", "_named").unique()
    fit = [
        fused_kind(name, "{" + args + "}" if args else None, order, grouped) is not None
        for name, order, grouped, args in kinds.iter_rows()
    ]
    kinds = kinds.with_columns(_fit=pl.Series(fit, dtype=pl.Boolean))
    on = ["name", "order", "grouped", "_named"]
    pairs = pairs.join(kinds, on=on, how="left", nulls_equal=True).filter("_fit")
    return pairs.select(at).unique().cast({c: rows.schema[c] for c in at})


def _notify_waits(work: pl.DataFrame, rows: pl.DataFrame, pieces: pl.DataFrame) -> pl.DataFrame:
    """Per (``pattern``, rank, device, step): ``wait_ns``, the exposed ns in which one of the
    collective's own tasks waited on a notify (HCCL ``Notify_Wait``: a peer's signal, or its
    other planes') while none of its data tasks (copies, reductions) ran."""
    names = rows.select(pl.col("name").cast(pl.String), "pattern").unique()
    tasks = (
        work.lazy()
        .filter(pl.col("is_part") & pl.col("step").is_not_null())
        .select(*KEY, "ts", "dur", task=pl.col("name").cast(pl.String), _op=pl.col("args"))
        .with_columns(pl.col("_op").str.extract(_OP))
        .join(names.lazy(), left_on="_op", right_on="name")
        .collect()
    )
    schema = {"pattern": pl.String, **{k: rows.schema[k] for k in KEY}, "wait_ns": pl.Int64}
    waiting = pl.col("task").str.contains(NOTIFY_WAIT)
    if not tasks.select(waiting.any()).item():
        return pl.DataFrame(schema=schema)
    by = [*KEY, "pattern"]
    only = subtract(tasks.filter(waiting), tasks.filter(~waiting), by)
    only = only.select(*by, ts="start", dur=pl.col("end") - pl.col("start"))
    return lengths(intersect(only, pieces, by), by, "wait_ns")


def _peer_waits(collectives: pl.DataFrame, rows: pl.DataFrame, origin: int) -> pl.DataFrame:
    """Per (``pattern``, rank, device, step): ``peer_wait_ns``, the summed cross-rank wait
    (:mod:`tracekit.metrics.waits`: until the last rank arrived) of the launches among
    ``rows`` that were matched across ranks (the launches' ``start`` is ``ts + origin``)."""
    out = rows.select("pattern", *KEY).clear().with_columns(peer_wait_ns=pl.lit(0, pl.Int64))
    if collectives.height == 0 or "wait_ns" not in collectives.columns:
        return out
    at = ["rank", "device", "start"]
    matched = collectives.filter(pl.col("wait_ns").is_not_null()).select(*at, "wait_ns")
    mine = rows.select("pattern", *KEY, start=pl.col("ts") + origin)
    mine = mine.join(matched.cast({c: mine.schema[c] for c in at}), on=at)
    if mine.height == 0:
        return out
    return mine.group_by("pattern", *KEY).agg(peer_wait_ns=pl.col("wait_ns").sum().cast(pl.Int64))
