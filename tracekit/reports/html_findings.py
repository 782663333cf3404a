"""The findings of the HTML report: ranked by impact, each with its steps written out, the
names its evidence gives that are device events (the drill-down outlines them), and its
evidence cut to a size a page can hold.

The page lists :data:`SHOWN` findings per trace and folds the rest (up to
:data:`MAX_FINDINGS`) under "N more"; ``tracekit report --format json`` has every one.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import polars as pl

from tracekit.model import Finding, ranked
from tracekit.reports.format import steps_text, worst_text

SHOWN = 10  # rows of the findings table per trace; the worst steps of these are embedded
MAX_FINDINGS = 200  # findings the page carries per trace; --format json has every one
EVIDENCE_ITEMS = 100  # items kept of each evidence list
STEP_ITEMS = 100  # steps kept of a finding's step list (the first ones; its worst is ``step``)


def evidence_strings(evidence: dict[str, Any]) -> Iterator[str]:
    """Every string of a finding's evidence: values, items of lists, and the string fields of
    the dicts in lists (``{"name": …, "ns": …}``)."""
    for value in evidence.values():
        items = value if isinstance(value, (list, tuple)) else [value]
        for item in items:
            if isinstance(item, str):
                yield item
            elif isinstance(item, dict):
                yield from (v for v in item.values() if isinstance(v, str))


def _trimmed(out: dict[str, Any]) -> dict[str, Any]:
    evidence, cut = dict(out["evidence"]), {}
    for key, value in out["evidence"].items():
        if isinstance(value, (list, tuple)) and len(value) > EVIDENCE_ITEMS:
            evidence[key], cut[key] = list(value[:EVIDENCE_ITEMS]), len(value)
    if cut:
        evidence["truncated"] = cut  # list -> its full length
    out["evidence"] = evidence
    if len(out["steps"]) > STEP_ITEMS:  # steps_text says where it occurs; the count here
        out["steps_total"], out["steps"] = len(out["steps"]), out["steps"][:STEP_ITEMS]
    return out


def event_names(work: pl.DataFrame, candidates: set[str]) -> set[str]:
    """The ``candidates`` that name a device event of ``work`` (one pass over the rows)."""
    if not candidates or work.height == 0:
        return set()
    names = work.select(pl.col("name").unique().cast(pl.String)).to_series()  # distinct first
    return set(names.filter(names.is_in(list(candidates))).to_list())


def page_findings(
    findings: list[Finding], work: pl.DataFrame, all_steps: list[int]
) -> list[dict[str, Any]]:
    """The findings the page carries, ranked (at most :data:`MAX_FINDINGS`): each as
    ``Finding.to_dict()`` with its evidence and its step list trimmed (``steps_total``: the
    full count, where cut), plus ``steps_text`` (``every step`` or
    ranges), ``worst_text`` and ``names`` (the evidence's strings that are device events)."""
    listed = [f.to_dict() for f in ranked(findings)[:MAX_FINDINGS]]
    candidates = {s for f in listed for s in evidence_strings(f["evidence"])}
    known = event_names(work, candidates)
    out = []
    for f in listed:
        names = list(dict.fromkeys(s for s in evidence_strings(f["evidence"]) if s in known))
        texts = {"steps_text": steps_text(f, all_steps), "worst_text": worst_text(f)}
        page = _trimmed(f)  # after the texts: it cuts the step list
        page.update(**texts, names=names[:EVIDENCE_ITEMS])
        out.append(page)
    return out
