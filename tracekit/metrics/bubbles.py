"""Idle gaps inside steps: the bubbles of the ``step_metrics`` table and, for the
``bubbles`` rule, each bubble with its cause."""

from __future__ import annotations

import polars as pl

from tracekit.intervals import covered, gaps, merge, subtract
from tracekit.metrics import KEY
from tracekit.metrics.stream_waits import stream_waits

MIN_COVER_NS = 1_000  # a wait this short covers half of no bubble (MIN_BUBBLE_NS and up)
SYNC_API = r"(?i)synchroni[sz]e|EventSynchronize|StreamWait|aclrtSynchronize"
# Host runtime calls that are not launches, by what they do. A name matches at its start or
# after a layer prefix (torch_npu ``AscendCL@aclrtMalloc``); nsys's version suffix
# (``cudaFree_v3020``) is stripped by the parser, a driver's ``_v2`` is left and matches.
# The stream-ordered calls (``cudaMallocAsync``, ``cudaFreeAsync``, ``…FromPoolAsync``,
# ``cuMemMapArrayAsync``, their HIP twins) do not block the host: the CUDA and HIP names are
# whole words (no letter may follow), each variant spelled out (polars' regex: no look-around).
# Sources: CUDA runtime / driver API, HIP runtime API, CANN AscendCL (acl_rt.h) references.
ALLOC_API = (
    r"(?:^|@)(?:(?:cuda(?:Malloc(?:Host|Managed|Pitch|Array|3D|3DArray|MipmappedArray)?"
    r"|Free(?:Host|Array|MipmappedArray)?|HostAlloc|HostRegister|HostUnregister)"
    r"|cuMem(?:Alloc(?:Host|Managed|Pitch)?|Free(?:Host)?|HostAlloc|HostRegister"
    r"|HostUnregister|Create|Release|Map|Unmap|SetAccess|AddressReserve|AddressFree)"
    r"|hip(?:Malloc(?:Host|Managed|Pitch|Array|3D|3DArray|MipmappedArray)?"
    r"|Free(?:Host|Array|MipmappedArray)?|HostMalloc|HostAlloc|HostFree|HostRegister"
    r"|HostUnregister|ExtMallocWithFlags|ExtHostAlloc|MemAllocHost|MemAllocPitch|MemCreate"
    r"|MemRelease|MemMap|MemUnmap|MemSetAccess|MemAddressReserve|MemAddressFree))(?:[^A-Za-z]|$)"
    r"|hsa_amd_memory_pool_(?:allocate|free)"
    r"|aclrt(?:Malloc|Free|ReserveMemAddress|ReleaseMemAddress|MapMem|UnmapMem)|rt(?:Malloc|Free))"
)
SETUP_API = (
    r"(?:^|@)(?:cuda(?:StreamCreate|EventCreate|GraphInstantiate|SetDevice)"
    r"|cu(?:Init|CtxCreate|DevicePrimaryCtxRetain|ModuleLoad|LibraryLoad|LinkComplete"
    r"|StreamCreate|EventCreate|GraphInstantiate)"
    r"|hip(?:StreamCreate|ExtStreamCreate|EventCreate|ModuleLoad|LibraryLoad|Init|CtxCreate"
    r"|DevicePrimaryCtxRetain|SetDevice|GraphInstantiate)|__hipRegisterFatBinary"
    r"|acl(?:Init|rtSetDevice|rtCreateContext|rtCreateStream|rtCreateEvent|rtBinaryLoad|mdlLoad)"
    r"|rt(?:StreamCreate|EventCreate)|ncclComm(?:InitRank|InitAll|Split)|HcclCommInit"
    r"|(?:cudnn|cublas|cublasLt|cusparse|cusolverDn|miopen|hipblas|hipblasLt)Create(?:_v\d+)?$"
    r"|rocblas_create_handle)"
)
HOST = ["rank", "_wide", "_hpid", "_htid"]  # a host thread, or (``_wide``) a rank's host
RUNTIME_CALLS = {  # cause -> the calls that make it, checked before a late launch
    "host-bound: memory allocation": ALLOC_API,
    "host-bound: setup": SETUP_API,
}


