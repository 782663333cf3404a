"""Where the parts of a cluster are analysed: in this process, on local worker processes
(``workers``), or on a running ``dask.distributed`` scheduler (``scheduler``, or the
``TRACEKIT_SCHEDULER`` environment variable). Each input is one task; the results are
merged in input order, so every way gives the same :class:`ClusterAnalysis`."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from tracekit.cluster.inputs import rank_inputs
from tracekit.cluster.part import Part, Settings, analyse_part
from tracekit.cluster.result import ClusterAnalysis, merge
from tracekit.errors import TraceError

SCHEDULER_ENV = "TRACEKIT_SCHEDULER"
CONNECT_TIMEOUT_S = 10
NO_WORKER_TIMEOUT_S = 60  # a scheduler without workers for this long is an error, not a hang
POLL_S = 0.2
RETRIES = 2  # a task whose worker died is tried this many more times


def default_workers() -> int:
    """The usable CPUs of this machine."""
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity else (os.cpu_count() or 1)


def analyze_cluster(
    path: str | Path,
    settings: Settings | None = None,
    *,
    workers: int | None = None,
    scheduler: str | None = None,
) -> ClusterAnalysis:
    """Analyse every rank under ``path`` (see :func:`~tracekit.cluster.inputs.rank_inputs`)
    in parallel and merge them: ``workers`` local processes (default: all CPUs; 1 runs in
    this process) or, with ``scheduler`` (default ``$TRACEKIT_SCHEDULER``), the workers of
    that dask scheduler."""
    settings = settings or Settings()
    inputs = [str(p.resolve()) for p in rank_inputs(path)]
    scheduler = scheduler or os.environ.get(SCHEDULER_ENV) or None
    if scheduler:
        parts = on_dask(inputs, settings, scheduler)
    else:
        parts = on_processes(inputs, settings, workers or default_workers())
    return merge(parts, settings)


def on_processes(
    inputs: list[str],
    settings: Settings,
    workers: int,
    task: Callable[[str, Settings], Part] = analyse_part,
) -> list[Part]:
    """Each input analysed as one ``task`` by one of ``workers`` fresh local processes (here
    when 1), results in input order."""
    if workers < 1:
        raise TraceError(f"--workers {workers}: give 1 or more")
    count = min(workers, len(inputs))
    if count <= 1:
        return [task(p, settings) for p in inputs]
    try:
        with ProcessPoolExecutor(count, mp_context=get_context("spawn")) as pool:
            return list(pool.map(task, inputs, [settings] * len(inputs)))
    except BrokenProcessPool:
        raise TraceError(
            "a worker process died (out of memory? or, from Python, a script without"
            ' `if __name__ == "__main__":`); try fewer workers or a --scheduler with more'
            " memory per worker"
        ) from None


def on_dask(
    inputs: list[str],
    settings: Settings,
    address: str,
    task: Callable[[str, Settings], Part] = analyse_part,
) -> list[Part]:
    """Each input analysed as one ``task`` on the dask scheduler at ``address``; tasks whose
    worker died are retried, then reported; no workers for a minute is an error."""
    try:
        from distributed import Client
    except ImportError:  # pragma: no cover - a dependency of tracekit
        raise TraceError(
            "--scheduler needs the 'distributed' package: pip install distributed"
        ) from None
    try:
        client = Client(address, timeout=f"{CONNECT_TIMEOUT_S}s", set_as_default=False)
    except (OSError, TimeoutError) as exc:
        raise TraceError(
            f"--scheduler {address}: cannot connect ({exc}); start one with `dask scheduler`"
        ) from None
    try:
        futures = client.map(task, inputs, settings=settings, pure=False, retries=RETRIES)
        _wait_with_workers(client, futures)
        return client.gather(futures)
    except TraceError:
        raise
    except Exception as exc:
        raise TraceError(f"--scheduler {address}: a task failed: {_reason(exc)}") from None
    finally:
        client.close()


def _wait_with_workers(client: Any, futures: list[Any]) -> None:
    """Wait until every future is done (or one failed); fail when the scheduler has had no
    worker for :data:`NO_WORKER_TIMEOUT_S`."""
    idle_since: float | None = None
    while not all(f.done() for f in futures):
        if any(f.status == "error" for f in futures):
            return  # gather raises the task's error
        if client.scheduler_info(n_workers=-1).get("workers"):
            idle_since = None
        elif idle_since is None:
            idle_since = time.monotonic()
        elif time.monotonic() - idle_since > NO_WORKER_TIMEOUT_S:
            raise TraceError(
                f"the scheduler has had no worker for {NO_WORKER_TIMEOUT_S} s; start some with"
                " `dask worker ADDRESS`"
            )
        time.sleep(POLL_S)


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    first = text[0] if text else ""
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__
