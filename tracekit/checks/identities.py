"""Accounting identities every analysis must satisfy, whatever the trace: the step windows
cover the device's busy time, categories add up to the kernel time, no single step holds
most of the time, rows are placed by their launch and device rows name their device."""

from __future__ import annotations

from typing import Any

import polars as pl

from tracekit.intervals import lengths, merge
from tracekit.model import Check, skipped
from tracekit.model import ns_text as _ns
from tracekit.steps import WORK_KINDS, Steps
from tracekit.steps.confidence import GIANT_SHARE, GIANT_STEPS, step_shares

COVER = 0.99  # step windows hold at least this share of the busy time between the steps
KEY = ["rank", "device"]


def window_cover(work: pl.DataFrame, windows: pl.DataFrame, metrics: pl.DataFrame) -> Check:
    """The busy time inside step windows against all busy time from the first step's start
    to the last step's end (per rank and device)."""
    if not work.height:
        return skipped("steps.cover")
    if not windows.height:
        return skipped("steps.cover", "no step windows: nothing to cover")
    span = windows.group_by(KEY).agg(_from=pl.col("start").min(), _to=pl.col("end").max())
    rows = (
        work.select(*KEY, "ts", "dur")
        .join(span, on=KEY, how="inner")
        .with_columns(
            ts=pl.max_horizontal("ts", "_from"),
            _end=pl.min_horizontal(pl.col("ts") + pl.col("dur"), pl.col("_to")),
        )
    )
    rows = rows.filter(pl.col("_end") > pl.col("ts")).with_columns(
        dur=pl.col("_end") - pl.col("ts")
    )
    total = int(lengths(merge(rows, KEY), KEY)["ns"].sum() or 0)
    inside = int(metrics["busy_ns"].sum() or 0)
    share = inside / total if total else 1.0
    status = "pass" if share >= COVER else "fail"
    detail = (
        f"step windows hold {share:.2%} of the device busy time between the first and the last"
        f" step ({_ns(inside)} of {_ns(total)}; at least {COVER:.0%} expected)"
    )
    return Check("steps.cover", status, detail, total, inside)


def categories_add_up(work: pl.DataFrame, metrics: pl.DataFrame) -> Check:
    """The per-category times of every step add up to the time of its device rows (an HCCL
    task counted once, in its collective): a row that lost its category or its step, or a
    step without metrics, breaks it."""
    if not work.height:
        return skipped("categories.sum")
    in_steps = pl.col("step").is_not_null() & ~pl.col("is_part")
    want = int(work.select(pl.col("dur").filter(in_steps).sum()).item() or 0)
    got = int(metrics.select(pl.sum_horizontal(pl.col("^cat_.*_ns$")).sum()).item() or 0)
    status = "pass" if got == want else "fail"
    detail = f"category times add up to {_ns(got)}; the device rows in steps take {_ns(want)}"
    return Check("categories.sum", status, detail, want, got)


def no_giant_step(work: pl.DataFrame, steps: Steps) -> Check:
    """With four or more steps of one phase, none holds more than half of their device time
    (a failure for decode steps, a warning where the phase is not known)."""
    if not work.height:
        return skipped("steps.giant")
    per = step_shares(work, steps).filter(pl.col("steps") >= GIANT_STEPS)
    if not per.height:
        return skipped("steps.giant", f"fewer than {GIANT_STEPS} steps of one phase")
    # ties (alike decode steps) go to the first step, so the detail is the same every run
    top = per.sort(["share", "rank", "step"], descending=[True, False, False]).row(0, named=True)
    # Decode steps are alike, so a giant one is a segmentation error; among steps of unknown
    # or mixed phase a long prefill may be real: a warning.
    giant = "fail" if top["phase"] == "decode" else "warn"
    status = "pass" if top["share"] <= GIANT_SHARE else giant
    label = f" '{top['label']}'" if top["label"] else ""
    detail = (
        f"the largest step (rank {top['rank']} step {top['step']}{label}) holds"
        f" {top['share']:.0%} of the device time of its phase's {top['steps']} steps"
        f" (at most {GIANT_SHARE:.0%} expected)"
    )
    return Check("steps.giant", status, detail, GIANT_SHARE, round(top["share"], 4))


def placement(work: pl.DataFrame) -> Check:
    """Device rows placed by host time only (they may sit a step late)."""
    if not work.height:
        return skipped("steps.placement")
    total = int(work["dur"].sum() or 0)
    host = pl.col("placed") == "host_time" if "placed" in work.columns else pl.lit(False)
    count, ns = work.select(host.sum().alias("rows"), pl.col("dur").filter(host).sum()).row(0)
    if not count:
        return Check("steps.placement", "pass", "no device row was placed by host time alone", 0, 0)
    share = int(ns) / total if total else 0.0
    detail = (
        f"{count:,} device rows ({share:.1%} of device time) had no launch link and no"
        " device window: placed by host time alone (the step range their start falls in)"
    )
    return Check("steps.placement", "warn", detail, 0, count)


def device_index(rows: pl.DataFrame) -> Check:
    """Device rows whose device index the trace does not give (analysed as the rank's one
    device, or device 0)."""
    device = pl.col("kind").is_in(WORK_KINDS)
    total, missing = rows.select(
        device.sum().alias("rows"), (device & pl.col("device").is_null()).sum().alias("missing")
    ).row(0)
    if not total:
        return skipped("rows.device")
    if not missing:
        return Check("rows.device", "pass", "every device row names its device", 0, 0)
    detail = (
        f"{missing:,} of {total:,} device rows have no device index; analysed on"
        " their rank's only device (or device 0)"
    )
    return Check("rows.device", "warn", detail, 0, missing)


def confidence(steps: Steps) -> Check:
    """How sure the step finding is."""
    status = "warn" if steps.confidence in ("low", "none") else "pass"
    why = f"; {steps.warnings[0]}" if steps.warnings else ""
    detail = f"steps found by {steps.method} with {steps.confidence} confidence{why}"
    return Check("steps.confidence", status, detail, None, steps.confidence)


def identity_checks(
    rows: pl.DataFrame,
    work: pl.DataFrame,
    windows: pl.DataFrame,
    metrics: pl.DataFrame,
    steps: Steps,
    meta: dict[str, Any],
) -> list[Check]:
    """Every identity check, in a fixed order."""
    return [
        confidence(steps),
        window_cover(work, windows, metrics),
        categories_add_up(work, metrics),
        no_giant_step(work, steps),
        placement(work),
        device_index(rows),
    ]