def _matching(names: pl.Series, pattern: str) -> pl.Series:
    """The distinct ``names`` that match ``pattern`` (each name tested once, not per row)."""
    distinct = names.unique().cast(pl.String)
    return distinct.filter(distinct.str.contains(pattern))


def idle_gaps(rows: pl.DataFrame, min_bubble_ns: int) -> pl.DataFrame:
    """Stretches (``*KEY, start, end, ns``) of at least ``min_bubble_ns`` with no row of the
    step running, between the first and the last row of each step (rows cut to their step's
    window, or their merged intervals)."""
    idle = gaps(rows, KEY).with_columns(ns=pl.col("end") - pl.col("start"))
    return idle.filter(pl.col("ns") >= min_bubble_ns)


def bubble_totals(rows: pl.DataFrame, min_bubble_ns: int) -> pl.DataFrame:
    """Per (rank, device, step): ``bubble_ns``, ``bubble_count`` and ``largest_bubble_ns``
    of the :func:`idle_gaps`."""
    return (
        idle_gaps(rows, min_bubble_ns)
        .group_by(KEY)
        .agg(
            bubble_ns=pl.col("ns").sum(),
            bubble_count=pl.len().cast(pl.Int64),
            largest_bubble_ns=pl.col("ns").max(),
        )
    )


def comm_bubble_totals(
    rows: pl.DataFrame, min_bubble_ns: int, comm: pl.DataFrame | None = None
) -> pl.DataFrame:
    """Per (rank, device, step): ``comm_bubble_ns``, the stretches of at least
    ``min_bubble_ns`` where communication runs and nothing else does (``comm``: the
    communication rows, or their merged intervals, when the caller has them)."""
    comm = rows.filter(pl.col("is_comm")) if comm is None else comm
    not_comm = rows.lazy().filter(~pl.col("is_comm"))  # only its times are gathered
    comm_alone = subtract(comm, not_comm, KEY).with_columns(ns=pl.col("end") - pl.col("start"))
    return (
        comm_alone.filter(pl.col("ns") >= min_bubble_ns)
        .group_by(KEY)
        .agg(comm_bubble_ns=pl.col("ns").sum())
    )


def _waited(bubbles: pl.DataFrame, waits: pl.DataFrame) -> pl.DataFrame:
    """``bubbles`` with ``_wait``: the cause of a stream wait covering at least half of each
    (the last one to start before the bubble, else the first to start inside it), null where
    none does (a wait of a few ns in a long gap does not explain it)."""
    dev = ["rank", "device"]
    waits = waits.select(
        pl.col("rank").cast(pl.Int32), pl.col("device").cast(pl.Int32), "start", "end", "cause"
    )
    waits = waits.filter(pl.col("end") - pl.col("start") >= MIN_COVER_NS).sort("start")
    bubbles = bubbles.with_columns(pl.col("rank").cast(pl.Int32), pl.col("device").cast(pl.Int32))
    found = []
    for strategy, names in (
        ("backward", ("_w0s", "_w0e", "_w0")),
        ("forward", ("_w1s", "_w1e", "_w1")),
    ):
        right = waits.rename(dict(zip(("start", "end", "cause"), names)))
        bubbles = (
            bubbles.sort("start")
            .join_asof(
                right.with_columns(_key=pl.col(names[0])),
                left_on="start",
                right_on="_key",
                by=dev,
                strategy=strategy,  # type: ignore[arg-type]
                check_sortedness=False,
            )
            .drop("_key")
        )
        cover = pl.min_horizontal(names[1], "end") - pl.max_horizontal(names[0], "start")
        found.append(pl.when(2 * cover >= pl.col("end") - pl.col("start")).then(pl.col(names[2])))
    return bubbles.with_columns(_wait=pl.coalesce(found)).drop(
        "_w0s", "_w0e", "_w0", "_w1s", "_w1e", "_w1"
    )


