"""What ``trend()`` produces: :class:`Trend`, the runs and the moves between them as the trend
JSON (``to_dict``), polars frames for further work and a notebook rendering."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import polars as pl

from tracekit.taxonomy import CATEGORIES

_CHANGE_SCHEMA = {
    "from": pl.Int64,
    "to": pl.Int64,
    "rank": pl.Int64,
    "kind": pl.String,
    "text": pl.String,
    "delta_ns": pl.Float64,
    "share": pl.Float64,
    "matched_by": pl.String,
    "category": pl.String,
    "base_names": pl.List(pl.String),
    "head_names": pl.List(pl.String),
}


@dataclass
class Trend:
    """A series of runs (``runs``: one dict per run) and the ``moves`` between consecutive
    runs (see :mod:`tracekit.trend`); ``to_dict`` is the trend JSON."""

    runs: list[dict[str, Any]]
    moves: list[dict[str, Any]]
    baseline: int = 0
    threshold: float = 0.05
    min_impact: float = 0.01
    confidence: float = 0.95
    ordered_by: str = "name"
    warnings: list[str] = field(default_factory=list)

    @property
    def significant(self) -> list[dict[str, Any]]:
        """The moves beyond the threshold and out of the noise."""
        return [m for m in self.moves if m["significant"]]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the trend JSON."""
        return {
            "kind": "trend",
            "baseline": self.baseline,
            "threshold": self.threshold,
            "min_impact": self.min_impact,
            "confidence": self.confidence,
            "ordered_by": self.ordered_by,
            "runs": self.runs,
            "moves": self.moves,
            "warnings": self.warnings,
        }

    @property
    def runs_frame(self) -> pl.DataFrame:
        """One row per run: identity, step median and interval, time per step of each
        category (``cat_<name>_ns``), fallback, exposed communication, efficiency and the
        change against the baseline."""
        rows = [
            {
                **{k: r[k] for k in ("index", "label", "source", "format", "vendor", "date")},
                **{k: r[k] for k in ("steps", "steps_by", "phase")},
                "step_median_ns": r["step_ns"]["median"],
                "step_lo_ns": r["step_ns"]["lo"],
                "step_hi_ns": r["step_ns"]["hi"],
                **{f"cat_{c}_ns": r["categories"].get(c, 0.0) for c in CATEGORIES},
                "fallback_ns": r["fallback_ns"],
                "exposed_comm_ns": r["exposed_comm_ns"],
                "efficiency": r["efficiency"],
                "vs_baseline_ns": r["vs_baseline"]["delta_ns"],
                "vs_baseline_rel": r["vs_baseline"]["rel"],
            }
            for r in self.runs
        ]
        return pl.DataFrame(rows, infer_schema_length=None)

    @property
    def moves_frame(self) -> pl.DataFrame:
        """One row per move: runs, status, step median change and interval, share explained
        and how many changes and matched roles it has."""
        keys = ("from", "to", "status", "significant", "delta_ns", "rel", "lo", "hi")
        rows = [
            {
                **{k: m[k] for k in keys},
                "explained_share": m["explained_share"],
                "changes": len(m["changes"]),
                "matched": len(m["matched"]),
            }
            for m in self.moves
        ]
        schema = {"explained_share": pl.Float64, "delta_ns": pl.Float64, "rel": pl.Float64}
        return pl.DataFrame(rows, schema_overrides=schema, infer_schema_length=None)

    @property
    def changes_frame(self) -> pl.DataFrame:
        """One row per change of every move, ranked within its move (``rank`` 0 first)."""
        rows = [
            {"from": m["from"], "to": m["to"], "rank": i, **c}
            for m in self.moves
            for i, c in enumerate(m["changes"])
        ]
        return pl.DataFrame(rows, schema=_CHANGE_SCHEMA)

    def _repr_html_(self) -> str:
        """The trend in a notebook (:mod:`tracekit.trend.notebook`)."""
        from tracekit.trend.notebook import trend_html

        return trend_html(self.to_dict())
