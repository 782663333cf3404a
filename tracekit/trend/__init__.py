"""``tracekit trend``: one model's performance over a series of runs (nightlies, releases,
platforms), every significant move explained.

:func:`trend` takes the runs (:mod:`.series`: files, folders, globs; ordered by label, name
or capture date), analyses them in parallel (:mod:`.run`), measures each over the steps of
the phase they all share (:mod:`.runs`: step median with its bootstrap interval, categories,
fallback and exposed communication time, efficiency), compares each run with the next with
:func:`tracekit.diff.compare` and tells each move as the changes that explain it, ranked by
their share of it (:mod:`.explain`). The result is a :class:`Trend` (:mod:`.result`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from tracekit.cluster.part import Settings
from tracekit.errors import TraceError
from tracekit.trend.result import Trend

__all__ = ["Settings", "Trend", "trend"]


def trend(
    paths: Sequence[str | Path],
    *,
    labels: Sequence[str] | None = None,
    order: str = "name",
    baseline: int = 0,
    threshold: float = 0.05,
    min_impact: float = 0.01,
    confidence: float = 0.95,
    allow_low_confidence: bool = False,
    settings: Settings | None = None,
    workers: int | None = None,
    scheduler: str | None = None,
) -> Trend:
    """The trend of the runs in ``paths`` (see the module docstring). ``labels``: one per
    run (see :mod:`.series`); ``baseline``: the 0-based index of the reference run (each
    run's ``vs_baseline``); ``threshold``, ``min_impact``, ``confidence`` and
    ``allow_low_confidence`` as for :func:`tracekit.diff.compare`; ``settings``: rules,
    options, step marker, patterns and roofline device of the analyses; ``workers`` local
    processes (default all CPUs, 1 here) or a dask ``scheduler``."""
    from tracekit.diff import compare
    from tracekit.diff.samples import compared_phase
    from tracekit.trend.explain import move
    from tracekit.trend.run import analyse_runs
    from tracekit.trend.runs import fallback_keys, run_record, vs_baseline
    from tracekit.trend.series import by_date, capture_date, series

    found = series([str(p) for p in paths], list(labels) if labels is not None else None, order)
    analyses = analyse_runs(
        [str(r.path) for r in found.runs], settings, workers=workers, scheduler=scheduler
    )
    inputs, warnings = found.runs, list(found.warnings or [])
    if found.ordered_by == "date":
        index, notes = by_date(inputs, [capture_date(a.timeline.meta) for a in analyses])
        inputs, analyses, warnings = [inputs[i] for i in index], [analyses[i] for i in index], notes
        if found.pending_labels is not None:
            for item, label in zip(inputs, found.pending_labels):
                item.label = label
    if not -len(inputs) <= baseline < len(inputs):
        raise TraceError(f"--baseline {baseline}: give a run index from 0 to {len(inputs) - 1}")
    baseline %= len(inputs)
    for item, analysis in zip(inputs, analyses):
        if analysis.low_confidence and not allow_low_confidence:
            raise TraceError(
                f"trend: {item.label} ({item.path}): {analysis.low_confidence}; refusing to"
                " compare it (pass --allow-low-confidence to compare anyway)"
            )
    phase = compared_phase(analyses)
    runs = [
        run_record(a, i, item.label, str(item.path), phase, confidence)
        for i, (item, a) in enumerate(zip(inputs, analyses))
    ]
    vs_baseline(runs, baseline)
    keys = [fallback_keys(a) for a in analyses]
    moves = []
    for i in range(len(analyses) - 1):
        # the steps of the phase the whole series shares, as the per-run figures use
        pair = [analyses[i]], [analyses[i + 1]]
        diff = compare(*pair, threshold, min_impact, confidence, True, phase=phase)
        moves.append(move(diff, i, keys[i], keys[i + 1]))
    vendors = sorted({str(r["vendor"]) for r in runs if r["vendor"]})
    if len(vendors) > 1:
        warnings.append(
            f"the runs come from several vendors ({', '.join(vendors)}): kernels are matched"
            " by role across them"
        )
    return Trend(
        runs, moves, baseline, threshold, min_impact, confidence, found.ordered_by, warnings
    )
