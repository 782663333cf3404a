"""Sentences and numbers shared by the terminal and Markdown renderings of a diff.

They read ``Diff.to_dict()``; every function that puts a name from a trace into text takes
the renderer's escaping function (``md_text`` or ``printable``) as ``name``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tracekit.reports.format import cut, fmt_ns, fmt_pct

Escape = Callable[[str], str]
TITLES = {
    "regression": "Regression",
    "improvement": "Improvement",
    "no significant change": "No significant change",
}


def signed_ns(ns: float | None) -> str:
    """``+23.28 µs`` / ``−1.20 ms`` / ``0 ns``."""
    if ns is None:
        return "-"
    if ns == 0:
        return "0 ns"
    return ("+" if ns > 0 else "−") + fmt_ns(abs(ns))


def signed_pct(ratio: float | None) -> str:
    """``+10.0%`` / ``−2.5%``; ``new`` for a change from zero."""
    if ratio is None:
        return "new"
    if round(100 * ratio, 1) == 0:
        return "0.0%"
    return ("+" if ratio > 0 else "−") + f"{100 * abs(ratio):.1f}%"


def interval(est: dict[str, Any]) -> str:
    """The confidence interval, relative when the base is not zero: ``+7.0 … +13.2%``."""
    if est["rel_lo"] is not None and est["rel_hi"] is not None:
        return f"{signed_pct(est['rel_lo'])[:-1]} … {signed_pct(est['rel_hi'])}"
    if est["lo"] is None or est["hi"] is None:
        return "-"
    return f"{signed_ns(est['lo'])} … {signed_ns(est['hi'])}"


def title(data: dict[str, Any]) -> str:
    """``Regression``, ``Improvement`` or ``No significant change``."""
    return TITLES[data["verdict"]]


def gate_phrase(change: dict[str, Any], name: Escape) -> str:
    """One gate as a phrase: what, relative change, absolute change, interval."""
    est = change["estimate"]
    what = (
        f"{change['name']} median"
        if change["kind"] == "step"
        else f"{name(change['name'])} time per step"
    )
    if est["rel"] is None:
        return f"{what} new: {fmt_ns(est['head'])} (CI {interval(est)})"
    return f"{what} {signed_pct(est['rel'])} ({signed_ns(est['delta'])}, CI {interval(est)})"


def gates(data: dict[str, Any]) -> list[dict[str, Any]]:
    """Step median then categories, each a change dict."""
    return [data["step"], *data["categories"]]


def verdict_line(data: dict[str, Any], name: Escape) -> str:
    """Why the verdict is what it is, in one sentence (without the title)."""
    threshold = f"threshold {100 * data['threshold']:g}%"
    if data["verdict"] == "no significant change":
        text = f"{gate_phrase(data['step'], name)}, {threshold}"
    else:
        moved = [g for g in gates(data) if g["status"] == data["verdict"]]
        text = "; ".join(gate_phrase(g, name) for g in moved) + f", {threshold}"
    noisy = [g for g in gates(data) if g["status"] == "not significant"]
    if noisy:
        text += "; beyond the threshold but within the noise: " + ", ".join(
            gate_phrase(g, name) for g in noisy
        )
    return text


FINDING_WORDS = {
    "appeared": "new",
    "disappeared": "resolved",
    "grew": "grew",
    "shrank": "shrank",
}
MAX_NAMED = 3  # findings named in the one-sentence summary per status
TITLE_CHARS = 160  # a finding's title is cut to this


def changed_findings(data: dict[str, Any]) -> list[dict[str, Any]]:
    """The findings whose pattern appeared, disappeared, grew or shrank (largest change in
    cost per step first, as the diff orders them)."""
    return [f for f in data["findings"] if f["status"] in FINDING_WORDS]


def findings_summary(data: dict[str, Any], name: Escape) -> str:
    """Findings (by pattern) that are new, resolved, grew or shrank, in one sentence (empty
    when none); a few named per status."""
    parts = []
    for status, word in FINDING_WORDS.items():
        kinds = [f for f in changed_findings(data) if f["status"] == status]
        if kinds:
            named = [
                f"[{name(f['rule'])}] {name(cut(f['title'], TITLE_CHARS))}"
                for f in kinds[:MAX_NAMED]
            ]
            more = ", …" if len(kinds) > MAX_NAMED else ""
            parts.append(f"{len(kinds)} {word} ({'; '.join(named)}{more})")
    return "findings: " + ", ".join(parts) if parts else ""


def finding_cells(f: dict[str, Any]) -> list[str]:
    """Impact per run on each side, the change of cost per step and its share of the base
    step median: base, head, Δ per step, Δ % of a step."""
    share = f["step_share"]
    return [
        fmt_ns(f["base_ns"]) if f["base_runs"] else "-",
        fmt_ns(f["head_ns"]) if f["head_runs"] else "-",
        signed_ns(f["delta_per_step_ns"]),
        "-" if share is None else signed_pct(share),
    ]


def causes(data: dict[str, Any], name: Escape, top: int = 3) -> str:
    """The kernels that explain the verdict: largest deltas in its direction, within the
    categories that moved (any category when only the step time did)."""
    if data["verdict"] == "no significant change":
        return ""
    sign = 1 if data["verdict"] == "regression" else -1
    moved = {c["name"] for c in data["categories"] if c["status"] == data["verdict"]}
    kernels = [
        k
        for k in data["kernels"]
        if (k["estimate"]["delta"] or 0) * sign > 0
        and (not moved or k["detail"]["category"] in moved)
    ]
    if kernels:  # the largest first; leave out those under a tenth of it
        largest = abs(kernels[0]["estimate"]["delta"])
        kernels = [k for k in kernels if abs(k["estimate"]["delta"]) >= largest / 10][:top]
    parts = [f"{name(k['label'])} {signed_ns(k['estimate']['delta'])}" for k in kernels]
    return "most of it: " + ", ".join(parts) if parts else ""


def step_line(data: dict[str, Any]) -> str:
    """Step median, p90 and count of both sides."""
    step, est = data["step"], data["step"]["estimate"]
    runs = f"{len(data['base']['runs'])} → {_count(len(data['head']['runs']), 'run')}"
    return (
        f"median {fmt_ns(est['base'])} → {fmt_ns(est['head'])} ({signed_pct(est['rel'])}, "
        f"CI {interval(est)}, {step['status']}); p90 {fmt_ns(step['p90']['base'])} → "
        f"{fmt_ns(step['p90']['head'])}; {step['count']['base']} → "
        f"{_count(step['count']['head'], 'step')}, {runs}"
    )


def method_note(data: dict[str, Any]) -> str:
    """How the numbers were obtained, for the footer."""
    single = 1 in (len(data["base"]["runs"]), len(data["head"]["runs"]))
    note = (
        f"Step median and time per step of each category compared by a hierarchical bootstrap "
        f"(runs, then steps; {data['bootstrap']['replicates']} replicates, seed "
        f"{data['bootstrap']['seed']}). A change fails the gate when it is beyond "
        f"{100 * data['threshold']:g}% and its {100 * data['gate_confidence']:.1f}% interval "
        f"excludes zero ({100 * data['confidence']:g}% over all gates), and for a category when "
        f"it is at least {100 * data['min_impact']:g}% of the base step median. Kernels and rule "
        f"metrics: mean per step, {100 * data['confidence']:g}% intervals. Findings are matched "
        f"by rule and pattern; one grew or shrank when its impact per step moved by at least "
        f"{100 * data['min_impact']:g}% of the base step median; findings do not gate."
    )
    if min(data["base"]["steps"], data["head"]["steps"]) < 2:
        note += " One step on a side: no noise estimate, the threshold alone decides."
    elif single:
        note += " One run on a side: run-to-run variation is not measured; pass several runs."
    return note


def mover_rows(data: dict[str, Any], top: int) -> list[tuple[dict[str, Any], list[str]]]:
    """Categories, then kernels, with the largest time change per step: (change, cells of
    base, head, Δ, Δ %, CI, status)."""
    cats = [c for c in data["categories"] if c["estimate"]["delta"]][:top]
    kernels = [k for k in data["kernels"] if k["estimate"]["delta"]][:top]
    rows = []
    for change in cats + kernels:
        est = change["estimate"]
        cells = [
            fmt_ns(est["base"]),
            fmt_ns(est["head"]),
            signed_ns(est["delta"]),
            signed_pct(est["rel"]),
            interval(est),
            change["status"],
        ]
        rows.append((change, cells))
    return rows


# matched-by-role lines shown before "n more" (cross-vendor diffs match nearly every kernel)
ROLE_LINES = 10


def presence_lines(data: dict[str, Any], name: Escape) -> list[tuple[str, str]]:
    """Kernels that appear, disappear, or were matched by role under other names (a rename,
    another library or vendor; the largest changes first): (presence, text)."""
    lines, matched = [], []
    for k in data["kernels"]:
        d, est = k["detail"], k["estimate"]
        what = f"{name(k['label'])} ({d['category']}{', fallback' if d['fallback'] else ''})"
        if d["presence"] == "appeared":
            lines.append(
                (
                    "appeared",
                    f"appeared: {what}: {fmt_ns(est['head'])} in "
                    f"{d['count_head']:.3g} launches per step",
                )
            )
        elif d["presence"] == "disappeared":
            lines.append(
                (
                    "disappeared",
                    f"disappeared: {what}: {fmt_ns(est['base'])} in "
                    f"{d['count_base']:.3g} launches per step",
                )
            )
        elif d["presence"] in ("renamed", "role"):
            matched.append(
                (
                    "renamed",
                    f"matched by {d.get('matched_by') or 'name'}: {what}: "
                    f"{fmt_ns(est['base'])} → {fmt_ns(est['head'])} per step",
                )
            )
    if len(matched) > ROLE_LINES:
        more = len(matched) - ROLE_LINES
        matched = [
            *matched[:ROLE_LINES],
            ("renamed", f"{more} more matched by role (--format json)"),
        ]
    return lines + matched


def operation_lines(data: dict[str, Any], name: Escape, top: int = 10) -> list[str]:
    """Per launching operator (where both traces record them), the largest changes first."""
    out = []
    for op in (data.get("operations") or [])[:top]:
        out.append(
            f"{name(op['op'])} ({op['category'] or '?'}): {fmt_ns(op['base_ns'])} → "
            f"{fmt_ns(op['head_ns'])} per step ({signed_ns(op['delta_ns'])}), "
            f"{op['count_base']:.3g} → {op['count_head']:.3g} launches"
        )
    return out


def _metric_text(metric: str, value: float | None, signed: bool = False) -> str:
    if value is None:
        return "-"
    if metric.endswith(("ratio", "share")):
        return signed_pct(value).replace("%", " pp") if signed else fmt_pct(value)
    if metric.endswith("_ns"):
        return signed_ns(value) if signed else fmt_ns(value)
    return ("+" if value > 0 else "−") + f"{abs(value):.2f}" if signed else f"{value:.2f}"


def metric_rows(data: dict[str, Any]) -> list[list[str]]:
    """Rule metrics (mean per step) that changed: label, base, head, Δ, status."""
    rows = []
    for m in data["metrics"]:
        est, name = m["estimate"], m["name"]
        if est["delta"]:
            status = m["status"] + ("" if est["significant"] else " (within noise)")
            rows.append(
                [
                    m["label"],
                    _metric_text(name, est["base"]),
                    _metric_text(name, est["head"]),
                    _metric_text(name, est["delta"], True),
                    status,
                ]
            )
    return rows


def finding_lines(data: dict[str, Any], name: Escape, top: int = 10) -> list[tuple[str, str]]:
    """Up to ``top`` findings whose pattern changed: (status, text), then how many more."""
    out = []
    changed = changed_findings(data)
    for f in changed[:top]:
        base, head, delta, share = finding_cells(f)
        text = (
            f"{FINDING_WORDS[f['status']]}: [{name(f['rule'])}] "
            f"{name(cut(f['title'], TITLE_CHARS))}: impact "
            f"{base} → {head} per run, {delta} per step ({share} of a step)"
        )
        out.append((f["status"], text))
    if len(changed) > top:
        out.append(("more", f"{len(changed) - top} more: --format json lists every one"))
    return out


def _eff(value: float | None) -> str:
    return "?" if value is None else f"{value:.0%}"


def efficiency_lines(data: dict[str, Any], name: Escape, top: int = 10) -> list[str]:
    """Per operator family whose same-shape time moved: its time and efficiency on both
    sides, then the shapes that moved most (time per launch)."""
    out = []
    for family in (data.get("efficiency") or [])[:top]:
        eff = family["efficiency"]
        out.append(
            f"{name(family['family'])} ({_count(family['shapes'], 'shape')} on both sides): "
            f"{fmt_ns(family['base_ns'])} → {fmt_ns(family['head_ns'])} "
            f"({signed_pct(family['rel'])}), efficiency {_eff(eff['base'])} → "
            f"{_eff(eff['head'])}"
        )
        for moved in family["moved"][:3]:
            base_eff, head_eff = moved["efficiency"]
            out.append(
                f"  {name(moved['op'])} {name(moved['shapes'])}: "
                f"{fmt_ns(moved['base_ns_per_launch'])} → {fmt_ns(moved['head_ns_per_launch'])}"
                f" per launch ({signed_pct(moved['rel'])}), efficiency {_eff(base_eff)} → "
                f"{_eff(head_eff)}"
            )
    return out


def sources(side: dict[str, Any], name: Escape) -> str:
    """The runs of one side: the first trace, its format and steps, and how many runs."""
    runs = side["runs"]
    first = runs[0]
    steps = f"{_count(first['steps'], 'step')} by {first['steps_by']}"
    text = f"{name(first['source'])} ({name(first['format'])}, {steps})"
    if len(runs) == 1:
        return text
    return f"{len(runs)} runs, {_count(side['steps'], 'step')}: {text}, …"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
