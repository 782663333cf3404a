"""The hierarchical bootstrap: weights, weighted statistics, and why runs are resampled."""

from __future__ import annotations

import numpy as np
import pytest

from tracekit import bootstrap


def test_weights_resample_runs_then_steps() -> None:
    rng = np.random.default_rng(1)
    w = bootstrap.weights([4, 4, 4], 500, rng)
    assert w.shape == (500, 12) and (w.sum(axis=1) == 12).all()
    # a run is either not drawn (all its steps 0) or drawn k times (its steps sum to 4 k)
    per_run = w.reshape(500, 3, 4).sum(axis=2)
    assert (per_run % 4 == 0).all() and (per_run == 0).any()
    # one run: only its steps are resampled, always as many as it has
    single = bootstrap.weights([7], 300, rng)
    assert single.shape == (300, 7) and (single.sum(axis=1) == 7).all()
    assert (single == 0).any()


def test_chunks_are_deterministic_and_complete() -> None:
    first = np.vstack(list(bootstrap.chunks([5, 3], 600, seed=0)))
    again = np.vstack(list(bootstrap.chunks([5, 3], 600, seed=0)))
    assert first.shape == (600, 8) and np.array_equal(first, again)
    assert not np.array_equal(first, np.vstack(list(bootstrap.chunks([5, 3], 600, seed=1))))


def test_weighted_statistics_equal_those_of_the_repeated_sample() -> None:
    rng = np.random.default_rng(2)
    values = rng.normal(100, 10, size=(9, 3))
    values[2, 1] = np.nan
    w = rng.integers(0, 4, size=(50, 9)).astype(float)
    w[:, 0] += 1  # no empty replicate
    means = bootstrap.nan_means(w, values)
    medians = bootstrap.medians(w, values[:, 0])
    for row, weight in enumerate(w.astype(int)):
        sample = np.repeat(values, weight, axis=0)
        assert np.allclose(means[row], np.nanmean(sample, axis=0))
        assert medians[row] == np.median(sample[:, 0])


def test_interval_percentiles_and_nan_columns() -> None:
    samples = np.column_stack([np.arange(1001.0), np.full(1001, np.nan)])
    lo, hi = bootstrap.interval(samples, 0.95)
    assert (lo[0], hi[0]) == (pytest.approx(25.0), pytest.approx(975.0))
    assert np.isnan(lo[1]) and np.isnan(hi[1])


def test_run_to_run_variation_widens_the_interval() -> None:
    """Five runs whose levels differ by a few percent, steps tight around each level: the
    steps alone suggest a precise mean; resampling the runs shows how little five runs say."""
    rng = np.random.default_rng(3)
    levels = [97.0, 99.0, 100.0, 101.0, 103.0]
    values = np.concatenate([rng.normal(level, 0.2, 20) for level in levels])[:, None]

    def width(lengths: list[int]) -> float:
        chunks = bootstrap.chunks(lengths, 2000, 0)
        means = np.vstack([bootstrap.nan_means(w, values) for w in chunks])
        lo, hi = bootstrap.interval(means, 0.95)
        return float(hi[0] - lo[0])

    runs, pooled = width([20] * 5), width([100])
    # steps as if independent: 100 samples of spread 2 -> standard error 0.2, width ~0.8
    assert pooled < 1.0
    # five run levels of spread 2 -> standard error ~0.9, width ~3.5: about sqrt(100 / 5) wider
    assert runs > 3.0 and runs > 4 * pooled
