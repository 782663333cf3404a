"""The trend of many runs as one self-contained HTML page.

:func:`trend_payload` trims the trend JSON (``Trend.to_dict()``, contract B of issue 33) to
what the page draws; :func:`render_trend_html` embeds it, plotly.js, the report's stylesheet
and the page script (``templates/trend.js``) into ``templates/trend.html``. The page draws a
line chart of the step median per run with its confidence interval, the category stack per
run below it on the same x axis, a marker per significant move (hover: the explanation,
click: a details panel), a table of every move's changes and a table of the runs.

Bounds. Runs: at most :data:`MAX_RUNS` are drawn in full: the baseline and the most recent
ones. Older runs are aggregated into ``omitted``: their count, first and last label, the
range of their step medians and their significant moves (at most :data:`MAX_OMITTED_MOVES`,
largest first, each with its top change's text). Moves: :data:`MAX_DETAILED` of them carry
their details (the significant ones, largest first, then the most recent): at most
:data:`MAX_CHANGES` changes and :data:`MAX_MATCHED` matched roles, each name list at most
:data:`MAX_NAMES` names; every other move carries its top change's text only
(``detailed`` false). What is cut is counted (``changes_more``, ``matched_more``,
``base_more``, ``head_more``). Texts are cut at :data:`MAX_TEXT` characters, names at
:data:`MAX_NAME`, warnings at :data:`MAX_WARNINGS` per list. So the payload stays under
1 MB at 300 runs even when every move lists 20 changes and 20 roles of 20 long, distinct
names each and every run 12 warnings (the test's worst case: about 0.76 MB).

Safety is the report's (:mod:`tracekit.reports.html`): the payload is embedded with ``<``,
``>``, ``&`` written as JSON escapes, the page inserts names only as text or entity-escaped
plotly labels, and a Content-Security-Policy allows only the page's own three scripts.
"""

from __future__ import annotations

from typing import Any

from tracekit.errors import TraceError
from tracekit.reports.html import page
from tracekit.taxonomy import CATEGORIES

TEMPLATE = "trend.html"
SCRIPT = "trend.js"
MAX_RUNS = 300  # runs drawn in full: the baseline and the most recent ones
MAX_DETAILED = 24  # moves whose changes and matched roles the page carries
MAX_CHANGES = 8  # changes kept per detailed move
MAX_MATCHED = 6  # matched roles kept per detailed move
MAX_NAMES = 3  # kernel names kept per list
MAX_WARNINGS = 4  # warnings kept per list
MAX_OMITTED_MOVES = 50  # significant moves among aggregated runs, summarised
MAX_TEXT = 300  # characters per text
MAX_NAME = 120  # characters per kernel name
SIGNIFICANT = ("regression", "improvement")
RUN_FIELDS = (
    "index",
    "label",
    "source",
    "format",
    "vendor",
    "date",
    "steps",
    "steps_by",
    "phase",
    "step_ns",
    "fallback_ns",
    "exposed_comm_ns",
    "efficiency",
    "vs_baseline",
)
MOVE_FIELDS = ("from", "to", "status", "delta_ns", "rel", "lo", "hi", "explained_share")


def _text(value: Any, limit: int = MAX_TEXT) -> Any:
    if isinstance(value, str) and len(value) > limit:
        return value[: limit - 1] + "…"
    return value


def _names(row: dict[str, Any], key: str, out: dict[str, Any]) -> None:
    names = [str(n) for n in row.get(key) or []]
    out[key] = [_text(n, MAX_NAME) for n in names[:MAX_NAMES]]
    if len(names) > MAX_NAMES:
        out[key.replace("_names", "_more")] = len(names) - MAX_NAMES


def _warnings(values: Any) -> list[str]:
    values = [str(v) for v in values or []]
    kept = [_text(v) for v in values[:MAX_WARNINGS]]
    if len(values) > MAX_WARNINGS:
        kept.append(f"… and {len(values) - MAX_WARNINGS} more warnings")
    return kept


def _change(change: dict[str, Any], detailed: bool) -> dict[str, Any]:
    out = {
        key: _text(change.get(key))
        for key in ("kind", "text", "delta_ns", "share", "matched_by", "category")
    }
    if detailed:
        _names(change, "base_names", out)
        _names(change, "head_names", out)
    return out


def _matched(row: dict[str, Any]) -> dict[str, Any]:
    out = {key: _text(row.get(key)) for key in ("label", "matched_by", "delta_ns")}
    _names(row, "base_names", out)
    _names(row, "head_names", out)
    return out


def _significant(move: dict[str, Any]) -> bool:
    return bool(move.get("significant", move.get("status") in SIGNIFICANT))


def _move(move: dict[str, Any], detailed: bool) -> dict[str, Any]:
    out: dict[str, Any] = {key: move.get(key) for key in MOVE_FIELDS}
    out["significant"], out["detailed"] = _significant(move), detailed
    changes, matched = move.get("changes") or [], move.get("matched") or []
    cap, matched_cap = (MAX_CHANGES, MAX_MATCHED) if detailed else (1, 0)
    out["changes"] = [_change(c, detailed) for c in changes[:cap]]
    out["changes_more"] = max(0, len(changes) - cap)
    out["matched"] = [_matched(m) for m in matched[:matched_cap]]
    out["matched_more"] = max(0, len(matched) - matched_cap)
    out["warnings"] = _warnings(move.get("warnings"))
    return out


