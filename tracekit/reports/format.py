"""Small display helpers shared by the reports: durations, percentages, names from traces."""

from __future__ import annotations

import re

from tracekit.names import drop_return_type

_TEMPLATE_OR_ARGS = re.compile(r"[<(]")
_WRAPPERS = {"device_kernel", "Kernel", "Kernel2", "kernel", "kentry"}
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")
_PLAIN = {"unnamed", "anonymous", "namespace", "lambda", "instance", "operator", "const",
          "int", "unsigned", "char", "long", "short", "float", "double", "bool", "void", "std",
          "array", "auto", "struct", "class"}  # fmt: skip


def printable(value: object) -> str:
    """``str(value)`` with every C0/C1 control character replaced by U+FFFD.

    Use it on all trace-derived text that reaches a terminal: rich escapes markup but passes
    control characters, so an ESC sequence or OSC-8 link in a kernel name would reach the
    terminal. A single replacement character keeps the text's width.
    """
    return _CONTROL.sub("\ufffd", str(value))


def fmt_ns(ns: float | int | None) -> str:
    """A duration in ns as a short human string: ``812 ns``, ``4.20 µs``, ``1.53 ms``, ``2.1 s``."""
    if ns is None:
        return "-"
    ns = float(ns)
    if abs(ns) < 1_000:
        return f"{ns:.0f} ns"
    if abs(ns) < 1_000_000:
        return f"{ns / 1e3:.2f} µs"
    if abs(ns) < 1_000_000_000:
        return f"{ns / 1e6:.2f} ms"
    return f"{ns / 1e9:.3f} s"


def fmt_pct(ratio: float | None) -> str:
    """A ratio as a percentage with one decimal."""
    return "-" if ratio is None else f"{100 * ratio:.1f}%"


def short_name(name: str | None, width: int = 60) -> str:
    """A readable form of a (demangled) kernel name: no return type, templates or parameters."""
    if not name:
        return "?"
    text = drop_return_type(name.strip())
    return _shorten(text[5:] if text.startswith("void ") else text, width)


def _kernel_argument(text: str, start: int) -> str | None:
    """The first template argument (of the ``<`` at ``start``) that names something, not a
    number: ``kentry<2, ck_tile::FmhaFwdKernel<…>>`` -> ``ck_tile::FmhaFwdKernel<…>``."""
    depth, begin = 0, start + 1
    for i in range(start, len(text)):
        ch = text[i]
        if ch in "<([{":
            depth += 1
        elif ch in ">)]}":
            depth -= 1
        if (depth == 1 and ch == ",") or depth == 0:
            argument = text[begin:i].strip()
            if argument[:1].isalpha() or argument[:1] == "_":
                return argument
            begin = i + 1
            if depth == 0:
                return None
    return None


def _shorten(text: str, width: int) -> str:
    for anonymous in ("<unnamed>::", "(anonymous namespace)::"):
        text = text.replace(anonymous, "")
    cut = _TEMPLATE_OR_ARGS.search(text, 1)
    if cut:
        base = text[: cut.start()]
        if text[cut.start()] == "<" and base.rsplit("::", 1)[-1] in _WRAPPERS:
            # cutlass::device_kernel<...GemmUniversal<...>>: the template argument is the kernel.
            kernel = _kernel_argument(text, cut.start())
            if kernel:
                base = f"{base}<{_shorten(kernel, width).rsplit('::', 1)[-1]}>"
        text = base.rstrip()
    if len(text) <= width:
        return text
    # Keep both ends: generated GEMM names (Cijk_…, nvjet_…) differ in their tails.
    head = (width - 1) // 2
    return text[:head] + "…" + text[len(text) - (width - 1 - head) :]


HINT_MAX = 24  # longer identifiers (Tensile ``Cijk_…`` names) give their ``_`` parts as hints


def _hint_tokens(name: str) -> list[str]:
    """Identifiers of ``name`` that may tell it apart, each at most :data:`HINT_MAX` long."""
    tokens = []
    for ident in _IDENTIFIER.findall(name):
        parts = [ident] if len(ident) <= HINT_MAX else ident.split("_")
        tokens += [t for t in parts if 3 <= len(t) <= HINT_MAX and t not in _PLAIN]
    return tokens


def distinct_short_names(names: list[str], width: int = 60) -> list[str]:
    """Printable :func:`short_name` of each name; where different names shorten to one text,
    each gets a short identifier of its own that the others lack (``[silu_kernel]``,
    ``[MT64x16x256]``), else a number; labels stay within ``width``."""
    labels = [printable(short_name(name, width)).rstrip() for name in names]
    groups: dict[str, list[int]] = {}
    for i, label in enumerate(labels):
        groups.setdefault(label, []).append(i)
    out = list(labels)
    for members in groups.values():
        if len(members) == 1:
            continue
        tokens = [_hint_tokens(names[i]) for i in members]
        for n, (i, own) in enumerate(zip(members, tokens), 1):
            others = set().union(*(set(t) for t in tokens if t is not own))
            hint = next((t for t in own if t not in others), None)
            mark = f" [{hint}]" if hint else f" #{n}"
            out[i] = printable(short_name(names[i], width - len(mark))).rstrip() + mark
    return out
