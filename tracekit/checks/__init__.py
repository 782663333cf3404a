"""tracekit checks its own numbers: whether the capture holds the work the trace says was
done (:mod:`.capture`), accounting identities on every analysis (:mod:`.identities`) and the
vendor's own summaries where the export has them (:mod:`.vendor`). :func:`run_checks` gives
them failing first; a check with nothing to verify (no device rows, no steps …) is ``skip``,
never a pass."""

from __future__ import annotations

from typing import Any

import polars as pl

from tracekit.checks.capture import capture_check
from tracekit.checks.cluster import cluster_checks
from tracekit.checks.comm import communicates, unknown_comm
from tracekit.checks.identities import identity_checks
from tracekit.checks.vendor import VENDOR_COLUMNS, vendor_checks
from tracekit.metrics import KEY
from tracekit.metrics.steps import clipped
from tracekit.model import Check, ordered
from tracekit.steps import Steps

__all__ = ["run_checks"]


def run_checks(
    rows: pl.DataFrame,
    work: pl.DataFrame,
    windows: pl.DataFrame,
    metrics: pl.DataFrame,
    steps: Steps,
    meta: dict[str, Any],
    guessed: pl.DataFrame | None = None,
    in_windows: pl.DataFrame | None = None,
    collectives: pl.DataFrame | None = None,
    clocks: pl.DataFrame | None = None,
) -> list[Check]:
    """Every check of one analysis, failing ones first. ``guessed`` lists the kernels counted
    as communication by their look alone (:func:`tracekit.taxonomy.guessed_comm`);
    ``in_windows`` is the work rows cut to their step's window (made here when None);
    ``collectives`` and ``clocks`` add the cross-rank checks of a trace with several ranks."""
    labels = steps.ranges.select("rank", "step", "label")
    checks = [capture_check(rows, meta)]
    checks += identity_checks(rows, work, windows, metrics, steps, meta)
    checks.append(communicates(work, meta))
    if guessed is not None:
        checks.append(unknown_comm(guessed, work))

    def cut() -> pl.DataFrame:  # only for a vendor step summary, only what it reads
        if in_windows is not None:
            return in_windows
        return clipped(work.select(*KEY, "ts", "dur", *VENDOR_COLUMNS), windows)

    checks += vendor_checks(rows, cut, labels, meta)
    if collectives is not None and clocks is not None:
        checks += cluster_checks(collectives, clocks, meta, metrics["rank"].n_unique())
    return ordered(checks)
