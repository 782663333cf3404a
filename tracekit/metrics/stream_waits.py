"""Streams waiting on events, and what each waited for.

A stream that waits on an event runs nothing until the event is recorded: by another stream
(``waiting on stream N``) or by the host when a callback returns (``waiting on a host
callback``). The traces record it in two ways:

* **timed waits** -- device rows that last as long as the stream was blocked: Ascend
  ``EVENT_WAIT`` / ``STREAM_WAIT_EVENT`` / ``EVENT_WAIT_SQE`` … tasks (msprof ``task_time``,
  the db ``TASK`` table, the trace_view hardware layer) and the HSA barrier packets rocprof
  writes for ``hipStreamWaitEvent`` (``Barrier`` rows);
  Older chips (Ascend 910 with CANN 6 msprof) time an ``EVENT_WAIT`` as the instant it was
  satisfied (10 ns tasks): a wait shorter than :data:`SHORT_WAIT_NS` after an idle gap on its
  stream blocked that stream from the gap's start, when the event record that released it
  ended inside the gap at most :data:`EVENT_LATENCY_NS` before the wait was timed (else it
  stays as timed: a record long before it released nothing the stream was waiting for);
* **issued waits** -- CUPTI's ``Stream Wait Event`` synchronization records (nsys, Kineto
  ``cuda_sync``), timed on the host when ``cudaStreamWaitEvent`` ran. The stream's blocked
  time is then the gap on that stream from the wait (or its previous row, whichever ends
  later) to its next row, when the stream it waited on (Kineto's ``wait_on_stream``, else
  any other) finished work inside that gap, cut :data:`SLACK_NS` after that work's end (the
  rest of the gap is the host's late launch); a gap no other stream closes is the host's.

What a wait waited for: a host callback when the task before it on its stream is a
``HOSTFUNC_CALLBACK`` (CANN runs a blocking callback as a callback task and a wait on the
event the host records when it returns), or when the record it matched follows one on its
stream; else the stream of the latest event record (Ascend) or, without records, of the
latest work, on another stream of the device that ended inside the wait (within
:data:`SLACK_NS`); else an event nobody is seen recording.

``stream_wait_ns`` per (rank, device, step): the time in the waits during which the device ran
nothing at all, cut to the step's window: the idle time the waits explain (a stream waiting
while another one works costs no idle time). It is not ``sync_wait_ns`` (ranks waiting for
each other at collectives).
"""

from __future__ import annotations

import polars as pl

from tracekit.intervals import lengths, merge, subtract
from tracekit.metrics import DEVICE, KEY

TIMED_WAITS = (
    "EVENT_WAIT",
    "STREAM_WAIT_EVENT",
    "EVENT_WAIT_SQE",
    "DAVID_EVENT_WAIT",
    "IPC_EVENT_WAIT",
    "CAPTURE_WAIT",
    "MEM_WAIT_VALUE",
)
ISSUED_WAITS = ("Stream Wait Event",)  # CUPTI synchronization records (nsys, Kineto)
BARRIER = r"(?i)barrier"  # rocprof's HSA barrier packets: timed waits on a HIP stream
RECORDS = (
    "EVENT_RECORD",
    "EVENT_RECORD_SQE",
    "DAVID_EVENT_RECORD",
    "IPC_EVENT_RECORD",
    "CAPTURE_RECORD",
)
CALLBACKS = ("HOSTFUNC_CALLBACK",)
SLACK_NS = 2_000  # a wait may end this long after the record that released it is timed
SHORT_WAIT_NS = 1_000  # a timed wait this short was timed when satisfied, not while blocked
# a short timed wait is satisfied at most this long after the record that released it ends
# (an Ascend 910 trace, CANN 6 msprof: 16.5 µs from EVENT_RECORD's end to the EVENT_WAIT)
EVENT_LATENCY_NS = 50_000
HOST_CALLBACK = "waiting on a host callback"
ON_EVENT = "waiting on an event"
ON_STREAM = "waiting on stream {}"
STREAM = [*DEVICE, "stream"]
WAIT_COLUMNS = {
    "rank": pl.Int32,
    "device": pl.Int32,
    "stream": pl.Int64,
    "start": pl.Int64,
    "end": pl.Int64,
    "target": pl.Int64,
    "cause": pl.String,
}


