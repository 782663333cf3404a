"""Kernel names: as a diff matches them, and as a person reads them.

:func:`kernel_key` is the identity two traces are compared on: volatile parts (hashes,
addresses, counters, unique ids) removed, everything that tells two kernels apart (template
arguments, tile shapes, data types) kept. :func:`kernel_family` is coarser (template
arguments and trailing numbers dropped too); a diff uses it only to pair names that are left
over on both sides after matching by key, never to merge kernels that both traces have.

:func:`short_name` is the readable form of a name (no return type, templates or parameters),
:func:`distinct_short_names` keeps such forms apart, and :func:`printable` makes any text
from a trace safe to print.
"""

from __future__ import annotations

import re
from functools import lru_cache

# Inductor kernels: triton_{poi,red,per,tem,...}_fused_<ops>_<counter>
_TRITON_COUNTER = re.compile(r"^(triton_[A-Za-z0-9_]*?[A-Za-z])_\d+$")
# Ascend HCCL operators: hcom_allReduce__586_0_1 (op id, then segment indices)
_HCOM_ID = re.compile(r"^(hcom_[A-Za-z0-9]+?)_+\d+(?:_\d+)*$")
# Ascend graph-engine format conversions: trans_TransData_12
_GE_TRANS_COUNTER = re.compile(r"^(trans_[A-Za-z0-9]+)_\d+$")
# MindSpore operator ids: Default/network/Cast-op271, Default/AllReduce-op534_0
_MINDSPORE_OP_ID = re.compile(r"-op\d+(?:_\d+)*$")
# XLA fusion counters: loop_add_fusion_3, fusion.12
_XLA_FUSION_COUNTER = re.compile(r"(fusion)[._]\d+$")
# A token starts after "_" / "-" (which goes with it) or after any non-alphanumeric character
_START, _END = r"(?:[_-]|(?<![A-Za-z0-9]))", r"(?![A-Za-z0-9])"
_HEX_LITERAL = re.compile(_START + r"0x[0-9a-fA-F]+" + _END)
_UUID = re.compile(_START + r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}" + _END)
# A lowercase hex token: a hash when long or varied enough to be no word or dtype
_HEX_TOKEN = re.compile(_START + r"([0-9a-f]{8,})" + _END)
_SPACES = re.compile(r"\s+")
_NESTED_CLOSE = re.compile(r">\s+(?=>)")  # libstdc++ prints "> >", LLVM ">>"
_TRAILING_NUMBER = re.compile(r"[_.]?\d+$")
_TEMPLATE_OR_ARGS = re.compile(r"[<(]")
_WRAPPERS = {"device_kernel", "Kernel", "Kernel2", "kernel", "kentry"}
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")
_PLAIN = {  # words of C++ declarations, never a hint
    "unnamed",
    "anonymous",
    "namespace",
    "lambda",
    "instance",
    "operator",
    "const",
    "int",
    "unsigned",
    "char",
    "long",
    "short",
    "float",
    "double",
    "bool",
    "void",
    "std",
    "array",
    "auto",
    "struct",
    "class",
}


def _is_hash(token: str) -> bool:
    """A lowercase hex token that is an id: 16+ characters, or 8+ mixing at least one digit
    and one letter over 5+ distinct characters (``bf16bf16`` and ``deadbeef`` are not)."""
    if len(token) >= 16:
        return True
    digits = sum(ch.isdigit() for ch in token)
    return 0 < digits < len(token) and len(set(token)) >= 5


def _drop_hashes(text: str) -> str:
    return _HEX_TOKEN.sub(lambda m: "" if _is_hash(m.group(1)) else m.group(0), text)


