"""Is the capture complete? ``capture.complete`` looks for work the trace itself says was
done but holds no rows for, so that a partial capture is not analysed as the run:

* host launch calls whose correlation id has no device row (keyed by rank and id); those
  after the rank's last device row are the profiler's stop edge and count only when many;
* graph launches whose window, up to the synchronisation on the same thread that waited for
  them, holds little device time (the replay's kernels were not recorded);
* vendor summaries (op_statistic, kernel_details, rocprof stats …) that count more calls
  than the export lists;
* device rows on devices that the trace's device table cannot account for;
* an export cut short (``meta["truncated"]``) or at a round number of kernel rows.

The check needs only the timeline's columns and metadata (``info`` runs it without an
analysis). It fails when some signal says that less than half of the work was recorded.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from tracekit.checks.vendor import summaries, summary_counts
from tracekit.intervals import merge
from tracekit.model import Check
from tracekit.steps.graphs import GRAPH_LAUNCHES
from tracekit.steps.model import WORK_KINDS, named
from tracekit.steps.placement import launch_key
from tracekit.timeline import part_mask

NAME = "capture.complete"
# Host calls that put work on a device (runtime, driver, Ascend's task launch node). Memsets
# are left out: CUDA records no device row for some (zero bytes, or run as a kernel).
LAUNCHES = (
    r"^(cuda|hip)(Ext)?LaunchKernel|^cuLaunchKernel|^(cuda|hip|cu)LaunchCooperativeKernel"
    r"|^hip(Ext)?ModuleLaunchKernel|^(cuda|hip|cu)Memcpy\w*Async|^(Node@)?launch$"
    r"|^(AscendCL@)?aclrtMemcpyAsync$"
)
SYNCS = r"(Stream|Device|Event|Ctx)Synchroni[sz]e|aclrtSynchroni[sz]e"
# A stream capture's ends: launches between them on one thread are recorded, not run.
CAPTURE_MARKS = (
    r"^(cuda|hip)StreamBeginCapture|^(cuda|hip)StreamEndCapture|^cuStream(Begin|End)Capture"
)
HOLE_SHARE = 0.001  # launches without device rows among those before the last device row
TAIL_SHARE = 0.02  # ... and after it (the stop edge): tolerated up to this share
GRAPH_COVER = 0.7  # a waited-for graph window should be this busy at least
WAIT_MIN_NS = 50_000  # a synchronisation shorter than this did not wait for the device
WAIT_SHARE = 0.1  # ... nor one this short a part of the window
SUMMARY_SHARE = 0.01  # calls a vendor summary counts that the export lacks
FAIL_BELOW = 0.5  # recorded share of some work below which the check fails
ROUND_COUNTS = frozenset(m * 10**e // 10 for e in range(2, 7) for m in (10, 20, 25, 50))


def _ms(ns: float) -> str:
    return f"{ns / 1e6:,.1f} ms"


def _host(rows: pl.DataFrame) -> pl.DataFrame:
    """API rows with the columns the signals read (rank 0 where the trace names none)."""
    api = rows.filter(pl.col("kind") == "api")
    return api.select(
        pl.col("rank").fill_null(0),
        "pid",
        "tid",
        "corr",
        "ts",
        "dur",
        "name",  # categorical: cast where few rows are left
    )


def _device(rows: pl.DataFrame) -> pl.DataFrame:
    return rows.filter(pl.col("kind").is_in(list(WORK_KINDS))).select(
        pl.col("rank").fill_null(0), "device", "corr", "ts", "dur", "kind", "args"
    )


def captured(api: pl.DataFrame, calls: pl.DataFrame) -> pl.Series:
    """Per call of ``calls``, whether it falls inside a stream capture on its thread (between
    ``cudaStreamBeginCapture`` / ``hipStreamBeginCapture`` and the matching ``EndCapture``):
    such a launch is recorded into a graph and never runs, so it has no device row."""
    marks = api.filter(named(api, CAPTURE_MARKS)).select(
        "rank", "pid", "tid", "ts", begin=pl.col("name").cast(pl.String).str.contains("Begin")
    )
    if not marks.height:
        return pl.repeat(False, calls.height, eager=True)
    probe = calls.select("rank", "pid", "tid", "ts").with_row_index("_i").sort("ts")
    last = probe.join_asof(
        marks.sort("ts"),
        on="ts",
        by=["rank", "pid", "tid"],
        strategy="backward",
        check_sortedness=False,
    )
    inside = last.sort("_i")["begin"].fill_null(False)
    return inside


def launch_calls(api: pl.DataFrame) -> tuple[pl.DataFrame, int]:
    """The launch calls that should have put work on a device, and how many others were
    recorded into a graph during a stream capture (:func:`captured`): those never run."""
    calls = api.filter(named(api, f"{LAUNCHES}|{GRAPH_LAUNCHES}") & pl.col("corr").is_not_null())
    if not calls.height:
        return calls, 0
    inside = captured(api, calls)
    return calls.filter(~inside), int(inside.sum())


def _launches(calls: pl.DataFrame, dev: pl.DataFrame) -> tuple[str, float, int, int] | None:
    """Launch calls (:func:`launch_calls`) without a device row: ``(detail, recorded share,
    launches, linked)``, or None when every launch (bar a tolerated stop edge) has its
    rows."""
    if not calls.height:
        return None
    key = launch_key(calls.lazy(), dev)
    linked = dev.select(_k=key).drop_nulls()["_k"]
    last = dev.group_by("rank").agg(last=pl.col("ts").max())
    lost = (
        calls.filter(~key.is_in(linked.implode()))
        .join(last, on="rank", how="left")
        .with_columns(tail=pl.col("last").is_null() | (pl.col("ts") > pl.col("last")))
    )
    holes, tail = int((~lost["tail"]).sum()), int(lost["tail"].sum())
    n = calls.height
    counted = (holes if holes / n >= HOLE_SHARE else 0) + (tail if tail / n > TAIL_SHARE else 0)
    if not counted:
        return None
    top = ", ".join(
        f"{name} ×{k:,}"
        for name, k in lost.group_by("name")
        .len()
        .with_columns(pl.col("name").cast(pl.String))
        .sort("len", "name", descending=[True, False])
        .head(3)
        .iter_rows()
    )
    parts = []
    if holes / n >= HOLE_SHARE:
        parts.append(f"{holes:,} of {n:,} launch calls have no device row")
    if not dev.height:
        parts = [f"none of {n:,} launch calls has a device row (no device activity recorded)"]
    elif tail / n > TAIL_SHARE:
        parts.append(f"{tail:,} of {n:,} launch calls come after the last device row")
    return f"{'; '.join(parts)} ({top})", 1 - counted / n, n, n - counted


def _busy_before(starts: np.ndarray, ends: np.ndarray, at: np.ndarray) -> np.ndarray:
    """Busy ns before each time in ``at`` over merged, sorted intervals."""
    done = np.concatenate([[0], np.cumsum(ends - starts)])
    i = np.searchsorted(starts, at, side="right")  # intervals starting at or before
    inside = np.where(i > 0, np.clip(at - starts[np.maximum(i - 1, 0)], 0, None), 0)
    inside = np.minimum(inside, np.where(i > 0, (ends - starts)[np.maximum(i - 1, 0)], 0))
    return done[np.maximum(i - 1, 0)] * (i > 0) + inside


def graph_windows(api: pl.DataFrame, dev: pl.DataFrame) -> pl.DataFrame:
    """Per synchronisation that waited for graph launches: ``rank, start`` (the first launch),
    ``end`` (the synchronisation's end), ``launches`` and ``busy_ns`` (device time of the
    rank inside the window)."""
    graphs = api.filter(named(api, GRAPH_LAUNCHES)).with_columns(after=pl.col("ts") + pl.col("dur"))
    syncs = api.filter(named(api, SYNCS))
    empty = pl.DataFrame(
        schema={
            "rank": pl.Int32,
            "start": pl.Int64,
            "end": pl.Int64,
            "launches": pl.UInt32,
            "busy_ns": pl.Int64,
        }
    )
    if not graphs.height or not syncs.height:
        return empty
    by = ["rank", "pid", "tid"]
    waits = syncs.select(*by, sync=pl.col("ts"), end=pl.col("ts") + pl.col("dur"))
    joined = graphs.sort("after").join_asof(
        waits.sort("sync"),
        left_on="after",
        right_on="sync",
        by=by,
        strategy="forward",
        check_sortedness=False,
    )
    windows = (
        joined.filter(pl.col("sync").is_not_null())
        .group_by(*by, "sync", "end")
        .agg(start=pl.col("ts").min(), launches=pl.len())
        .filter(
            (pl.col("end") - pl.col("sync") >= WAIT_MIN_NS)
            & (pl.col("end") - pl.col("sync") >= WAIT_SHARE * (pl.col("end") - pl.col("start")))
        )
    )
    if not windows.height:
        return empty
    busy = merge(dev.select("rank", "ts", "dur"), ["rank"])
    out = []
    for (rank,), win in windows.group_by("rank"):
        mine = busy.filter(pl.col("rank") == rank)
        s, e = mine["start"].to_numpy(), mine["end"].to_numpy()
        a, b = win["start"].to_numpy(), win["end"].to_numpy()
        ns = _busy_before(s, e, b) - _busy_before(s, e, a) if s.size else np.zeros(a.size)
        out.append(
            win.select("rank", "start", "end", "launches").with_columns(
                busy_ns=pl.Series(ns.astype(np.int64))
            )
        )
    return pl.concat(out).sort("rank", "start")


def _graphs(windows: pl.DataFrame) -> tuple[str, float, int, int] | None:
    """Graph replays whose waited-for windows hold too little device time."""
    if not windows.height:
        return None
    window = int((windows["end"] - windows["start"]).sum())
    busy = int(windows["busy_ns"].sum())
    if busy >= GRAPH_COVER * window:
        return None
    n = int(windows["launches"].sum())
    detail = (
        f"{n:,} graph launch(es) hold {_ms(busy)} of device rows in the {_ms(window)} up to the"
        f" synchronisation that waited for them ({busy / window:.0%}; the replay's kernels were"
        " recorded in part)"
    )
    return detail, busy / window, window, busy


def _summaries(rows: pl.DataFrame, meta: dict[str, Any]) -> tuple[str, float, int, int] | None:
    """The summary whose call counts the export falls furthest short of."""
    worst = None
    for summary in summaries(meta):
        if summary.get("kind") not in ("kernels", "api", "copies"):
            continue
        want = pl.DataFrame(
            [
                (str(r.get("key")), int(r["calls"]))
                for r in summary.get("rows", [])
                if r.get("calls") is not None
            ],
            schema={"key": pl.String, "want": pl.Int64},
            orient="row",
        )
        if not want.height:
            continue
        ours = summary_counts(summary, rows).select(pl.col("key").cast(pl.String), "calls")
        both = want.join(ours, on="key", how="left").with_columns(pl.col("calls").fill_null(0))
        total = int(want["want"].sum())
        missing = int((both["want"] - both["calls"]).clip(lower_bound=0).sum())
        if (
            total
            and missing / total > SUMMARY_SHARE
            and (worst is None or missing / total > 1 - worst[1])
        ):
            source = summary.get("source", "?")
            detail = (
                f"{source} counts {total:,} calls; the export lists {total - missing:,} of them"
                f" ({missing:,} missing)"
            )
            worst = (detail, 1 - missing / total, total, total - missing)
    return worst


def _devices(dev: pl.DataFrame, meta: dict[str, Any]) -> str | None:
    """Device rows on devices the device table cannot account for: more devices used than it
    lists, some not in it (fewer or equal may be the visible devices renumbered)."""
    table = {d.get("index") for d in meta.get("devices") or [] if isinstance(d, dict)}
    table.discard(None)
    used = set(dev.filter(pl.col("device") >= 0)["device"].unique().to_list())
    absent = sorted(used - table)
    if not table or not absent or len(used) <= len(table):
        return None
    listed = ", ".join(str(d) for d in sorted(table, key=str))
    return f"rows on device(s) {', '.join(map(str, absent))} that the device table ({listed}) lacks"


def _round_cut(dev: pl.DataFrame) -> str | None:
    """A rank whose kernel rows (tasks of an operator not counted) are a round number."""
    kernels = dev.filter(pl.col("kind").is_in(["kernel", "comm"]))
    kernels = kernels.filter(~part_mask(kernels))
    for rank, n in kernels.group_by("rank").len().sort("rank").iter_rows():
        if n in ROUND_COUNTS:
            return (
                f"rank {rank} holds exactly {n:,} kernel rows: the export looks cut at a row limit"
            )
    return None


def capture_check(rows: pl.DataFrame, meta: dict[str, Any]) -> Check:
    """``capture.complete`` of a trace's rows (timeline columns) and metadata."""
    api, dev = _host(rows), _device(rows)
    calls, recorded = launch_calls(api)
    windows = graph_windows(api, dev)
    found = [f for f in (_launches(calls, dev), _graphs(windows), _summaries(rows, meta)) if f]
    found.sort(key=lambda f: f[1])
    notes = [n for n in (_devices(dev, meta),) if n]
    if meta.get("truncated"):
        notes.append("the export is cut short (its file ends early)")
    if found or notes:
        cut = _round_cut(dev)
        notes += [cut] if cut else []
        details = [f[0] for f in found] + notes
        status = "fail" if found and found[0][1] < FAIL_BELOW else "warn"
        expected, actual = (found[0][2], found[0][3]) if found else (None, None)
        return Check(NAME, status, "; ".join(details), expected, actual)
    checked = _checked(calls, recorded, windows, meta)
    if not checked:
        return Check(NAME, "skip", "nothing in this trace to check the capture against")
    return Check(NAME, "pass", "; ".join(checked))


def _checked(
    calls: pl.DataFrame, recorded: int, windows: pl.DataFrame, meta: dict[str, Any]
) -> list[str]:
    """What a passing check compared, one phrase each (none when nothing)."""
    said = []
    if calls.height or recorded:
        n = calls.height + recorded
        aside = f"; {recorded:,} recorded into a graph by a stream capture" if recorded else ""
        said.append(f"every launch call has its device rows ({n:,} calls{aside})")
    if windows.height:
        said.append(f"{windows.height:,} waited-for graph replay window(s) hold their device time")
    sources = {
        s.get("source", "?")
        for s in summaries(meta)
        if s.get("kind") in ("kernels", "api", "copies")
    }
    if sources:
        said.append(f"the export lists every call that {', '.join(sorted(sources))} count(s)")
    return said


def capture_note(check: Check | None) -> str | None:
    """The one line said first when ``capture.complete`` did not pass, else None."""
    if check is None or check.status not in ("warn", "fail"):
        return None
    return f"incomplete capture: {check.detail}; the numbers describe only what was recorded"
