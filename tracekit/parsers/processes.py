"""Processes and ranks: correlation ids are scoped to their process.

CUDA/HIP correlation ids are numbered per process, so two processes of one capture reuse the
same ids, and every launch ↔ device row join in tracekit is keyed by ``(rank, corr)``. A
capture of several processes therefore needs one rank per process before anything joins.

Where the ranks come from, recorded as ``meta["rank_source"]`` (:data:`RANK_SOURCES`):

- ``mpi`` (Nsight Systems "MPI Rank N" thread names), ``hccl`` (Ascend profiler_info /
  info.json / ``RANK_DEVICE_MAP``), ``distributedInfo`` (Kineto), ``file name`` (``rank3`` in
  a Kineto file's name), ``event args`` (a ``rank`` in the events' args, as merged Kineto
  traces hold): the trace's own rank data, set by the parser;
- ``process``: the capture holds several processes that run device work and no rank data,
  so each such process is one rank, numbered in the order of the lowest device index it ran
  work on, then of its pid (``torchrun`` binds local rank *n* to device *n*); a process with
  little device time beside a busier one on its device (:data:`MINOR_SHARE`) is counted with
  that one's rank, with a warning. Kineto folders
  and Ascend output folders of one unranked process per file are numbered in file order;
- ``none``: one process (or no process ids): every row is rank 0.

When ranks are given per process, the rows of a process that runs no device work (a
launcher, a data-loader worker) get rank :data:`HOST_ONLY_RANK` (-1): their ranges and API
calls are kept, but they neither become steps of a device process nor join its correlation
ids. ``meta["ranks"]`` lists the device processes' ranks only.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from tracekit.timeline import WORK_KINDS, Timeline

RANK_SOURCES = (
    "nccl", "mpi", "hccl", "distributedInfo", "file name", "event args", "process", "none",
)  # fmt: skip
HOST_ONLY_RANK = -1
MINOR_SHARE = 0.05  # a process with less device time than this share of its device's
# busiest process is a helper of that process, not a rank of its own
# Formats whose device rows carry the pid of the process that launched them (nsys globalPid,
# rocpd / rpd's launching process); elsewhere a device row's pid is a device (Kineto).
PROCESS_ON_DEVICE_ROWS = frozenset({"nsys-sqlite", "nsys-rep", "rocpd", "rpd", "rpd-json"})


def device_processes(table: pa.Table) -> pl.DataFrame:
    """``pid, device, busy``: per process that runs device work, the lowest device index it
    ran work on and its summed device time, in rank order (that device, then the pid)."""
    frame = pl.from_arrow(table.select(["kind", "device", "pid", "dur"]))
    assert isinstance(frame, pl.DataFrame)
    work = frame.filter(
        pl.col("kind").is_in(list(WORK_KINDS))
        & (pl.col("device") >= 0)
        & pl.col("pid").is_not_null()
    )
    per = work.group_by("pid").agg(pl.col("device").min(), busy=pl.col("dur").sum())
    return per.sort("device", "pid")


def main_processes(processes: pl.DataFrame) -> tuple[pl.DataFrame, dict[int, int]]:
    """The processes that are ranks (each holds at least :data:`MINOR_SHARE` of the device
    time of the busiest process on its device) and, for every other process, the pid of the
    main process of its device: a helper (an autotuning subprocess, a CUDA-IPC producer, a
    launcher's one memset) joins that rank instead of becoming one."""
    top = pl.col("busy").max().over("device")
    main = processes.filter(pl.col("busy") >= MINOR_SHARE * top)
    first = main.unique("device", keep="first", maintain_order=True)
    host_of = dict(first.select("device", "pid").iter_rows())
    minor = processes.join(main, on="pid", how="anti")
    return main, {int(p): int(host_of[d]) for p, d in minor.select("pid", "device").iter_rows()}


def ranks_by_process(table: pa.Table, rank_of_pid: dict[int, int]) -> pa.Table:
    """``table`` with its ``rank`` column set from ``rank_of_pid``; the rows of any other
    process (and rows without a pid) get :data:`HOST_ONLY_RANK`."""
    pid = pc.fill_null(table.column("pid"), -1).to_numpy()
    keys = np.array(sorted(rank_of_pid), dtype=np.int64)
    values = np.array([rank_of_pid[int(k)] for k in keys], dtype=np.int32)
    pos = np.clip(np.searchsorted(keys, pid), 0, len(keys) - 1)
    ranks = np.where(keys[pos] == pid, values[pos], HOST_ONLY_RANK).astype(np.int32)
    index = table.schema.get_field_index("rank")
    return table.set_column(index, table.schema.field(index), pa.array(ranks, pa.int32()))


def scope_ranks(timeline: Timeline) -> Timeline:
    """``timeline`` with one rank per device process where the trace names no ranks and
    ``meta["rank_source"]`` set (see the module docstring); the timeline itself when its
    ranks stand as they are."""
    meta = timeline.meta
    if meta.get("rank_source") in RANK_SOURCES:  # the parser (or a saved timeline) said
        return timeline
    table = timeline.stored
    ranks = table.column("rank").unique().drop_null().to_pylist() if len(table) else []
    if len(ranks) > 1:  # a rank per row from the trace: a foreign or merged export
        meta["rank_source"] = "event args"
        return timeline
    meta["rank_source"] = "none"
    if meta.get("format") not in PROCESS_ON_DEVICE_ROWS or not len(table):
        return timeline
    main, helpers = main_processes(device_processes(table))
    if main.height < 2:
        return timeline
    rank_of_pid = {int(p): r for r, p in enumerate(main["pid"].to_list())}
    meta["rank_source"] = "process"
    meta["ranks"] = sorted(rank_of_pid.values())
    meta["processes"] = [
        {"rank": r, "pid": int(p), "device": int(d)}
        for r, (p, d) in enumerate(main.select("pid", "device").iter_rows())
    ]
    if helpers:
        listed = ", ".join(f"{p} (with {h})" for p, h in sorted(helpers.items())[:5])
        timeline.warn(
            f"{len(helpers)} process(es) ran little device work beside a busier one on the"
            f" same device and are counted with its rank: pid {listed}"
        )
        rank_of_pid |= {p: rank_of_pid[h] for p, h in helpers.items()}
    return Timeline(ranks_by_process(table, rank_of_pid), meta)
