"""tracekit's numbers against the vendor's own summaries, where the export has them.

Parsers keep what they find in ``meta["summaries"]``: a list of ``{"kind", "source", "key",
"rank", "rows"}`` (``rank`` when the summary is one rank's):

* ``kind == "steps"`` (torch_npu ``step_trace_time.csv``, ``analysis.db`` StepTraceTime):
  rows ``{step, computing_ns, not_overlapped_ns, overlapped_ns}``, compared per step with the
  time split as the vendors split it (:func:`vendor_view`);
* ``kind == "kernels"`` / ``"api"`` / ``"copies"`` (rocprof ``*stats.csv``, ``op_statistic``,
  ``kernel_details``): rows ``{key, calls, total_ns}`` per name (``key == "name"``; with
  ``"name_column": "raw"`` the name as the profiler wrote it, before demangling) or per
  operator type (``key == "op_type"``), compared with the count and summed duration of our
  kernel, API or copy rows.

A value agrees within :data:`REL` of the vendor's, or :data:`ABS_NS` (the vendors round to
the µs); the first step or kernel that disagrees is named with both values.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import polars as pl

from tracekit.intervals import intersect, lengths, merge, subtract
from tracekit.metrics import IS_COMPUTE
from tracekit.model import Check, skipped
from tracekit.steps import WORK_KINDS

REL = 0.01  # relative tolerance ...
ABS_NS = 1_000  # ... or absolute, whichever is larger
STEP_FIELDS = ("computing_ns", "not_overlapped_ns", "overlapped_ns")
KEY = ["rank", "device", "step"]
# Only steps found from the profiler's own step markers carry the vendor's step number.
STEP_LABEL = r"^(?:ProfilerStep#|Step\s*)(\d+)\s*$"
# The vendors count by the engine that runs a task: a fused compute-communication kernel (MC²)
# runs on the compute cores and its AI CPU side on the AI CPU, so both are computing;
# communication is what the communication engine (HCCL) runs.
_AI_CPU = pl.col("engine").cast(pl.String).fill_null("") == "ai_cpu"
VENDOR_COMPUTE = IS_COMPUTE | (pl.col("is_fused_comm") | (pl.col("is_comm") & _AI_CPU))
VENDOR_COMM = pl.col("is_comm") & ~pl.col("is_fused_comm") & ~_AI_CPU
# the columns the two read
VENDOR_COLUMNS = tuple(
    dict.fromkeys(VENDOR_COMPUTE.meta.root_names() + VENDOR_COMM.meta.root_names())
)


def _close(want: float, got: float) -> bool:
    return abs(got - want) <= max(ABS_NS, REL * abs(want))


def _check_name(kind: str, summary: dict[str, Any]) -> str:
    """``vendor.steps:step_trace_time.csv``, with ``@rank1`` when the summary is one rank's."""
    rank = summary.get("rank")
    return f"vendor.{kind}:{summary.get('source', '?')}" + ("" if rank is None else f"@rank{rank}")


def vendor_view(in_windows: pl.DataFrame) -> pl.DataFrame:
    """Per (rank, device, step), the step's time as the vendors split it: ``computing_ns``
    (union of compute kernels, fused compute-communication ones included),
    ``not_overlapped_ns`` (communication outside them) and ``overlapped_ns``."""
    rows = in_windows.filter(pl.col("step").is_not_null())
    compute, comm = rows.filter(VENDOR_COMPUTE), rows.filter(VENDOR_COMM)
    parts = [
        lengths(merge(compute, KEY), KEY, "computing_ns"),
        lengths(subtract(comm, compute, KEY), KEY, "not_overlapped_ns"),
        lengths(intersect(comm, compute, KEY), KEY, "overlapped_ns"),
    ]
    out = rows.select(KEY).unique()
    for part in parts:
        out = out.join(part, on=KEY, how="left")
    return out.with_columns(pl.col(STEP_FIELDS).fill_null(0))


def _steps_check(summary: dict[str, Any], view: pl.DataFrame, labels: pl.DataFrame) -> Check:
    """Per step: the vendor's compute / exposed / overlapped communication against ours."""
    source = summary.get("source", "?")
    name = _check_name("steps", summary)
    if summary.get("rank") is not None:  # one rank's summary
        view = view.filter(pl.col("rank") == summary["rank"])
    ours = (
        view.join(labels, on=["rank", "step"], how="left")
        .with_columns(number=pl.col("label").str.extract(STEP_LABEL))
        .group_by("number")
        .agg(pl.col(STEP_FIELDS).sum())
    )
    found = {str(r["number"]): r for r in ours.iter_rows(named=True) if r["number"] is not None}
    compared, worst, steps = 0, None, set()
    for row in summary.get("rows", []):
        step = str(row.get("step"))
        if step not in found:
            continue
        steps.add(step)
        for field in STEP_FIELDS:
            want, got = row.get(field), found[step][field]
            if want is None or got is None:
                continue
            compared += 1
            if not _close(want, got):
                off = abs(got - want) / max(abs(want), 1)
                if worst is None or off > worst[0]:
                    worst = (off, step, field, want, got)
    listed = [str(r.get("step")) for r in summary.get("rows", [])]
    unmatched = [step for step in listed if step not in steps]
    if not compared:
        return Check(
            name,
            "warn",
            f"{source} names steps ({', '.join(listed[:5])}) that no step found"
            " here from the profiler's step markers has: not compared",
        )
    if worst is None:
        detail = (
            f"{len(steps)} step(s) agree with {source}: computing, communication not overlapped"
            f" and overlapped ({compared} values)"
        )
        if unmatched:  # agreement on some steps says nothing of the others
            detail += f"; {len(unmatched)} of its steps not found here ({', '.join(unmatched[:5])})"
            return Check(name, "warn", detail, len(listed), len(steps))
        return Check(name, "pass", detail, compared, compared)
    off, step, field, want, got = worst
    detail = (
        f"step {step}: {field.removesuffix('_ns')} {got:,.0f} ns here, {want:,.0f} ns in {source}"
        f" ({off:.1%} off)"
    )
    return Check(name, "fail", detail, round(want), round(got))