def _device_rows(rows: pl.DataFrame, work: pl.DataFrame) -> pl.DataFrame:
    """Sync rows on a device stream, ``rank``/``device`` filled as the work rows are (a rank
    whose work runs on one device holds its rows without a device index)."""
    sync = rows.lazy().filter((pl.col("kind") == "sync") & pl.col("stream").is_not_null())
    sync = sync.select(
        pl.col("rank").fill_null(0).cast(pl.Int32),
        pl.col("device").cast(pl.Int32),
        pl.col("stream").cast(pl.Int64),
        "ts",
        "dur",
        pl.col("name").cast(pl.String),
        pl.col("args").cast(pl.String) if "args" in rows.columns else pl.lit(None, pl.String),
    ).collect()
    if not sync.height:
        return sync
    only = (
        work.lazy()
        .group_by(pl.col("rank").fill_null(0).cast(pl.Int32).alias("rank"))
        .agg(_only=pl.when(pl.col("device").n_unique() == 1).then(pl.col("device").first()))
        .collect()
    )
    sync = sync.join(only, on="rank", how="left")
    device = pl.col("device").fill_null(pl.col("_only")).fill_null(0).cast(pl.Int32)
    return sync.with_columns(device=device).drop("_only").filter(pl.col("device") >= 0)


def _work(work: pl.DataFrame) -> pl.DataFrame:
    return work.select(
        pl.col("rank").fill_null(0).cast(pl.Int32),
        pl.col("device").cast(pl.Int32),
        pl.col("stream").cast(pl.Int64),
        "ts",
        _end=pl.col("ts") + pl.col("dur"),
    ).drop_nulls("stream")


def _issued(waits: pl.DataFrame, work: pl.DataFrame) -> pl.DataFrame:
    """Issued waits as the gap they blocked on their stream: from the wait (or the stream's
    previous row, ending later) to the stream's next row."""
    if not waits.height:
        return waits.select(*STREAM, start="ts", end="ts", _wanted="_wanted")
    on = work.select(*STREAM, "ts", "_end")
    nxt = waits.sort("ts").join_asof(
        on.sort("ts").select(*STREAM, _next="ts"),
        left_on="ts",
        right_on="_next",
        by=STREAM,
        strategy="forward",
        check_sortedness=False,
    )
    # the latest end among the stream's rows that started before the wait was issued
    reach = on.sort("ts").with_columns(_reach=pl.col("_end").cum_max().over(STREAM))
    prev = nxt.sort("ts").join_asof(
        reach.select(*STREAM, _ps="ts", _reach="_reach"),
        left_on="ts",
        right_on="_ps",
        by=STREAM,
        strategy="backward",
        check_sortedness=False,
    )
    start = pl.max_horizontal("ts", pl.col("_reach").fill_null(pl.col("ts")))
    return prev.select(*STREAM, start=start, end=pl.col("_next"), _wanted="_wanted").filter(
        pl.col("end").is_not_null() & (pl.col("end") > pl.col("start"))
    )


def _released(waits: pl.DataFrame, signals: pl.DataFrame, by: list[str]) -> pl.DataFrame:
    """Each wait with ``_by``/``_cb``/``_sent``: the stream (whether a callback came before
    it, when it ended) of the latest signal ending inside it, and no earlier than ``_near``
    where that is set (null when none did)."""
    found = waits.sort("_limit").join_asof(
        signals.sort("_send"),
        left_on="_limit",
        right_on="_send",
        by=by,
        strategy="backward",
        check_sortedness=False,
    )
    near = (pl.col("_send") >= pl.col("_near")).fill_null(True)
    inside = (pl.col("_send") > pl.col("start")) & near
    return found.with_columns(
        _by=pl.when(inside).then(pl.col("_sstream")),
        _cb=pl.when(inside).then(pl.col("_scb")),
        _sent=pl.when(inside).then(pl.col("_send")),
    ).drop("_send", "_sstream", "_scb", *(c for c in found.columns if c.endswith("_right")))


