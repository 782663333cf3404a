"""Per-step metrics: one row per (rank, device, step), all by interval algebra over columns.

Unions, intersections and gaps use the rows clipped to the step's window; summed durations
(fallback, fused communication, categories) use the rows' own durations.
"""

from __future__ import annotations

import polars as pl

from tracekit.intervals import intersect, lengths, merge
from tracekit.metrics import IS_COMPUTE, KEY, MIN_BUBBLE_NS
from tracekit.metrics.bubbles import bubble_totals, comm_bubble_totals
from tracekit.metrics.columns import METRIC_COLUMNS
from tracekit.metrics.streams import exposed_ns
from tracekit.taxonomy import CATEGORIES

STEPS_ROWS = 1_000_000  # the interval metrics take steps in frames of about this many rows


def clipped(work: pl.DataFrame, windows: pl.DataFrame) -> pl.DataFrame:
    """Work rows of each step cut to the step's window (rows wholly outside are dropped)."""
    # The window of each row from a join of the keys alone; the rows' other columns are
    # shared, not copied, unless some rows fall outside (then one filter copies them).
    bounds = work.select(*KEY, "ts", "dur").join(
        windows.select(*KEY, "start", "end"), on=KEY, how="left", maintain_order="left"
    )
    cut = bounds.select(
        _s=pl.max_horizontal("ts", "start"),
        _e=pl.min_horizontal(pl.col("ts") + pl.col("dur"), pl.col("end")),
        _in=pl.col("start").is_not_null(),
    )
    inside = cut["_in"] & (cut["_e"] > cut["_s"])
    rows = work.with_columns(ts=cut["_s"], dur=cut["_e"] - cut["_s"])
    return rows if inside.all() else rows.filter(inside)


def _length(frame: pl.DataFrame, name: str) -> pl.DataFrame:
    return lengths(frame, KEY, name)


def _by_steps(rows: pl.DataFrame, limit: int) -> list[pl.DataFrame]:
    """``rows`` in frames of whole steps, about ``limit`` rows each (one when fewer)."""
    if rows.height <= limit or rows["step"].null_count():
        return [rows]
    counts = rows.group_by("step").len().sort("step")
    first = counts.select("step", part=(pl.col("len").cum_sum() - pl.col("len")) // limit).unique(
        "part", keep="first", maintain_order=True
    )["step"]
    part = first.search_sorted(rows["step"], side="right") - 1
    return rows.with_columns(_part=part).partition_by("_part", include_key=False)


def _interval_metrics(rows: pl.DataFrame, min_bubble_ns: int) -> pl.DataFrame:
    """Per (rank, device, step) of ``rows`` (cut to their windows): the metrics of unions,
    intersections and gaps (busy, bubbles, compute, communication and its exposure)."""
    # Each set merged once, then combined (the interval functions take merged sets as is),
    # and let go as soon as it is used.
    busy = merge(rows, KEY)
    parts = [_length(busy, "busy_ns"), bubble_totals(busy, min_bubble_ns)]
    del busy
    compute = merge(rows.lazy().filter(IS_COMPUTE), KEY)
    comm = merge(rows.lazy().filter(pl.col("is_comm")), KEY)
    parts += [
        _length(compute, "compute_ns"),
        _length(comm, "comm_ns"),
        exposed_ns(comm, compute, "exposed_comm_ns"),
        _length(intersect(comm, compute, KEY), "_overlap_ns"),
    ]
    del compute
    parts.append(comm_bubble_totals(rows, min_bubble_ns, comm))
    out = rows.select(KEY).unique()
    for part in parts:
        out = out.join(part, on=KEY, how="left")
    return out


