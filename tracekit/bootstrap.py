"""Hierarchical bootstrap of per-step samples grouped in runs.

A side of a diff is one or more runs, each a sequence of decode steps. Steps of one run share
its conditions (clocks, placement, neighbours), so they are not independent: pooling them and
resampling steps alone would take run-to-run variation for signal. Each bootstrap replicate
therefore draws the runs with replacement, then the steps of every drawn run with
replacement, and evaluates the statistic on that weighted sample; with one run only the steps
are resampled. Replicates are drawn as multinomial counts (weights), never as copies of the
data, and in chunks, so memory stays ``chunk × steps`` whatever the number of replicates.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

CHUNK = 256


def weights(lengths: Sequence[int], replicates: int, rng: np.random.Generator) -> np.ndarray:
    """Resampling counts, shape ``(replicates, sum(lengths))``: runs drawn with replacement,
    then ``length`` steps drawn with replacement from each drawn run (once per draw)."""
    runs = len(lengths)
    if runs > 1:
        picks = rng.multinomial(runs, np.full(runs, 1 / runs), size=replicates)
    else:
        picks = np.ones((replicates, 1), dtype=np.int64)
    parts = [rng.multinomial(picks[:, r] * n, np.full(n, 1 / n)) for r, n in enumerate(lengths)]
    return np.concatenate(parts, axis=1)


def chunks(lengths: Sequence[int], replicates: int, seed: int) -> Iterator[np.ndarray]:
    """:func:`weights` for ``replicates`` replicates, ``CHUNK`` at a time (deterministic)."""
    rng = np.random.default_rng(seed)
    for start in range(0, replicates, CHUNK):
        yield weights(lengths, min(CHUNK, replicates - start), rng).astype(np.float64)


def nan_means(w: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Weighted column means of ``values`` (steps × columns), NaN cells left out; one row per
    row of ``w``. A column with no value in a replicate gives NaN."""
    valid = ~np.isnan(values)
    num = w @ np.where(valid, values, 0.0)
    den = w @ valid.astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        return num / den


def medians(w: np.ndarray, values: np.ndarray) -> np.ndarray:
    """The median of each weighted sample (one per row of ``w``) of the 1-D ``values``,
    exactly as the median of the sample with every value repeated by its count."""
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    cum = np.cumsum(w[:, order], axis=1)
    total = cum[:, -1]
    lower = (cum >= ((total + 1) // 2)[:, None]).argmax(axis=1)
    upper = (cum >= (total // 2 + 1)[:, None]).argmax(axis=1)
    return (ordered[lower] + ordered[upper]) / 2


def interval(samples: np.ndarray, confidence: float) -> tuple[np.ndarray, np.ndarray]:
    """Percentile interval per column of bootstrap ``samples``; NaN where a replicate is NaN."""
    tail = 100 * (1 - confidence) / 2
    bounds = np.percentile(samples, [tail, 100 - tail], axis=0)
    broken = np.isnan(samples).any(axis=0)
    return np.where(broken, np.nan, bounds[0]), np.where(broken, np.nan, bounds[1])
