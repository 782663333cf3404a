"""A diff for GitHub Actions: workflow-command annotations, step outputs and the job summary.

Pure functions on ``Diff.to_dict()`` (plus :func:`append_summary`, one file append):

- :func:`annotations`: ``::error`` per regression gate, ``::warning`` per gate beyond the
  threshold but within the noise and per warning of the diff, one ``::notice`` with the
  verdict, the median change and the largest category and kernel (role) changes. GitHub shows
  at most 10 annotations of a type per step, so each type keeps its worst 10 and the rest
  fold into one more notice.
- :func:`outputs` / :func:`output_file_text`: the step outputs and the text appended to
  ``$GITHUB_OUTPUT`` (``name=value``, or ``name<<ghadelimiter_<uuid>`` for multiline values).
- :func:`summary`: the Markdown verdict, cut well below the runner's step-summary cap.

Escaping follows the runner's workflow-command rules (actions/toolkit ``command.ts``): in the
message ``%``, CR and LF are percent-encoded; in a property (``title=``) also ``:`` and ``,``.
Other control characters in trace names become U+FFFD, so a name cannot start a command,
colour the log or end the line.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from typing import Any

from tracekit.reports import diff_text as dt
from tracekit.reports.diff_markdown import render_diff_markdown
from tracekit.reports.format import fmt_ns

MAX_PER_TYPE = 10  # GitHub shows this many annotations of each type per step
SUMMARY_LIMIT = 120_000  # bytes; the runner drops a step summary over 1 MiB (128 KiB before)
MARKDOWN_LIMIT = 60_000  # characters of the `markdown` output: a PR comment holds 65,536
TOP_CHANGES = 3  # categories and kernels named in the verdict notice
NAME_CHARS = 120  # a kernel label is cut to this in an annotation
VERDICTS = {
    "regression": "regression",
    "improvement": "improvement",
    "no significant change": "no-change",
}
_CONTROL = re.compile(r"[\x00-\x09\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def clean(text: object) -> str:
    """A name from a trace for an annotation: control characters other than CR and LF (which
    :func:`escape_data` encodes) replaced by U+FFFD."""
    return _CONTROL.sub("\ufffd", str(text))


def escape_data(text: str) -> str:
    """The message of a workflow command: ``%`` -> ``%25``, CR -> ``%0D``, LF -> ``%0A``."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """A property value of a workflow command: as :func:`escape_data`, and ``:`` -> ``%3A``,
    ``,`` -> ``%2C``."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def command(kind: str, message: str, **properties: str) -> str:
    """One workflow command line: ``::kind title=...::message`` (properties escaped)."""
    props = ",".join(f"{key}={escape_property(value)}" for key, value in properties.items())
    return f"::{kind}{' ' + props if props else ''}::{escape_data(message)}"


def _label(text: object) -> str:
    """A kernel label cut to NAME_CHARS characters (line breaks kept: escape_data encodes
    them)."""
    text = str(text)
    return clean(text if len(text) <= NAME_CHARS else text[: NAME_CHARS - 1] + "…")


def _what(gate: dict[str, Any]) -> str:
    return "decode step median" if gate["kind"] == "step" else f"{clean(gate['name'])} per step"


def _delta(change: dict[str, Any]) -> float:
    return change["estimate"]["delta"] or 0.0


def _kernels_in(data: dict[str, Any], category: str, sign: int) -> list[dict[str, Any]]:
    """Kernels (roles) of ``category`` that moved in the direction ``sign``, largest first."""
    moved = [
        k
        for k in data["kernels"]
        if k["detail"].get("category") == category and _delta(k) * sign > 0
    ]
    return sorted(moved, key=lambda k: -abs(_delta(k)))[:TOP_CHANGES]