def step_metrics(
    work: pl.DataFrame,
    windows: pl.DataFrame,
    min_bubble_ns: int = MIN_BUBBLE_NS,
    in_windows: pl.DataFrame | None = None,
    ranges: pl.DataFrame | None = None,
    waits: pl.DataFrame | None = None,
    stream_waits: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """The metrics table (columns :data:`METRIC_COLUMNS`) from classified, assigned work rows
    (``tracekit.steps.assign`` after ``tracekit.taxonomy.classify``) and their windows;
    ``in_windows`` is ``clipped(work, windows)`` when the caller already has it; ``ranges``
    (the steps' ``rank, step, phase, tokens``) gives each step its phase and tokens;
    ``waits`` (:func:`tracekit.metrics.waits.sync_waits`) its ``sync_wait_ns``;
    ``stream_waits`` (:func:`tracekit.metrics.stream_waits.stream_wait_totals`) its
    ``stream_wait_ns``."""
    own = work.lazy().filter(pl.col("step").is_not_null() & ~pl.col("is_part"))  # tasks once
    parts = [
        own.group_by(KEY)
        .agg(
            pl.col("dur").filter(pl.col("is_fallback")).sum().alias("fallback_ns"),
            pl.col("dur").filter(pl.col("is_fused_comm")).sum().alias("fused_comm_ns"),
            pl.col("dur").filter(IS_COMPUTE).sum().alias("_compute_sum"),
            *(
                pl.col("dur").filter(pl.col("category") == c).sum().alias(f"cat_{c}_ns")
                for c in CATEGORIES
            ),
        )
        .collect(engine="in-memory")
    ]
    rows = clipped(work, windows) if in_windows is None else in_windows
    rows = rows.select(*KEY, "ts", "dur", "kind", "is_comm")
    # whole steps at a time: the interval sets of 10M rows at once are ~0.7 GiB
    frames, pieces = _by_steps(rows, STEPS_ROWS), []
    del rows
    while frames:
        pieces.append(_interval_metrics(frames.pop(), min_bubble_ns))
    parts.append(pl.concat(pieces, how="vertical_relaxed") if len(pieces) > 1 else pieces[0])
    if waits is not None:
        parts.append(waits.select(*KEY, "sync_wait_ns"))
    if stream_waits is not None:
        parts.append(stream_waits.select(*KEY, "stream_wait_ns"))
    out = windows.select(*KEY, "start", "dur")
    for part in parts:
        out = out.join(part, on=KEY, how="left")
    if ranges is not None:
        phases = ranges.select("rank", "step", "phase", "tokens")
        out = out.join(phases, on=["rank", "step"], how="left")
    if "sync_wait_ns" not in out.columns:
        out = out.with_columns(sync_wait_ns=pl.lit(0, pl.Int64))
    if "stream_wait_ns" not in out.columns:
        out = out.with_columns(stream_wait_ns=pl.lit(0, pl.Int64))
    zero = [c for c in out.columns if c.endswith("_ns") or c == "bubble_count"]
    out = out.with_columns(pl.col(zero).fill_null(0).cast(pl.Int64))
    for name, dtype in (("phase", pl.String), ("tokens", pl.Int64)):
        if name not in out.columns:
            out = out.with_columns(pl.lit(None, dtype).alias(name))
    out = out.with_columns(
        idle_ns=pl.col("dur") - pl.col("busy_ns"),
        comm_overlap_ratio=pl.when(pl.col("comm_ns") > 0).then(
            pl.col("_overlap_ns") / pl.col("comm_ns")
        ),
        fallback_share=pl.when(pl.col("_compute_sum") > 0).then(
            pl.col("fallback_ns") / pl.col("_compute_sum")
        ),
        ns_per_token=pl.when(pl.col("tokens") > 0).then(pl.col("dur") / pl.col("tokens")),
    )
    return out.select(METRIC_COLUMNS).sort(KEY)


def phase_summary(metrics: pl.DataFrame) -> list[dict[str, object]]:
    """Per phase (``decode`` first, ``unknown`` for steps with none): how many steps, their
    median / p90 duration (of the slowest rank and device), the tokens they processed and the
    median ns per token, so that a decode-step median never mixes prefill steps in."""
    if not metrics.height:
        return []
    order = {"decode": 0, "mixed": 1, "prefill": 2, "unknown": 3}
    per_token = pl.when(pl.col("tokens") > 0).then(pl.col("dur") / pl.col("tokens"))
    per_step = (  # a step lasts as long as its slowest (rank, device); ranks share tokens
        metrics.with_columns(phase=pl.col("phase").fill_null("unknown"))
        .group_by("step", "phase")
        .agg(pl.col("dur").max(), pl.col("tokens").max())
        .with_columns(ns_per_token=per_token)
    )
    rows = (
        per_step.group_by("phase")
        .agg(
            steps=pl.len(),
            median_ns=pl.col("dur").median(),
            p90_ns=pl.col("dur").quantile(0.9, "linear"),
            tokens=pl.col("tokens").sum(),
            ns_per_token=pl.col("ns_per_token").median(),
        )
        .to_dicts()
    )
    for row in rows:
        if row["tokens"] == 0 and row["ns_per_token"] is None:
            row["tokens"] = None
    return sorted(rows, key=lambda r: order.get(str(r["phase"]), 9))


def primary_phase(metrics: pl.DataFrame) -> pl.DataFrame:
    """The step rows a "step time" figure should use: the decode steps when there are any,
    else the steps of unknown phase, else all."""
    for wanted in ("decode", None):
        rows = metrics.filter(pl.col("phase") == wanted if wanted else pl.col("phase").is_null())
        if rows.height:
            return rows
    return metrics
