"""A diff in Jupyter: :func:`diff_html` (``Diff._repr_html_``) and :func:`changes_frame`
(``Diff.categories_frame`` / ``Diff.kernels_frame``), both from ``Diff.to_dict()``.

The page says the verdict first, then the decode-step median change with its interval, the
categories, the top kernel (or role) rows, the operations, the findings that changed and the
warnings; every name from a trace is escaped by :mod:`tracekit.analysis.notebook`.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from tracekit.analysis.notebook import (
    Raw,
    badge,
    cut,
    esc,
    fmt_ns,
    fmt_pct,
    note,
    page,
    section,
    table,
)

TOP_KERNELS = 15
TOP_OPERATIONS = 10
TOP_FINDINGS = 10
NAMES_SHOWN = 3  # kernel keys listed per side under a role's label
ESTIMATE = ("base", "head", "delta", "rel", "lo", "hi", "rel_lo", "rel_hi", "significant")
VERDICT_CLASS = {"regression": "bad", "improvement": "good"}


def changes_frame(changes: list[dict[str, Any]]) -> pl.DataFrame:
    """One row per change (``Change.to_dict()``): ``name``, ``label``, the estimate's fields
    (``base`` … ``hi`` in ns per step, ``rel`` = delta / base), ``status`` and every
    ``detail`` field flattened to a column (lists stay lists)."""
    rows = [
        {
            "name": c["name"],
            "label": c.get("label") or c["name"],
            **{k: c["estimate"].get(k) for k in ESTIMATE},
            "status": c["status"],
            **{k: v for k, v in (c.get("detail") or {}).items() if k not in ESTIMATE},
        }
        for c in changes
    ]
    if not rows:
        schema: dict[str, Any] = {"name": pl.String, "label": pl.String}
        schema |= {k: pl.Boolean if k == "significant" else pl.Float64 for k in ESTIMATE}
        return pl.DataFrame(schema={**schema, "status": pl.String})
    return pl.from_dicts(rows, infer_schema_length=None, strict=False)


def _interval(est: dict[str, Any], confidence: float) -> str:
    if est.get("lo") is None or est.get("hi") is None:
        return "-"
    return f"{confidence:.0%} CI {fmt_ns(est['lo'], True)} … {fmt_ns(est['hi'], True)}"


def _gate_text(change: dict[str, Any]) -> str:
    est = change["estimate"]
    what = "decode step median" if change["kind"] == "step" else f"{change['name']} time per step"
    return f"{what} {fmt_pct(est.get('rel'), True)} ({fmt_ns(est.get('delta'), True)})"


def verdict_banner(data: dict[str, Any]) -> Raw:
    """The verdict and the gates that decided it (or the step median's change when none)."""
    verdict = data["verdict"]
    gates = [data["step"], *data["categories"]]
    deciding = [g for g in gates if g["status"] == verdict] or [data["step"]]
    text = f"{verdict}: " + "; ".join(_gate_text(g) for g in deciding)
    kind = VERDICT_CLASS.get(verdict, "plain")
    return Raw(
        f'<div class="tk-badge tk-{kind}" style="display:block;padding:6px 10px;'
        f'font-size:14px;border-radius:4px">{esc(text)}</div>'
    )


def step_table(data: dict[str, Any]) -> Raw:
    """The decode step: median, p90 and count on each side, the change and its interval."""
    step, conf = data["step"], data["confidence"]
    est = step["estimate"]
    p90, count = step.get("p90") or {}, step.get("count") or {}
    return table(
        ["", "base", "head", "Δ", "Δ %", "interval", "status"],
        [
            (
                f"{data.get('phase', 'all')} step median",
                fmt_ns(est["base"]),
                fmt_ns(est["head"]),
                fmt_ns(est["delta"], True),
                fmt_pct(est["rel"], True),
                _interval(est, conf),
                badge(step["status"]),
            ),
            ("p90", fmt_ns(p90.get("base")), fmt_ns(p90.get("head")), "", "", "", ""),
            ("steps", count.get("base"), count.get("head"), "", "", "", ""),
        ],
        right=" rrrr",
    )


def category_table(data: dict[str, Any]) -> Raw:
    """Time per step per category, largest change first."""
    conf = data["confidence"]
    rows = [
        (
            c["name"],
            fmt_ns(c["estimate"]["base"]),
            fmt_ns(c["estimate"]["head"]),
            fmt_ns(c["estimate"]["delta"], True),
            fmt_pct(c["estimate"]["rel"], True),
            _interval(c["estimate"], conf),
            badge(c["status"]),
        )
        for c in data["categories"]
    ]
    return table(["category", "base", "head", "Δ", "Δ %", "interval", "status"], rows, " rrrr")


def _names(detail: dict[str, Any]) -> str:
    """``base: a, b → head: c`` for a role whose keys differ between the sides."""
    base, head = detail.get("base_names") or [], detail.get("head_names") or []
    if (not base and not head) or base == head:
        return ""

    def some(names: list[str]) -> str:
        extra = f" +{len(names) - NAMES_SHOWN}" if len(names) > NAMES_SHOWN else ""
        return ", ".join(cut(n, 60) for n in names[:NAMES_SHOWN]) + extra or "-"

    return f"{some(base)} → {some(head)}"


def kernel_table(data: dict[str, Any], top: int = TOP_KERNELS) -> Raw:
    """The ``top`` kernel (role) rows by size of change: label (its full key on hover, and
    the keys on each side where they differ), category, how matched, base → head per step,
    Δ, status."""
    rows = []
    for k in data["kernels"][:top]:
        detail, est = k.get("detail") or {}, k["estimate"]
        names = _names(detail)
        label = (
            f'<span title="{esc(k["name"])}">{esc(cut(k.get("label") or k["name"], 100))}</span>'
        )
        if names:
            label += f'<br><span class="tk-muted">{esc(names)}</span>'
        matched = detail.get("matched_by") or detail.get("presence")
        rows.append(
            (
                Raw(label),
                detail.get("category"),
                matched,
                f"{fmt_ns(est['base'])} → {fmt_ns(est['head'])}",
                fmt_ns(est["delta"], True),
                fmt_pct(est["rel"], True),
                badge(k["status"]),
            )
        )
    more = len(data["kernels"]) - top
    tail = f'<p class="tk-muted">{more} more in diff.kernels_frame</p>' if more > 0 else ""
    headers = ["kernel / role", "category", "matched by", "per step", "Δ", "Δ %", "status"]
    return Raw(table(headers, rows, "   rrr") + tail)


def operation_table(data: dict[str, Any], top: int = TOP_OPERATIONS) -> Raw | None:
    """Time per step per launching operator, largest change first (None when the traces
    record no launching operators)."""
    ops = sorted(data.get("operations") or [], key=lambda o: -abs(o.get("delta_ns") or 0))
    if not ops:
        return None
    rows = [
        (
            o.get("op"),
            o.get("category"),
            f"{fmt_ns(o.get('base_ns'))} → {fmt_ns(o.get('head_ns'))}",
            fmt_ns(o.get("delta_ns"), True),
            f"{o.get('count_base')} → {o.get('count_head')}",
        )
        for o in ops[:top]
    ]
    return table(["operator", "category", "per step", "Δ", "launches"], rows, "  rrr")


def finding_table(data: dict[str, Any], top: int = TOP_FINDINGS) -> Raw | None:
    """Findings whose pattern appeared, disappeared, grew or shrank (None when none did)."""
    changed = [f for f in data["findings"] if f["status"] != "same"]
    if not changed:
        return None
    rows = [
        (
            badge(f["status"]),
            f["rule"],
            cut(f["title"], 200),
            fmt_ns(f["delta_per_step_ns"], True),
            fmt_pct(f.get("step_share"), True),
        )
        for f in changed[:top]
    ]
    return table(["status", "rule", "finding", "Δ per step", "of a step"], rows, "   rr")


def _sources(side: dict[str, Any]) -> str:
    runs = side.get("runs") or []
    names = ", ".join(str(r.get("source")) for r in runs[:3]) + (" …" if len(runs) > 3 else "")
    return f"{names} ({len(runs)} run(s), {side.get('steps')} steps)"


def diff_html(data: dict[str, Any]) -> str:
    """``Diff.to_dict()`` as notebook HTML: verdict banner, decode step change with its
    interval, categories, top kernel / role rows, operations, changed findings, warnings."""
    ops, findings = operation_table(data), finding_table(data)
    about = (
        f'<p class="tk-muted">base: {esc(_sources(data["base"]))}<br>head: '
        f"{esc(_sources(data['head']))}<br>threshold {fmt_pct(data['threshold'])}, "
        f"confidence {fmt_pct(data['confidence'])}</p>"
    )
    return page(
        "tracekit diff",
        verdict_banner(data),
        *(note(w) for w in data.get("warnings") or []),
        section("Decode step", step_table(data)),
        section("Categories", category_table(data)),
        section("Kernels", kernel_table(data) if data["kernels"] else "<p>No kernels.</p>"),
        *([section("Operations", ops)] if ops else []),
        section("Findings that changed", findings or "<p>No finding changed.</p>"),
        about,
    )