def _strip_parameters(text: str) -> str:
    """``foo<T>(int, float*)`` -> ``foo<T>``: the parameter list of a demangled signature.

    Only a final balanced ``(...)`` glued to the name goes; ``Memcpy HtoD (Pinned -> Device)``
    keeps its words.
    """
    if not text.endswith(")"):
        return text
    depth = 0
    for i in range(len(text) - 1, -1, -1):
        ch = text[i]
        if ch == ")":
            depth += 1
        elif ch == "(":
            depth -= 1
            if depth == 0:
                return text[:i] if i > 0 and not text[i - 1].isspace() else text
    return text


def _parameters_start(text: str) -> int | None:
    """Where the parameter list glued to the end of a signature starts (``foo<T>(int)`` ->
    6), or None when ``text`` does not end in one."""
    if not text.endswith(")"):
        return None
    depth = 0
    for i in range(len(text) - 1, -1, -1):
        if text[i] == ")":
            depth += 1
        elif text[i] == "(":
            depth -= 1
            if depth == 0:
                return i if i > 0 and not text[i - 1].isspace() else None
    return None


def drop_return_type(text: str) -> str:
    """``std::enable_if<…>::type vllm::f<…>(int)`` -> ``vllm::f<…>(int)``: what comes before
    the function of a demangled signature (one whose parameter list is glued to its name).

    The function is read from the right: over its template arguments (``<>`` counted outside
    parentheses only, so ``(8)>(0)`` is no bracket) to the first space outside all brackets.
    Anything else (``Memcpy HtoD (Pinned -> Device)``, ``foo<T>``) is returned unchanged.
    """
    params = _parameters_start(text)
    if params is None:
        return text
    angle = round_ = 0
    for i in range(params - 1, -1, -1):
        ch = text[i]
        if ch in ")]}":
            round_ += 1
        elif ch in "([{":
            round_ = max(round_ - 1, 0)
        elif round_ == 0 and ch == ">" and text[max(i - 1, 0)] != "-":
            angle += 1
        elif round_ == 0 and ch == "<":
            angle = max(angle - 1, 0)
        elif ch == " " and angle == 0 and round_ == 0:
            return text[i + 1 :]
    return text


def _strip_templates(text: str) -> str:
    """Every top-level ``<...>`` replaced by ``<>`` (``operator<`` and unbalanced text kept)."""
    out, depth = [], 0
    for ch in text:
        if ch == "<":
            if depth == 0:
                out.append("<>")
            depth += 1
        elif ch == ">" and depth > 0:
            depth -= 1
        elif depth == 0:
            out.append(ch)
    return text if depth else "".join(out)


@lru_cache(maxsize=65_536)
def kernel_key(name: str) -> str:
    """The name two traces are matched on (see the module docstring)."""
    text = _SPACES.sub(" ", name).strip()
    text = drop_return_type(text)
    text = _strip_parameters(text[5:] if text.startswith("void ") else text)
    text = _NESTED_CLOSE.sub(">", text)
    for pattern in (_TRITON_COUNTER, _HCOM_ID, _GE_TRANS_COUNTER):
        text = pattern.sub(r"\1", text)
    text = _MINDSPORE_OP_ID.sub("", text)
    text = _XLA_FUSION_COUNTER.sub(r"\1", text)
    text = _UUID.sub("", text)
    text = _HEX_LITERAL.sub("", text)
    text = _drop_hashes(text).strip()
    return text or name


@lru_cache(maxsize=65_536)
def kernel_family(key: str) -> str:
    """A key without template arguments and trailing numbers: ``Conv2D1`` and ``Conv2D5``,
    or one CUTLASS kernel with another tile template, share a family."""
    return _TRAILING_NUMBER.sub("", _strip_templates(key)) or key


def printable(value: object) -> str:
    """``str(value)`` with every C0/C1 control character replaced by U+FFFD.

    Use it on all trace-derived text that reaches a terminal: rich escapes markup but passes
    control characters, so an ESC sequence or OSC-8 link in a kernel name would reach the
    terminal. A single replacement character keeps the text's width.
    """
    return _CONTROL.sub("\ufffd", str(value))


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
