"""Device rows placed in steps, and the steps' device windows.

A device row belongs to the step that launched it: the host range holding its launch call
(joined by correlation id); one launched outside every step belongs to none. A row without a
launch link (Ascend HCCL tasks, some copies and
communication rows) belongs to the step whose *device* window contains it, the windows built
from the rows that do have links, per rank and device; where the export names the row's step
itself (torch_npu ``Step Id``), that step. The host range its start falls in is the last
resort: the host often runs a step or more ahead of the device, so a host range holds the
device work of the step before. When steps are device-time ranges (device annotations,
msprof step trace, period or gap methods without launches), rows are placed by their own
start. :data:`PLACEMENTS` names the ways; :func:`assign` records for each row how it was placed.

Correlation ids are scoped to their process, and every join here is on ``(rank, corr)``: a
capture of several processes has one rank per process from the time it is loaded
(:func:`tracekit.parsers.processes.scope_ranks`), so that key is the process's too.
"""

from __future__ import annotations

import polars as pl

from tracekit.steps.model import WORK_KINDS, Steps, kind_is
from tracekit.timeline import part_mask

PLACEMENTS = ("launch", "export", "device_window", "device_time", "host_time", "none")
# Step labels whose number is the one torch_npu / msprof write as a row's Step Id
EXPORT_LABELS = r"^(?:ProfilerStep#|Step |Iteration )(\d+)$"


def work_rows(df: pl.DataFrame) -> pl.DataFrame:
    """The rows that occupy a device (kernels, communication, copies, fills), with
    ``is_part`` (:func:`tracekit.timeline.is_part`, computed once).

    A device row without a device index (torch_npu text exports record none; some HCCL rows
    lack it) is analysed on its rank's device when the rank's other rows name exactly one,
    else as device 0: one process drives one device there.
    """
    # the host's process and thread ids are no device row's business: not copied
    work = df.filter(kind_is(*WORK_KINDS)).drop("pid", "tid", strict=False)
    dev = pl.col("device")
    only = pl.when(dev.min().over("rank") == dev.max().over("rank")).then(dev.max().over("rank"))
    work = work.with_columns(dev.fill_null(only).fill_null(0)).filter(dev >= 0)
    return work.with_columns(part_mask(work))  # is_part: a task of another row (its op's)


def step_at(
    rows: pl.DataFrame, at: str, starts: pl.DataFrame, by: list[str], ends: bool
) -> pl.Series:
    """Step of each row by the time in column ``at``: the last range of its group ``by``
    that started at or before it (and, with ``ends``, has not ended yet); null otherwise.
    ``starts`` has ``*by, step, start`` (and ``end`` with ``ends``)."""
    probe = rows.select(pl.int_range(pl.len(), dtype=pl.UInt32).alias("_i"), *by, pl.col(at))
    probe = probe.filter(pl.col(at).is_not_null()).sort(at)
    found = probe.join_asof(
        starts.sort("start"),
        left_on=at,
        right_on="start",
        by=by,
        strategy="backward",
        check_sortedness=False,
    )
    step = pl.col("step")
    if ends:
        step = pl.when(pl.col(at) < pl.col("end")).then(step)
    found = found.select("_i", step.cast(pl.Int64).alias("step"))
    nulls = pl.repeat(None, rows.height, dtype=pl.Int64, eager=True).alias("step")
    return nulls.scatter(found["_i"], found["step"])