def _detailed(moves: list[dict[str, Any]]) -> set[int]:
    """Positions of the moves that carry their details: the significant ones, largest
    first, then the most recent."""
    order = sorted(
        range(len(moves)),
        key=lambda k: (
            (0, -abs(moves[k].get("delta_ns") or 0), k) if _significant(moves[k]) else (1, 0, -k)
        ),
    )
    return set(order[:MAX_DETAILED])


def _run(run: dict[str, Any]) -> dict[str, Any]:
    out = {key: _text(run.get(key)) for key in RUN_FIELDS}
    out["categories"] = {k: v for k, v in (run.get("categories") or {}).items() if v}
    out["warnings"] = _warnings(run.get("warnings"))
    return out


def _categories(runs: list[dict[str, Any]]) -> list[str]:
    """Categories with time in any run: the taxonomy's order, then any others by name."""
    seen = {k for r in runs for k, v in (r.get("categories") or {}).items() if v}
    return [c for c in CATEGORIES if c in seen] + sorted(seen - set(CATEGORIES))


def _median(run: dict[str, Any]) -> float | None:
    value = (run.get("step_ns") or {}).get("median")
    return None if value is None else float(value)


def _omitted(
    runs: list[dict[str, Any]], moves: list[dict[str, Any]], label: dict[Any, Any]
) -> dict[str, Any]:
    """What the page says about the older runs it does not draw (``label``: run index to
    label, of every run)."""
    medians = [m for m in map(_median, runs) if m is not None]
    significant = sorted(
        (m for m in moves if _significant(m)), key=lambda m: -abs(m.get("delta_ns") or 0)
    )
    return {
        "runs": len(runs),
        "first": _text(runs[0].get("label")),
        "last": _text(runs[-1].get("label")),
        "median_min": min(medians) if medians else None,
        "median_max": max(medians) if medians else None,
        "significant": len(significant),
        "moves": [
            {
                "from_label": _text(label.get(m.get("from"), str(m.get("from")))),
                "to_label": _text(label.get(m.get("to"), str(m.get("to")))),
                "status": m.get("status"),
                "delta_ns": m.get("delta_ns"),
                "rel": m.get("rel"),
                "text": _text(((m.get("changes") or [{}])[0]).get("text")),
            }
            for m in significant[:MAX_OMITTED_MOVES]
        ],
    }


def _window(runs: list[dict[str, Any]], baseline: int, max_runs: int) -> tuple[int, bool]:
    """The first run of the drawn window of recent runs, and whether the baseline is drawn
    apart (before that window)."""
    if len(runs) <= max_runs:
        return 0, False
    start = len(runs) - max_runs
    if 0 <= baseline < start:
        return start + 1, True
    return start, False


def trend_payload(data: dict[str, Any], *, max_runs: int = MAX_RUNS) -> dict[str, Any]:
    """The page's JSON document: the trend JSON trimmed to what the page draws (see the
    module docstring for the bounds)."""
    if not isinstance(data, dict) or data.get("kind") != "trend":
        raise TraceError("trend page: the input is not a trend document (kind != 'trend')")
    runs = list(data.get("runs") or [])
    moves = list(data.get("moves") or [])
    baseline = int(data.get("baseline") or 0)
    start, apart = _window(runs, baseline, max(2, max_runs))
    drawn = ([runs[baseline]] if apart else []) + runs[start:]
    older = [r for i, r in enumerate(runs[:start]) if i != baseline]
    kept = [m for m in moves if int(m.get("from", -1)) >= start]
    detailed = _detailed(kept)
    out: dict[str, Any] = {
        key: data.get(key)
        for key in ("baseline", "threshold", "min_impact", "confidence", "ordered_by")
    }
    out |= {
        "categories": _categories(drawn),
        "runs": [_run(r) for r in drawn],
        "runs_total": len(runs),
        "moves": [_move(m, k in detailed) for k, m in enumerate(kept)],
        "warnings": _warnings(data.get("warnings")),
        "omitted": _omitted(
            older,
            [m for m in moves if int(m.get("from", -1)) < start],
            {r.get("index"): r.get("label") for r in runs},
        )
        if older
        else None,
    }
    return out


def page_title(data: dict[str, Any]) -> str:
    """``tracekit trend: first … last (N runs)`` (not escaped)."""
    runs = data.get("runs") or []
    if not runs:
        return "tracekit trend: no run"
    ends = str(runs[0].get("label")) + (f" … {runs[-1].get('label')}" if len(runs) > 1 else "")
    return f"tracekit trend: {ends} ({len(runs)} run{'s' if len(runs) != 1 else ''})"


def render_trend_html(data: dict[str, Any], *, max_runs: int = MAX_RUNS) -> str:
    """The trend page of a trend JSON document (``Trend.to_dict()``)."""
    return page(TEMPLATE, SCRIPT, page_title(data), trend_payload(data, max_runs=max_runs))