SUMMARY_KINDS = {"kernels": ["kernel", "comm"], "api": ["api"], "copies": ["memcpy", "memset"]}


def summary_counts(summary: dict[str, Any], rows: pl.DataFrame) -> pl.DataFrame:
    """Our rows counted as a ``kernels``/``api``/``copies`` summary counts them: ``key``,
    ``calls`` and ``total_ns`` per name (or operator type), on the summary's rank only."""
    rows = rows.filter(pl.col("kind").is_in(SUMMARY_KINDS[summary.get("kind", "kernels")]))
    if summary.get("rank") is not None:
        rows = rows.filter(pl.col("rank") == summary["rank"])
    key = summary.get("key", "name")
    if key == "name":
        by = pl.col("name").cast(pl.String)
        if summary.get("name_column") == "raw":  # keys as the profiler wrote them
            by = pl.coalesce(pl.col("args").str.json_path_match("$.mangled_name"), by)
    else:
        by = pl.col("args").str.json_path_match(f"$.{key}")
    return rows.group_by(by.alias("key")).agg(calls=pl.len(), total_ns=pl.col("dur").sum())


def _kernels_check(summary: dict[str, Any], rows: pl.DataFrame) -> Check:
    """Per kernel, API or copy name (or operator type): the vendor's calls and total time
    against those of our rows of that kind."""
    source, key = summary.get("source", "?"), summary.get("key", "name")
    kind = summary.get("kind", "kernels")
    name = _check_name(kind, summary)
    found = {r["key"]: r for r in summary_counts(summary, rows).iter_rows(named=True)}
    worst, compared, missing = None, 0, []
    for row in summary.get("rows", []):
        if row.get("calls") is None or row.get("total_ns") is None:
            continue  # a row the parser could not read: not compared
        got = found.get(row.get("key"))
        if got is None:
            missing.append(str(row.get("key")))
            continue
        compared += 1
        if got["calls"] != row.get("calls") or not _close(row["total_ns"], got["total_ns"]):
            off = abs(got["total_ns"] - row["total_ns"]) / max(row["total_ns"], 1)
            if worst is None or off > worst[0]:
                worst = (off, row, got)
    if missing:
        detail = f"{len(missing)} {key}s of {source} have no row here, e.g. {missing[0][:80]!r}"
        return Check(name, "fail", detail, len(summary.get("rows", [])), compared)
    if worst is None:
        detail = f"{compared} {key}s agree with {source} in calls and time"
        return Check(name, "pass", detail, compared, compared)
    off, row, got = worst
    detail = (
        f"{str(row['key'])[:80]!r}: {got['calls']} calls, {got['total_ns']:,} ns here;"
        f" {row['calls']} calls, {row['total_ns']:,.0f} ns in {source} ({off:.1%} off)"
    )
    return Check(name, "fail", detail, round(row["total_ns"]), got["total_ns"])


def summaries(meta: dict[str, Any]) -> list[dict[str, Any]]:
    """The vendor summaries the parser kept in ``meta["summaries"]`` (each a dict; a saved
    timeline may hold them as JSON text)."""
    return [json.loads(s) if isinstance(s, str) else s for s in meta.get("summaries") or []]


def vendor_checks(
    rows: pl.DataFrame,
    in_windows: Callable[[], pl.DataFrame],
    labels: pl.DataFrame,
    meta: dict[str, Any],
) -> list[Check]:
    """One check per vendor summary the parser kept (``rows``: every row of the trace;
    ``in_windows()``: the device rows cut to their step's window, made only for a step
    summary)."""
    out = []
    view = None
    device = rows.select(pl.col("kind").is_in(list(WORK_KINDS)).any()).item()
    for summary in summaries(meta):
        if not device and summary.get("kind") in ("steps", "kernels", "copies"):
            out.append(skipped(_check_name(summary.get("kind"), summary)))
        elif summary.get("kind") == "steps":
            view = vendor_view(in_windows()) if view is None else view
            out.append(_steps_check(summary, view, labels))
        elif summary.get("kind") in ("kernels", "api", "copies"):
            out.append(_kernels_check(summary, rows))
    return out