def _export_steps(
    work: pl.DataFrame, ranges: pl.DataFrame, wanted: pl.Series | None = None
) -> pl.Series:
    """The step the export names for a row (``args.step``, torch_npu's Step Id), mapped to
    this analysis' step index through the number at the end of each step's label
    (``ProfilerStep#7``, ``Step 7``); null where either is missing, and for rows where
    ``wanted`` is False (their args are not parsed)."""
    numbered = pl.col("label").str.extract(EXPORT_LABELS).cast(pl.Int64)
    labels = ranges.select("rank", "step", number=numbered).drop_nulls("number")
    nulls = pl.repeat(None, work.height, dtype=pl.Int64, eager=True).alias("step")
    if not labels.height or "args" not in work.columns:
        return nulls
    # a plain search first: most exports name no Step Id, and parsing every row's JSON is slow
    if not work.select(pl.col("args").str.contains('"step"', literal=True).any()).item():
        return nulls
    args = pl.col("args") if wanted is None else pl.when(wanted).then(pl.col("args"))
    named = work.select(
        "rank", number=args.str.json_path_match("$.step").cast(pl.Int64, strict=False)
    )
    if named["number"].null_count() == named.height:
        return nulls
    labels = labels.unique(subset=["rank", "number"], keep="first")
    return named.join(labels, on=["rank", "number"], how="left", maintain_order="left")["step"]


def _device_windows(work: pl.DataFrame, step: pl.Series) -> pl.DataFrame:
    """Per (rank, device, step), the first start of the rows placed so far."""
    return (
        work.select("rank", "device", "ts")
        .with_columns(step=step)
        .drop_nulls("step")
        .group_by("rank", "device", "step")
        .agg(start=pl.col("ts").min())
    )


PLACED = pl.Enum(PLACEMENTS)


def _placed(*ways: tuple[str, pl.Series]) -> pl.Series:
    """Per row, the first way (in order) that placed it; ``none`` when none did."""
    frame = pl.DataFrame({name: found.is_not_null() for name, found in ways})
    expr = pl.lit("none")
    for name, _ in reversed(ways):
        expr = pl.when(pl.col(name)).then(pl.lit(name)).otherwise(expr)
    return frame.select(expr.cast(PLACED).alias("placed"))["placed"]


def placement_counts(work: pl.DataFrame) -> dict[str, int]:
    """Rows placed each way (every key of :data:`PLACEMENTS`)."""
    counts = dict.fromkeys(PLACEMENTS, 0)
    if "placed" in work.columns:
        for name, n in work.group_by("placed").len().iter_rows():
            counts[str(name)] = int(n)
    return counts


def launch_key(calls: pl.LazyFrame, work: pl.DataFrame) -> pl.Expr:
    """One integer per (rank, correlation id), ``rank * span + corr``, where the ids allow
    it (one key hashes and joins in a fraction of the time and memory of two); else the
    pair as a struct. A rank is one process (correlation ids repeat across processes);
    host-only processes' rank -1 gives keys below every device process's."""
    rank = pl.col("rank").fill_null(0).cast(pl.Int64)
    bounds = [pl.col("corr").min().alias("low"), pl.col("corr").max().alias("high"),
              rank.max().alias("ranks")]  # fmt: skip
    both = pl.concat([calls.select(bounds).collect(), work.select(bounds)])
    low, high, ranks = both["low"].min(), both["high"].max(), both["ranks"].max()
    if low is None:
        return rank + pl.col("corr")  # no ids at all: nothing will match
    span = int(high) + 1
    if low >= 0 and span * (int(ranks) + 1) < 2**62:
        return rank * span + pl.col("corr")
    return pl.struct(rank, "corr")


def launch_times(df: pl.DataFrame, work: pl.DataFrame) -> pl.DataFrame:
    """Per row of ``work`` (in its order): its ``rank`` and ``_launch``, the start of the host
    call of ``df`` that launched it (the first call of a repeated id; null where none)."""
    calls = df.lazy().filter(kind_is("api") & pl.col("corr").is_not_null())
    key = launch_key(calls, work)
    # lazy: only the key and the time are gathered, not every column of the calls
    launches = calls.select(_key=key, _launch=pl.col("ts")).collect()
    if launches["_key"].n_unique() < launches.height:  # the first call of a repeated id
        launches = launches.unique(subset="_key", keep="first")  # (order: joined below)
    # the join on the key alone: joining the work rows would copy every column
    linked = work.select("rank", _key=key).join(
        launches, on="_key", how="left", maintain_order="left"
    )
    return linked.drop("_key")