def _hosts(calls: pl.DataFrame) -> pl.DataFrame:
    """``calls`` (``rank, pid, tid, ts, dur``) keyed by :data:`HOST` twice over: on their own
    thread (those whose thread is known), and on their rank as a whole (``_wide``)."""
    own = calls.filter(pl.col("pid").is_not_null() & pl.col("tid").is_not_null())
    return pl.concat(
        [
            own.select("rank", "ts", "dur", _wide=pl.lit(0, pl.Int8), _hpid="pid", _htid="tid"),
            calls.select(
                "rank",
                "ts",
                "dur",
                _wide=pl.lit(1, pl.Int8),
                _hpid=pl.lit(0, pl.Int64),
                _htid=pl.lit(0, pl.Int64),
            ),
        ]
    )


def _in_runtime_call(bubbles: pl.DataFrame, api: pl.LazyFrame, names: pl.Series) -> pl.DataFrame:
    """``bubbles`` with ``_call``: the :data:`RUNTIME_CALLS` cause of each bubble that such
    calls cover for at least half of it, named by the kind that covers more; null elsewhere
    and where the next row's launch was issued before the bubble began (the host was not what
    held it back). The calls counted are those of the thread that issued the launch of the
    row after the bubble (``_lpid``, ``_ltid``: a pin-memory thread's allocations do not hold
    the launching thread back), or of its whole rank where that launch is unknown. ``api``:
    ``rank, pid, tid, ts, name, _api_end``; ``names``: its distinct names."""
    known = pl.col("_lpid").is_not_null() & pl.col("_ltid").is_not_null()
    bubbles = bubbles.with_columns(
        pl.col("rank").cast(pl.Int32),
        _wide=pl.when(known).then(pl.lit(0, pl.Int8)).otherwise(pl.lit(1, pl.Int8)),
        _hpid=pl.when(known).then(pl.col("_lpid")).otherwise(pl.lit(0, pl.Int64)),
        _htid=pl.when(known).then(pl.col("_ltid")).otherwise(pl.lit(0, pl.Int64)),
    )
    causes = {cause: _matching(names, pattern) for cause, pattern in RUNTIME_CALLS.items()}
    if not any(len(found) for found in causes.values()):
        return bubbles.with_columns(_call=pl.lit(None, pl.String)).drop(*HOST[1:])
    wanted = pl.concat(list(causes.values())).implode()
    calls = api.filter(pl.col("name").is_in(wanted)).collect()
    calls = calls.with_columns(dur=pl.col("_api_end") - pl.col("ts"))
    found = bubbles.with_columns(covered(bubbles, merge(_hosts(calls), HOST), HOST).alias("_cover"))
    covers = []
    for i, (cause, kind) in enumerate(causes.items()):
        mine = calls.filter(pl.col("name").is_in(kind.implode()))
        found = found.with_columns(
            covered(found, merge(_hosts(mine), HOST), HOST).alias(f"_cover{i}")
        )
        covers.append((cause, f"_cover{i}"))
    (alloc, alloc_ns), (setup, setup_ns) = covers
    named = (
        pl.when(pl.col(alloc_ns) >= pl.col(setup_ns)).then(pl.lit(alloc)).otherwise(pl.lit(setup))
    )
    late = pl.col("_api_end").is_null() | (pl.col("_api_end") > pl.col("start"))
    held = (2 * pl.col("_cover") >= pl.col("end") - pl.col("start")) & late
    return found.with_columns(_call=pl.when(held).then(named)).drop(
        "_cover", *(col for _, col in covers), *HOST[1:]
    )


# what :func:`attributed_bubbles` reads of the cut rows (a caller may cut only these)
ATTRIBUTION_COLUMNS = [*KEY, "ts", "dur", "name", "is_comm", "corr", "stream"]


