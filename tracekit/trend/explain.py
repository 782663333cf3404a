"""A move of a trend: the diff of two consecutive runs (:func:`tracekit.diff.compare`) told as
the changes that explain it.

The move's status is the diff's step status (median step time: beyond the threshold and out
of the noise). Its changes, largest first:

* one per kernel row of the diff (a role: kernels matched across the runs by name or by the
  job they do) whose time per step moved by at least the diff's floor (``min_impact`` × the
  base step median): kind ``fallback`` when the role has fallback kernels on one side only
  (a fallback chain gone or new), ``collective`` for communication, else ``kernel``;
* ``steps`` first when the steps were found differently on the two sides (their times may
  not compare);
* ``finding`` for a finding pattern that appeared or disappeared with a cost per step of at
  least the floor, when no listed kernel change covers it.

A change's ``share`` is its delta over the move's delta when the move is significant (else
null: a move inside the noise has nothing to share out); ``explained_share`` sums them.
``matched`` lists the roles whose kernels have other names on the two sides (renames, a
vendor switch) with how they were matched.
"""

from __future__ import annotations

from typing import Any

from tracekit.diff.findings import FindingChange
from tracekit.diff.result import Change, Diff
from tracekit.names import short_name

SIGNIFICANT = ("regression", "improvement")
# rules whose findings a listed change of this kind already explains
COVERED_BY = {"fallback": "fallback", "overlap": "collective", "mc2": "collective"}
NAME_CHARS = 48


def signed_time(ns: float) -> str:
    """``-19200`` -> ``−19.2 µs`` (ms from 1 ms on)."""
    sign = "+" if ns > 0 else "−" if ns < 0 else "±"
    value = abs(ns)
    return f"{sign}{value / 1e6:.2f} ms" if value >= 1e6 else f"{sign}{value / 1e3:.1f} µs"


def share_text(share: float) -> str:
    """``0.98`` -> ``98 %``, ``-0.13`` -> ``−13 %``."""
    return f"{'−' if share < 0 else ''}{abs(share) * 100:.0f} %"


def names_of(change: Change) -> tuple[list[str], list[str]]:
    """The kernel keys of a diff kernel row (a role) on each side."""
    return list(change.detail["base_names"]), list(change.detail["head_names"])


def matched_by(change: Change) -> str | None:
    """How the row's two sides were matched (None: on one side only)."""
    return change.detail["matched_by"]


def _short(names: list[str]) -> str:
    shown = list(dict.fromkeys(short_name(n, NAME_CHARS) for n in names))
    return ", ".join(shown[:3]) + (f" and {len(shown) - 3} more" if len(shown) > 3 else "")


def _fallback_text(base: list[str], head: list[str], gone: bool, how: str) -> str:
    chain, other = (base, head) if gone else (head, base)
    what = f"fallback chain of {len(chain)} kernel{'s' * (len(chain) != 1)} ({_short(chain)})"
    if gone:
        return f"{what} replaced by {_short(other)}{how}" if other else f"{what} gone"
    return f"new {what} in place of {_short(other)}{how}" if other else f"new {what}"


def _kernel_text(change: Change, kind: str, base: list[str], head: list[str], how: str) -> str:
    noun = "collective" if kind == "collective" else "kernel"
    delta = change.estimate.delta or 0
    if not base:
        return f"new {noun} {_short(head)}"
    if not head:
        return f"{noun} {_short(base)} gone"
    pace = "slower" if delta > 0 else "faster"
    n_b, n_h = change.detail.get("count_base"), change.detail.get("count_head")
    launches = ""
    if n_b is not None and n_h is not None and round(n_b, 2) != round(n_h, 2):
        launches = f", {n_b:g} → {n_h:g} launches per step"
    if sorted(base) == sorted(head):
        return f"{noun} {_short(base)} {pace}{launches}"
    return f"{_short(base)} → {_short(head)}{how} {pace}{launches}"


def kernel_change(
    change: Change, fb_base: frozenset[str], fb_head: frozenset[str]
) -> dict[str, Any]:
    """A diff kernel row as a change of the move (share filled in by :func:`move`)."""
    base, head = names_of(change)
    by = matched_by(change)
    category = change.detail.get("category")
    fallback_b, fallback_h = bool(fb_base & set(base)), bool(fb_head & set(head))
    how = f" (matched by {by})" if by and by != "name" and base and head else ""
    if fallback_b != fallback_h:
        kind = "fallback"
        text = _fallback_text(
            [n for n in base if n in fb_base] if fallback_b else base,
            head if fallback_b else [n for n in head if n in fb_head],
            fallback_b,
            how,
        )
    else:
        kind = "collective" if category == "comm" else "kernel"
        text = _kernel_text(change, kind, base, head, how)
    return {
        "kind": kind,
        "text": text,
        "delta_ns": change.estimate.delta or 0.0,
        "share": None,
        "matched_by": by,
        "category": category,
        "base_names": sorted(base),
        "head_names": sorted(head),
    }