def _kernel_phrase(kernel: dict[str, Any]) -> str:
    detail = kernel["detail"]
    how = detail.get("matched_by")
    presence = detail.get("presence", "both")
    note = ""
    if presence in ("appeared", "disappeared"):
        note = f" ({presence})"
    elif presence != "both" or (how and how != "name"):
        note = f" (matched by {how})" if how else f" ({presence})"
    label = kernel.get("label") or kernel["name"]
    return f"{_label(label)} {dt.signed_ns(_delta(kernel))}{note}"


def _gate_message(data: dict[str, Any], gate: dict[str, Any]) -> str:
    text = dt.gate_phrase(gate, clean) + f", threshold {100 * data['threshold']:g}%"
    if gate["kind"] == "category":
        sign = 1 if _delta(gate) > 0 else -1
        kernels = _kernels_in(data, gate["name"], sign)
        if kernels:
            text += "; most of it: " + ", ".join(_kernel_phrase(k) for k in kernels)
    return text


def _ranked_gates(data: dict[str, Any], status: str) -> list[dict[str, Any]]:
    """The gates (step median, categories) with ``status``, largest absolute change first."""
    gates = [g for g in dt.gates(data) if g["status"] == status]
    return sorted(gates, key=lambda g: -abs(_delta(g)))


