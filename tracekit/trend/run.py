"""Where the runs of a trend are analysed: here (``workers`` 1), on local spawned worker
processes (``workers`` N, default all CPUs) or on a ``dask.distributed`` scheduler
(``scheduler``, or ``$TRACEKIT_SCHEDULER``), as :mod:`tracekit.cluster.run` does for ranks.
Each run is one task that returns its :class:`~tracekit.analysis.Analysis` (it pickles: a
timeline is Arrow, the rest polars and dataclasses); results come back in input order, so
every way gives the same trend. A run that fails is one :class:`TraceError` naming it."""

from __future__ import annotations

import os
from typing import Any, cast

from tracekit.analysis import Analysis, analyze
from tracekit.cluster.part import Settings
from tracekit.cluster.run import SCHEDULER_ENV, default_workers, on_dask, on_processes
from tracekit.errors import TraceError
from tracekit.load import load


def analyse_run(path: str, settings: Settings) -> Analysis:
    """Read and analyse one run; any failure is a TraceError that names the run."""
    try:
        return analyze(
            load(path),
            list(settings.rules) if settings.rules is not None else None,
            settings.options,
            step_marker=settings.step_marker,
            patterns=settings.patterns,
            device=settings.device,
        )
    except TraceError as exc:
        text = str(exc)
        raise TraceError(text if os.path.basename(path) in text else f"{path}: {text}") from None
    except MemoryError:
        raise TraceError(f"{path}: out of memory while analysing it; try fewer workers") from None
    except Exception as exc:  # one line naming the run, whatever broke
        raise TraceError(
            f"{path}: internal error ({type(exc).__name__}: {exc}); rerun with --workers 1"
            " and TRACEKIT_DEBUG=1 and report it"
        ) from None


def analyse_runs(
    paths: list[str],
    settings: Settings | None = None,
    *,
    workers: int | None = None,
    scheduler: str | None = None,
) -> list[Analysis]:
    """Every run of ``paths`` analysed, in order (see the module docstring)."""
    settings = settings or Settings()
    scheduler = scheduler or os.environ.get(SCHEDULER_ENV) or None
    task = cast(Any, analyse_run)
    if scheduler:
        return cast(list[Analysis], on_dask(paths, settings, scheduler, task))
    return cast(list[Analysis], on_processes(paths, settings, workers or default_workers(), task))