def _covered(finding: FindingChange, changes: list[dict[str, Any]]) -> bool:
    """Whether a listed kernel change already explains the finding."""
    kind = COVERED_BY.get(finding.rule)
    if kind and any(c["kind"] == kind for c in changes):
        return True
    text = f"{finding.title} {finding.pattern}"
    names = {short_name(n, 200) for c in changes for n in c["base_names"] + c["head_names"]}
    return any(n and n in text for n in names)


def _new_findings(
    findings: list[FindingChange], floor: float, changes: list[dict[str, Any]]
) -> list[FindingChange]:
    """Patterns that appeared or disappeared with a cost per step of at least ``floor`` that
    no listed change covers. A rule whose patterns both appeared and disappeared (the same
    problem under other kernel names: a rename, a vendor switch) counts by its net change."""
    moved = [f for f in findings if f.status in ("appeared", "disappeared")]
    out = []
    for rule in dict.fromkeys(f.rule for f in moved):
        mine = [f for f in moved if f.rule == rule]
        net = sum(f.delta_per_step_ns for f in mine)
        if len({f.status for f in mine}) == 2 and abs(net) < floor:
            continue
        out += [f for f in mine if abs(f.delta_per_step_ns) >= floor and not _covered(f, changes)]
    return out


def finding_change(finding: FindingChange) -> dict[str, Any]:
    """A finding pattern that appeared or disappeared, as a change."""
    verb = "new finding" if finding.status == "appeared" else "finding resolved"
    return {
        "kind": "finding",
        "text": f"{verb}: [{finding.rule}] {finding.title}",
        "delta_ns": finding.delta_per_step_ns,
        "share": None,
        "matched_by": None,
        "category": None,
        "base_names": [],
        "head_names": [],
    }


def steps_change(diff: Diff) -> dict[str, Any] | None:
    """A change saying the steps were found differently on the two sides, or None."""
    before = sorted({r["steps_by"] for r in diff.base})
    after = sorted({r["steps_by"] for r in diff.head})
    if before == after:
        return None
    return {
        "kind": "steps",
        "text": f"steps found differently: by {', '.join(before)} → by {', '.join(after)}"
        " (step times may not compare; pass --step-marker)",
        "delta_ns": None,
        "share": None,
        "matched_by": None,
        "category": None,
        "base_names": [],
        "head_names": [],
    }


def matched_roles(diff: Diff) -> list[dict[str, Any]]:
    """The kernel rows whose two sides have other names, largest time first."""
    out = []
    for change in diff.kernels:
        base, head = names_of(change)
        if base and head and sorted(base) != sorted(head):
            out.append(
                {
                    "label": change.label or change.name,
                    "matched_by": matched_by(change),
                    "base_names": sorted(base),
                    "head_names": sorted(head),
                    "delta_ns": change.estimate.delta or 0.0,
                }
            )
    return out


def move(
    diff: Diff, index: int, fb_base: frozenset[str], fb_head: frozenset[str]
) -> dict[str, Any]:
    """The move from run ``index`` to run ``index + 1`` (see the module docstring)."""
    step = diff.step.estimate
    significant = diff.step.status in SIGNIFICANT
    floor = diff.min_impact * (step.base or 0.0)
    changes = [
        kernel_change(k, fb_base, fb_head)
        for k in diff.kernels
        if abs(k.estimate.delta or 0) >= floor and k.estimate.delta
    ]
    changes += [finding_change(f) for f in _new_findings(diff.findings, floor, changes)]
    changes.sort(key=lambda c: -abs(c["delta_ns"]))
    total = step.delta if significant and step.delta else None
    for c in changes:
        # a finding's cost overlaps the kernel rows' time (the same work in other words): it
        # gets no share, so that the shares do not count one microsecond twice
        counted = total and c["kind"] != "finding"
        c["share"] = c["delta_ns"] / total if counted else None
        share = f", {share_text(c['share'])} of the move" if c["share"] is not None else ""
        c["text"] = f"{c['text']}: {signed_time(c['delta_ns'])}/step{share}"
    steps = steps_change(diff)
    if steps is not None:
        changes.insert(0, steps)
    return {
        "from": index,
        "to": index + 1,
        "status": diff.step.status,
        "significant": significant,
        "delta_ns": step.delta,
        "rel": step.rel,
        "lo": step.lo,
        "hi": step.hi,
        "explained_share": sum(c["share"] for c in changes if c["share"] is not None)
        if total
        else None,
        "changes": changes,
        "matched": matched_roles(diff),
        "warnings": list(diff.warnings),
    }