def _errors(data: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [
        ("error", f"tracekit: {_what(g)} regressed", _gate_message(data, g))
        for g in _ranked_gates(data, "regression")
    ]


def _warnings(data: dict[str, Any]) -> list[tuple[str, str, str]]:
    out = [("warning", "tracekit diff", clean(w)) for w in data["warnings"]]
    out += [
        ("warning", f"tracekit: {_what(g)} beyond the threshold, within the noise", msg)
        for g in _ranked_gates(data, "not significant")
        for msg in [_gate_message(data, g)]
    ]
    return out


def median_change(data: dict[str, Any]) -> str:
    """The relative change of the step median as ``+3.2%`` / ``-1.5%`` (ASCII sign), empty
    when the base median is zero."""
    rel = data["step"]["estimate"]["rel"]
    if rel is None:
        return ""
    value = round(100 * rel, 1)
    return "0.0%" if value == 0 else f"{value:+.1f}%"


def top_changes(data: dict[str, Any], top: int = TOP_CHANGES) -> list[str]:
    """The largest category and kernel (role) changes per step, as phrases."""
    cats = sorted((c for c in data["categories"] if _delta(c)), key=lambda c: -abs(_delta(c)))[:top]
    kernels = sorted((k for k in data["kernels"] if _delta(k)), key=lambda k: -abs(_delta(k)))[:top]
    return [f"{clean(c['name'])} {dt.signed_ns(_delta(c))}" for c in cats] + [
        f"kernel {_kernel_phrase(k)}" for k in kernels
    ]


def _verdict_notice(data: dict[str, Any]) -> tuple[str, str, str]:
    est = data["step"]["estimate"]
    text = (
        f"{dt.title(data)}: decode step median {fmt_ns(est['base'])} -> {fmt_ns(est['head'])} "
        f"({median_change(data) or 'new'}, CI {dt.interval(est)}, {data['step']['status']}), "
        f"threshold {100 * data['threshold']:g}%"
    )
    changes = top_changes(data)
    text += "; largest changes: " + "; ".join(changes) if changes else "; nothing moved"
    return ("notice", f"tracekit diff: {dt.title(data)}", text)


def _fold(kind: str, items: list[tuple[str, str, str]]) -> tuple[list[tuple[str, str, str]], str]:
    """The first MAX_PER_TYPE items and a sentence naming the rest (empty when none)."""
    if len(items) <= MAX_PER_TYPE:
        return items, ""
    rest = items[MAX_PER_TYPE:]
    names = "; ".join(title.removeprefix("tracekit: ") for _, title, _ in rest[:5])
    more = ", …" if len(rest) > 5 else ""
    return items[:MAX_PER_TYPE], f"{len(rest)} more {kind}s ({names}{more})"


def annotations(data: dict[str, Any]) -> list[str]:
    """The workflow commands for a diff: errors (regression gates, worst first), warnings
    (the diff's warnings, then noisy gates), the verdict notice and, when a type had more
    than 10, one notice folding the rest."""
    errors, folded_errors = _fold("regression", _errors(data))
    warnings, folded_warnings = _fold("warning", _warnings(data))
    notices = [_verdict_notice(data)]
    folded = [text for text in (folded_errors, folded_warnings) if text]
    if folded:
        notices.append(("notice", "tracekit diff: more", "; ".join(folded)))
    return [command(kind, msg, title=title) for kind, title, msg in errors + warnings + notices]


def outputs(data: dict[str, Any], top: int = 10) -> dict[str, str]:
    """The step outputs: ``verdict`` (regression, improvement, no-change), ``median-change``
    (``+3.2%``), ``median-change-ns`` (the step median's change in whole ns), ``exit-code``
    (the diff's: 1 on a regression) and ``markdown`` (the verdict, cut to fit a PR comment)."""
    delta = data["step"]["estimate"]["delta"]
    return {
        "verdict": VERDICTS[data["verdict"]],
        "median-change": median_change(data),
        "median-change-ns": "" if delta is None else f"{delta:.0f}",
        "exit-code": str(data["exit_code"]),
        "markdown": summary(data, MARKDOWN_LIMIT, top, unit="characters"),
    }


def error_outputs(message: str) -> dict[str, str]:
    """The step outputs when the diff could not run: verdict ``inconclusive``, exit code 2."""
    return {
        "verdict": "inconclusive",
        "median-change": "",
        "median-change-ns": "",
        "exit-code": "2",
        "markdown": error_summary(message),
    }


def error_summary(message: str) -> str:
    """The step summary when the diff could not run."""
    from tracekit.reports.markdown import md_text

    return f"### tracekit diff\n\n⚠️ **Inconclusive**: {md_text(message)}\n"


def _size(text: str, unit: str) -> int:
    return len(text.encode()) if unit == "bytes" else len(text)


def summary(
    data: dict[str, Any], limit: int = SUMMARY_LIMIT, top: int = 10, unit: str = "bytes"
) -> str:
    """The Markdown verdict, cut at a line boundary to at most ``limit`` bytes (or
    characters) with a closing note when it is longer."""
    text = render_diff_markdown(data, top)
    size = _size(text, unit)
    if size <= limit:
        return text
    note = (
        f"\n> ⚠️ Cut at {limit:,} of {size:,} {unit}: "
        "`tracekit diff --format md` prints the whole verdict.\n"
    )
    room, kept = limit - _size(note, unit), []
    for line in text.splitlines(keepends=True):
        room -= _size(line, unit)
        if room < 0:
            break
        kept.append(line)
    return "".join(kept) + note


def new_delimiter() -> str:
    """A heredoc delimiter as @actions/core makes one."""
    return f"ghadelimiter_{uuid.uuid4()}"


def output_file_text(values: dict[str, str], delimiter: Callable[[], str] = new_delimiter) -> str:
    """``values`` as lines for ``$GITHUB_OUTPUT``: ``name=value``, or for a value with a line
    break ``name<<DELIM``, the value, ``DELIM`` (a fresh delimiter not in the value)."""
    lines = []
    for name, value in values.items():
        if "\n" not in value and "\r" not in value:
            lines.append(f"{name}={value}\n")
            continue
        mark = delimiter()
        if mark in name or mark in value:
            raise ValueError(f"output {name}: the delimiter occurs in the value")
        lines.append(f"{name}<<{mark}\n{value}\n{mark}\n")
    return "".join(lines)


def append_summary(path: str, data: dict[str, Any], top: int = 10) -> None:
    """Append the Markdown verdict (:func:`summary`) to the step-summary file ``path``."""
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(summary(data, SUMMARY_LIMIT, top))