def assign(df: pl.DataFrame, steps: Steps) -> pl.DataFrame:
    """Device work rows of ``df`` with ``rank`` filled, a ``step`` column (null: none) and
    ``placed``: how the row was placed (:data:`PLACEMENTS`)."""
    work = work_rows(df).with_columns(pl.col("rank").fill_null(0).cast(pl.Int32))
    ranges = steps.ranges.select("rank", "step", "start", "end", "label")
    if steps.by_device_time:
        by_time = step_at(work, "ts", ranges, ["rank"], ends=False)
        exported = _export_steps(work, ranges)
        placed = _placed(("export", exported), ("device_time", by_time))
        return work.with_columns(step=pl.coalesce(exported, by_time), placed=placed)
    linked = launch_times(df, work)
    by_launch = step_at(linked, "_launch", ranges, ["rank"], ends=True)
    # launched, but outside every step's host range (before the first, after the last): none
    unlinked = by_launch.is_null() & linked["_launch"].is_null()
    del linked
    work = work.with_columns(step=by_launch)
    launched = pl.when(pl.col("step").is_null()).then(pl.lit("none")).otherwise(pl.lit("launch"))
    if not unlinked.any():
        return work.with_columns(placed=launched.cast(PLACED))
    # the other ways only for the rows without a launch (usually few)
    windows = _device_windows(work, by_launch)
    rest = work.filter(unlinked)
    exported = _export_steps(rest, ranges)
    by_window = step_at(rest, "ts", windows, ["rank", "device"], ends=False)
    by_host = step_at(rest, "ts", ranges, ["rank"], ends=False)
    ways = (("export", exported), ("device_window", by_window), ("host_time", by_host))
    rest = rest.select(step=pl.coalesce(exported, by_window, by_host), placed=_placed(*ways))
    order = pl.int_range(pl.len(), dtype=pl.UInt32)
    where = work.select(order.filter(unlinked).alias("i"))["i"]
    step = work["step"].scatter(where, rest["step"])
    placed = work.select(launched.cast(PLACED).alias("placed"))["placed"]
    placed = placed.scatter(where, rest["placed"])
    return work.with_columns(step=step, placed=placed)


def host_lead(df: pl.DataFrame, work: pl.DataFrame, sample: int = 200_000) -> int | None:
    """The median time from a launch call to its device row's start, over (a sample of) the
    rows placed by their launch: how far the host runs ahead of the device."""
    linked = work.filter(pl.col("placed") == "launch").select("rank", "corr", "ts").head(sample)
    if not linked.height:
        return None
    launches = (
        df.lazy()
        .filter(kind_is("api") & pl.col("corr").is_in(linked["corr"].implode()))
        .select(pl.col("rank").fill_null(0).cast(pl.Int32), "corr", launch=pl.col("ts"))
        .collect()
        .unique(subset=["rank", "corr"], keep="first", maintain_order=True)
    )
    lead = linked.join(launches, on=["rank", "corr"]).select(pl.col("ts") - pl.col("launch"))
    return None if not lead.height else int(lead.to_series().median())


def windows(work: pl.DataFrame) -> pl.DataFrame:
    """Per (rank, device, step): ``start`` (first row), ``end`` (the next step's first row
    on that device; the last step ends at its last row) and ``dur``."""
    per = (
        work.filter(pl.col("step").is_not_null())
        .group_by("rank", "device", "step")
        .agg(start=pl.col("ts").min(), last=(pl.col("ts") + pl.col("dur")).max())
        .sort("rank", "device", "step")
    )
    end = pl.col("start").shift(-1).over("rank", "device").fill_null(pl.col("last"))
    per = per.with_columns(end=pl.max_horizontal(end, pl.col("start")))
    return per.select("rank", "device", "step", "start", "end", dur=pl.col("end") - pl.col("start"))