def stream_waits(rows: pl.DataFrame, work: pl.DataFrame) -> pl.DataFrame:
    """Every stream wait of the trace: ``rank, device, stream, start, end`` (the time the
    stream was blocked), ``target`` (the stream it waited on, null for the host or an event
    nobody is seen recording) and ``cause`` (:data:`HOST_CALLBACK`, ``waiting on stream N``
    or :data:`ON_EVENT`). ``rows``: every row of the trace; ``work``: the device work rows
    (:func:`tracekit.steps.placement.work_rows`)."""
    sync = _device_rows(rows, work)
    empty = pl.DataFrame(schema=WAIT_COLUMNS)
    if not sync.height:
        return empty
    names = pl.col("name")
    barrier = names.str.contains(BARRIER)
    timed = names.is_in(TIMED_WAITS) | barrier
    issued = names.is_in(ISSUED_WAITS)
    if not sync.select((timed | issued).any()).item():
        return empty
    wanted = pl.col("args").str.json_path_match("$.wait_on_stream").cast(pl.Int64, strict=False)
    sync = sync.with_columns(_wanted=pl.when(wanted >= 0).then(wanted))
    done = _work(work)
    # the row before each task on its stream (work and sync rows): a callback or not
    seq = pl.concat(
        [
            done.select(*STREAM, "ts", _end="_end", _cb=pl.lit(False)),
            sync.select(
                *STREAM, "ts", _end=pl.col("ts") + pl.col("dur"), _cb=names.is_in(CALLBACKS)
            ),
        ]
    ).sort("ts")
    seq = seq.with_columns(
        _after_cb=pl.col("_cb").shift(1).over(STREAM).fill_null(False),
        _idle_from=pl.col("_end").cum_max().shift(1).over(STREAM),  # the stream's rows so far
    )
    after_cb = seq.select(*STREAM, "ts", "_after_cb").unique(subset=[*STREAM, "ts"], keep="last")
    idle_from = seq.select(*STREAM, "ts", "_idle_from").unique(subset=[*STREAM, "ts"], keep="first")
    short = sync.filter(timed).join(idle_from, on=[*STREAM, "ts"], how="left")
    early = (pl.col("dur") < SHORT_WAIT_NS) & (pl.col("_idle_from") < pl.col("ts"))
    waits = pl.concat(
        [
            short.select(
                *STREAM,
                start=pl.when(early).then(pl.col("_idle_from")).otherwise(pl.col("ts")),
                end=pl.col("ts") + pl.col("dur"),
                _wanted="_wanted",
                _issued=pl.lit(False),
                _timed_at=pl.when(early).then(pl.col("ts")),
                _near=pl.when(early).then(pl.col("ts") - EVENT_LATENCY_NS),
            ),
            _issued(sync.filter(issued), done).with_columns(
                _issued=pl.lit(True),
                _timed_at=pl.lit(None, pl.Int64),
                _near=pl.lit(None, pl.Int64),
            ),
        ]
    ).filter(pl.col("end") > pl.col("start"))
    waits = (
        waits.with_columns(_task=pl.coalesce("_timed_at", "start"))  # the wait task's own start
        .join(after_cb.rename({"ts": "_task"}), on=[*STREAM, "_task"], how="left")
        .drop("_task")
        .with_columns(pl.col("_after_cb").fill_null(False), _limit=pl.col("end") + SLACK_NS)
    )
    records = sync.filter(names.is_in(RECORDS)).select(
        *STREAM, "ts", _send=pl.col("ts") + pl.col("dur")
    )
    records = records.join(after_cb, on=[*STREAM, "ts"], how="left")
    if records.height:  # Ascend: the event records are in the trace
        signals = records.select(
            *DEVICE, "_send", _sstream="stream", _scb=pl.col("_after_cb").fill_null(False)
        )
    else:  # CUDA / HIP: the record follows the last work enqueued before it
        signals = done.select(*DEVICE, _send="_end", _sstream="stream", _scb=pl.lit(False))
    known = waits.filter(pl.col("_wanted").is_not_null())
    parts = [_released(waits.filter(pl.col("_wanted").is_null()), signals, DEVICE)]
    if known.height:
        aimed = signals.with_columns(_wanted=pl.col("_sstream"))
        parts.append(_released(known, aimed, [*DEVICE, "_wanted"]))
    found = pl.concat(parts, how="diagonal_relaxed")
    # an issued wait that no other stream released was the host's late launch, not a wait
    found = found.filter(~pl.col("_issued") | pl.col("_by").is_not_null())
    # an issued wait ends when what released it ended: a later row is the host's late launch
    released_at = pl.min_horizontal("end", pl.col("_sent") + SLACK_NS)
    found = found.with_columns(
        end=pl.when(pl.col("_issued")).then(released_at).otherwise(pl.col("end"))
    )
    # a short timed wait that no record released in the gap before it is only what it timed
    unreleased = pl.col("_timed_at").is_not_null() & pl.col("_by").is_null()
    found = found.with_columns(
        start=pl.when(unreleased).then(pl.col("_timed_at")).otherwise(pl.col("start"))
    )
    cause = (
        pl.when(pl.col("_after_cb") | pl.col("_cb").fill_null(False))
        .then(pl.lit(HOST_CALLBACK))
        .when(pl.col("_by").is_not_null())
        .then(pl.format(ON_STREAM, pl.col("_by")))
        .otherwise(pl.lit(ON_EVENT))
    )
    target = pl.when(cause == HOST_CALLBACK).then(None).otherwise(pl.col("_by"))
    out = found.select(*STREAM, "start", "end", target=target, cause=cause)
    return out.cast(WAIT_COLUMNS).sort(*STREAM, "start")  # type: ignore[arg-type]


