"""The one-directional house of docs/architecture.md, checked on the source: every import
(inside functions too) goes down the layers, parser families and rules stay to themselves,
and no module grows past the size a reader can hold."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "tracekit"
MAX_LINES = 450
# Bottom to top; a module may import its own part and the parts of the layers below it.
LAYERS: list[tuple[str, ...]] = [
    ("errors",),
    ("timeline",),
    (
        "intervals",
        "names",
        "units",
        "engine_frames",
        "pftrace",
        "progress",
        "bootstrap",
        "data",
        "memory",
    ),
    ("parsers", "taxonomy"),
    ("load", "runs", "export", "stats", "stack"),
    ("steps",),
    ("model",),
    ("metrics",),
    ("checks", "rules"),
    ("analysis",),
    ("cluster", "diff"),
    ("trend",),
    ("reports",),
    ("demo",),
    ("cli", "__init__"),
    ("__main__",),
]
LAYER_OF = {part: level for level, parts in enumerate(LAYERS) for part in parts}
RULE_SHARED = {"tracekit.rules.base", "tracekit.rules.registry", "tracekit.rules"}


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> list[tuple[str, int]]:
    """Every ``tracekit`` module ``path`` imports, with the line, wherever the import sits."""
    tree = ast.parse(path.read_text(), str(path))
    package = _module_name(path)
    if path.name != "__init__.py":
        package = package.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            found.append((module, node.lineno))
            found += [(f"{module}.{alias.name}", node.lineno) for alias in node.names]
    return [(name, line) for name, line in found if name.split(".")[0] == "tracekit"]


MODULES = sorted(PACKAGE.rglob("*.py"))
KNOWN = {_module_name(p) for p in MODULES}


def _part(module: str) -> str:
    """The top-level part of ``tracekit`` a module belongs to (``tracekit`` itself: __init__)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _family(module: str) -> str | None:
    """The parser family (``kineto``, ``msprof`` …) of a module below tracekit.parsers."""
    parts = module.split(".")
    if len(parts) > 2 and parts[1] == "parsers" and f"tracekit.parsers.{parts[2]}" in KNOWN:
        is_package = (PACKAGE / "parsers" / parts[2]).is_dir()
        return parts[2] if is_package else None
    return None


def _violations(me: str, imports: list[tuple[str, int]]) -> list[str]:
    """What is wrong with module ``me`` importing ``imports`` ((module, line) pairs)."""
    mine, family = _part(me), _family(me)
    if mine not in LAYER_OF:
        return [f"{me}: part '{mine}' is in no layer of docs/architecture.md"]
    problems = []
    for target, line in imports:
        if target not in KNOWN or target == "tracekit":
            continue  # a name from a module (listed with the module), or __version__
        theirs, their_family = _part(target), _family(target)
        if theirs != mine and LAYER_OF.get(theirs, len(LAYERS)) >= LAYER_OF[mine]:
            problems.append(f"line {line}: {me} imports {target}, a part at or above its layer")
        if family and their_family and family != their_family:
            problems.append(f"line {line}: parser family {family} imports {target}")
        outside = not me.startswith("tracekit.rules.")
        if target.startswith("tracekit.rules.") and target not in RULE_SHARED and outside:
            problems.append(f"line {line}: {me} imports the rule module {target}")
    return problems


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_go_down_the_layers(path: Path) -> None:
    assert _violations(_module_name(path), _imports(path)) == []


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_is_too_long(path: Path) -> None:
    lines = len(path.read_text().splitlines())
    assert lines <= MAX_LINES, f"{path}: {lines} lines; split it by job"


def test_the_checker_sees_each_kind_of_wrong_import() -> None:
    """Not blind: an upward import, a parser family reaching into another, a rule imported
    from outside the rules."""
    assert _violations("tracekit.timeline", [("tracekit.analysis", 3)]) == [
        "line 3: tracekit.timeline imports tracekit.analysis, a part at or above its layer"
    ]
    assert _violations("tracekit.parsers.msprof", [("tracekit.parsers.kineto", 5)]) == [
        "line 5: parser family msprof imports tracekit.parsers.kineto"
    ]
    assert _violations("tracekit.parsers.msprof", [("tracekit.parsers.io", 5)]) == []
    rule = "tracekit.rules.overlap"
    assert _violations("tracekit.reports", [(rule, 7)]) == [
        f"line 7: tracekit.reports imports the rule module {rule}"
    ]
    assert _violations("tracekit.rules.registry", [(rule, 7)]) == []