def attributed_bubbles(
    in_windows: pl.DataFrame,
    rows: pl.DataFrame,
    min_bubble_ns: int,
    waits: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """The :func:`idle_gaps` of the work rows cut to their step's window (``in_windows``),
    each with its ``cause`` and the names of the rows ``before`` / ``after`` the gap.

    Causes, the first that holds: a runtime call that is no launch covering at least half of
    the gap on the host of its rank (``host-bound: memory allocation``, ``host-bound: setup``:
    :data:`RUNTIME_CALLS`; it is why the launch came late, so it is checked first, and only
    where the next row's launch was not issued before the gap), host-bound launch (the next
    row's launch ended after the gap began), a stream wait overlapping the gap (``waiting on
    a host callback``, ``waiting on stream N``, ``waiting on an event``: :func:`~tracekit.
    metrics.stream_waits.stream_waits` of ``rows``, or ``waits`` when the caller has them),
    host-bound sync (a synchronize call among ``rows`` overlaps it), communication (a
    collective next to it), else unknown."""
    idle = idle_gaps(in_windows, min_bubble_ns).sort("start")
    if idle.height == 0:
        return idle.with_columns(
            cause=pl.lit(None, pl.String),
            before=pl.lit(None, pl.String),
            after=pl.lit(None, pl.String),
        )
    dev = ["rank", "device"]
    # names stay dictionary codes until the few bubbles are found
    work = in_windows.select(
        *dev, "ts", _end=pl.col("ts") + pl.col("dur"), _name="name", is_comm="is_comm", corr="corr"
    )
    before = idle.join_asof(
        work.sort("_end").select(*dev, "_end", _bname="_name", _bcomm="is_comm"),
        left_on="start",
        right_on="_end",
        by=dev,
        strategy="backward",
        check_sortedness=False,
    )
    after = before.sort("end").join_asof(
        work.sort("ts").select(*dev, "ts", "corr", _aname="_name", _acomm="is_comm"),
        left_on="end",
        right_on="ts",
        by=dev,
        strategy="forward",
        check_sortedness=False,
    )
    # Only the calls that matter are gathered: the launches of the rows after the gaps and
    # the sync calls (a trace has millions of API calls and a few thousand gaps).
    api = rows.lazy().filter(pl.col("kind") == "api")
    thread = [
        pl.col(c).cast(pl.Int64) if c in rows.columns else pl.lit(None, pl.Int64).alias(c)
        for c in ("pid", "tid")
    ]
    api = api.select(
        pl.col("rank").fill_null(0).cast(pl.Int32),
        *thread,
        "corr",
        "ts",
        "name",
        _api_end=pl.col("ts") + pl.col("dur"),
    )
    wanted = after["corr"].drop_nulls().unique().implode()
    launches = (
        api.filter(pl.col("corr").is_in(wanted))
        .select("rank", "corr", "_api_end", _lpid="pid", _ltid="tid")
        .collect()
        .unique(subset=["rank", "corr"], keep="first")
    )
    found = after.join(launches, on=["rank", "corr"], how="left")
    # Some sync call overlaps the gap iff, among the calls starting before the gap ends, the
    # latest end (a running maximum) is after the gap starts: one as-of join, no cross join.
    names = api.select(pl.col("name").unique()).collect()["name"]
    sync_names = _matching(names, SYNC_API)
    syncs = (
        api.filter(pl.col("name").is_in(sync_names.implode()))
        .collect()
        .sort("ts")
        .select("rank", _s="ts", _reach=pl.col("_api_end").cum_max().over("rank"))
    )
    found = (
        found.sort("end")
        .join_asof(
            syncs,
            left_on="end",
            right_on="_s",
            by="rank",
            strategy="backward",
            check_sortedness=False,
        )
        .with_columns(_sync=(pl.col("_s") < pl.col("end")) & (pl.col("_reach") > pl.col("start")))
    )
    waits = stream_waits(rows, in_windows) if waits is None else waits
    found = _waited(found, waits)
    found = _in_runtime_call(found, api, names)
    cause = (
        pl.when(pl.col("_call").is_not_null())
        .then(pl.col("_call"))
        .when(pl.col("_api_end") > pl.col("start"))
        .then(pl.lit("host-bound: launch"))
        .when(pl.col("_wait").is_not_null())
        .then(pl.col("_wait"))
        .when(pl.col("_sync").fill_null(False))
        .then(pl.lit("host-bound: sync"))
        .when(pl.col("_bcomm").fill_null(False) | pl.col("_acomm").fill_null(False))
        .then(pl.lit("communication"))
        .otherwise(pl.lit("unknown"))
    )
    return (
        found.with_columns(
            cause=cause,
            before=pl.col("_bname").cast(pl.String),
            after=pl.col("_aname").cast(pl.String),
        )
        .select(*KEY, "start", "end", "ns", "cause", "before", "after")
        .sort(*KEY, "start")
    )