def stream_wait_totals(
    waits: pl.DataFrame, work: pl.DataFrame, windows: pl.DataFrame
) -> pl.DataFrame:
    """Per (rank, device, step): ``stream_wait_ns``, the time in the :func:`stream_waits`
    during which the device ran nothing at all (no row on any of its streams), cut to each
    step's window: the idle time the waits explain. A stream that waits while another one
    works (a communication stream waiting for the gradients, compute waiting while a
    collective runs) costs no idle time: that shows in the overlap metrics instead."""
    out_schema = {
        "rank": pl.Int32,
        "device": pl.Int32,
        "step": pl.Int64,
        "stream_wait_ns": pl.Int64,
    }
    if not waits.height or not windows.height:
        return pl.DataFrame(schema=out_schema)
    spans = waits.select(*DEVICE, ts="start", dur=pl.col("end") - pl.col("start"))
    busy = _work(work).select(*DEVICE, "ts", dur=pl.col("_end") - pl.col("ts"))
    idle = subtract(merge(spans, DEVICE), busy, DEVICE)
    if not idle.height:
        return pl.DataFrame(schema=out_schema)
    return _per_window(idle, windows, "stream_wait_ns").cast(out_schema)  # type: ignore[arg-type]


def _per_window(intervals: pl.DataFrame, windows: pl.DataFrame, name: str) -> pl.DataFrame:
    """The length of disjoint ``intervals`` (``rank, device, start, end``) inside each step
    window of their device, as ``name`` per (rank, device, step): each interval is spread
    over the windows from the one holding its start to the one holding its end."""
    wins = (
        windows.select(
            pl.col("rank").cast(pl.Int32), pl.col("device").cast(pl.Int32), "step", "start", "end"
        )
        .rename({"start": "_ws", "end": "_we"})
        .sort(*DEVICE, "_ws")
        .with_columns(_w=pl.int_range(pl.len()).over(DEVICE))
    )
    spans = intervals.select(*DEVICE, "start", "end").with_row_index("_i")
    ends = []
    for at, point in (("_first", pl.col("start")), ("_last", pl.col("end") - 1)):
        found = (
            spans.with_columns(_at=point)
            .sort("_at")
            .join_asof(
                wins.select(*DEVICE, "_ws", "_w"),
                left_on="_at",
                right_on="_ws",
                by=DEVICE,
                strategy="backward",
                check_sortedness=False,
            )
            .sort("_i")
        )
        ends.append(found["_w"].alias(at))
    spans = spans.with_columns(*ends).with_columns(
        pl.col("_first").fill_null(0)  # starts before the first window: from the first
    )
    cut = (
        spans.drop_nulls("_last")
        .with_columns(_w=pl.int_ranges("_first", pl.col("_last") + 1))
        .explode("_w")
        .join(wins, on=[*DEVICE, "_w"])
        .select(
            *DEVICE,
            "step",
            ts=pl.max_horizontal("start", "_ws"),
            _e=pl.min_horizontal("end", "_we"),
        )
        .filter(pl.col("_e") > pl.col("ts"))
        .with_columns(dur=pl.col("_e") - pl.col("ts"))
    )
    return lengths(merge(cut.select(*KEY, "ts", "dur"), KEY), KEY, name)
