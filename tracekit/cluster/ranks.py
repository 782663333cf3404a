"""Distinct rank numbers for a cluster's parts: traces that do not record their rank (an
Nsight Systems report per process, say) all claim rank 0; they are numbered by input order
instead, and a check says so."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import polars as pl

from tracekit.cluster.part import Part
from tracekit.model import Check, Finding


def _frame(frame: pl.DataFrame, mapping: dict[int, int]) -> pl.DataFrame:
    if frame.height == 0 or "rank" not in frame.columns:
        return frame
    return frame.with_columns(pl.col("rank").replace_strict(mapping, return_dtype=pl.Int32))


def _finding(finding: Finding, mapping: dict[int, int]) -> Finding:
    metrics = dict(finding.metrics)
    if isinstance(metrics.get("rank"), int):
        metrics["rank"] = mapping.get(metrics["rank"], metrics["rank"])
    return replace(
        finding,
        rank=mapping.get(finding.rank, finding.rank) if finding.rank is not None else None,
        ranks=[mapping.get(r, r) for r in finding.ranks],
        metrics=metrics,
    )


def renumbered(part: Part, mapping: dict[int, int]) -> Part:
    """``part`` with its ranks renamed by ``mapping`` everywhere it names one."""
    return replace(
        part,
        ranks=[mapping[r] for r in part.ranks],
        step_metrics=_frame(part.step_metrics, mapping),
        launches=_frame(part.launches, mapping),
        drill=_frame(part.drill, mapping),
        findings=[_finding(f, mapping) for f in part.findings],
    )


def distinct_ranks(parts: list[Part]) -> tuple[list[Part], list[Check]]:
    """The parts unchanged when no two claim the same rank; otherwise every part's ranks
    numbered in input order (0, 1, …), with a ``ranks.numbering`` warning."""
    counts = Counter(r for p in parts for r in p.ranks)
    repeated = sorted(r for r, n in counts.items() if n > 1)
    if not repeated:
        return parts, []
    out, next_rank = [], 0
    for part in parts:
        mapping = {r: next_rank + i for i, r in enumerate(part.ranks)}
        next_rank += len(part.ranks)
        out.append(renumbered(part, mapping))
    shown = ", ".join(str(r) for r in repeated[:5])
    check = Check(
        "ranks.numbering",
        "warn",
        f"several inputs claim rank(s) {shown}: ranks are numbered by input order instead"
        f" ({', '.join(f'{p.source} = {q.ranks[0]}' for p, q in zip(parts[:3], out[:3]))}…);"
        " name the files by rank if that order is wrong",
    )
    return out, [check]
