"""MkDocs hook: the reference pages generated from the code, never written twice.

``on_files`` adds ``reference/cli.md`` (every command of the typer app: usage, help, each
argument and option with its type, default and environment variable, the example line),
``reference/rules.md`` (every registered rule, plugins included: its docstring and options)
and ``reference/schema.md`` (the timeline's columns, kinds and metadata from
:mod:`tracekit.timeline` and :mod:`tracekit.taxonomy`). The page builders are plain functions
(``cli_page``, ``rules_page``, ``schema_page``) that tests import by path. mkdocs.yml names
this file under ``hooks:``; the hook also keeps ``docs/hooks/`` out of the built site.
"""

from __future__ import annotations

import re
from typing import Any

CLI_PAGE = "reference/cli.md"
RULES_PAGE = "reference/rules.md"
SCHEMA_PAGE = "reference/schema.md"
_ROLE = re.compile(r":(?:mod|func|class|meth|attr|data|obj):`~?([^`]+)`")
_CODE = re.compile(r"(``?[^`]+``?)")

# What each column and metadata key means: the names and types come from the code; a test
# holds these tables to exactly the columns of tracekit.timeline.SCHEMA and the keys of
# tracekit.timeline.empty_meta(), so a new column cannot go undocumented.
COLUMN_MEANING = {
    "ts": "start, ns since the trace origin (metadata `origin_ns` gives the absolute epoch "
    "when known)",
    "dur": "duration in ns, ≥ 0 (instant markers have 0)",
    "kind": "what the row is: one of the kinds below",
    "name": "the name as the profiler recorded it (demangled where the profiler gives it)",
    "device": "device index; -1 for host rows",
    "stream": "device stream / HIP queue / Ascend stream; null for host rows",
    "rank": "distributed rank (0 when the trace says nothing)",
    "pid": "host process of host rows",
    "tid": "host thread of host rows",
    "corr": "correlation id linking a host launch to its device work (scoped to its process)",
    "engine": "the unit that ran it: `sm`, `copy`, `aic`, `aiv`, `mix`, `ai_cpu`, `dsa`, "
    "`sdma`, `comm` …",
    "args": "JSON of the source-specific fields worth keeping (grid, bytes, op type, shapes …)",
}
KIND_MEANING = {
    "kernel": "a compute kernel on a device",
    "memcpy": "a memory copy",
    "memset": "a memory fill",
    "comm": "a collective or point-to-point communication (or one task of one)",
    "sync": "a device-side synchronisation",
    "api": "a host runtime or driver call (launch, synchronize, malloc …)",
    "range": "an NVTX / roctx / mstx / user annotation range, or a step",
    "op": "a framework operator (aten::mm, an Ascend op …)",
    "marker": "an instant mark",
}
META_MEANING = {
    "format": "the reader that read it (`tracekit formats`)",
    "producer": "the profiler that wrote it: tool and version",
    "source": "the file name read",
    "origin_ns": "absolute epoch ns of `ts` = 0, when the trace gives it",
    "devices": "the devices: index, name, vendor, cores, memory",
    "ranks": "the ranks present",
    "schema_version": "the version of this schema",
    "warnings": "what the reader had to guess or drop",
}


def md_text(text: str) -> str:
    """Docstring text as Markdown: Sphinx roles become code, ``<``, ``>`` and ``&`` outside
    code are escaped."""
    text = _ROLE.sub(lambda m: f"`{m[1]}`", text)
    parts = _CODE.split(text)
    for i in range(0, len(parts), 2):  # the odd parts are code spans
        parts[i] = parts[i].replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return "".join(parts)


def cell(text: Any) -> str:
    """One Markdown table cell: one line, pipes escaped."""
    return md_text(" ".join(str(text).split())).replace("|", "\\|")


def _importable() -> None:
    """Make the checkout's tracekit importable when it is not installed (``mkdocs`` run from
    a clone before ``pip install -e``)."""
    import importlib.util
    import sys
    from pathlib import Path

    if importlib.util.find_spec("tracekit") is None:
        sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def _command():
    """The click command of the typer app (imported here: the hook loads without tracekit)."""
    import typer.main

    from tracekit.cli import app

    return typer.main.get_command(app)


def _type(param: Any, ctx: Any) -> str:
    """The type shown for ``param``: typer's label where it has one, else click's name."""
    if getattr(param, "is_flag", False):
        return "flag"
    try:
        label = param.display_type(ctx).strip("<>")
    except (AttributeError, TypeError):
        label = getattr(getattr(param, "type", None), "name", "") or "text"
    label = re.sub(r"^list\[(.*)\]$", r"\1", label.removesuffix(" range"))
    label = {"str": "text", "string": "text", "Path": "path", "integer": "int"}.get(label, label)
    bounds = [f"≥ {param.min}" if getattr(param, "min", None) is not None else ""]
    bounds.append(f"≤ {param.max}" if getattr(param, "max", None) is not None else "")
    bounds = [b for b in bounds if b]
    plural = " (repeatable)" if getattr(param, "multiple", False) else ""
    return " ".join([label, *bounds]) + plural


def _default(param: Any) -> str:
    """The default of ``param`` as shown: required, a flag's spelling, or the value."""
    if getattr(param, "required", False):
        return "required"
    value = param.default
    if getattr(param, "is_flag", False) and getattr(param, "secondary_opts", None):
        return f"`{(param.opts if value else param.secondary_opts)[0]}`"
    if getattr(param, "is_flag", False):
        return "off" if not value else "on"
    if value is None or value == () or value == []:
        return "—"
    return f"`{value}`"


def _names(param: Any) -> str:
    if getattr(param, "param_type_name", "") == "argument":
        return f"`{param.name.upper()}`"
    names = [*param.opts, *getattr(param, "secondary_opts", [])]
    return ", ".join(f"`{n}`" for n in names)


def _usage(command: Any) -> str:
    """``[OPTIONS]`` and the arguments, or ``COMMAND [ARGS]...`` for a group."""
    if hasattr(command, "commands"):
        return "[OPTIONS] COMMAND [ARGS]..."
    pieces = ["[OPTIONS]"]
    for param in command.params:
        if getattr(param, "param_type_name", "") == "argument":
            name = param.name.upper() + ("..." if param.nargs == -1 else "")
            pieces.append(name if param.required else f"[{name}]")
    return " ".join(pieces)


def example_of(command: Any) -> str | None:
    """The command line after ``Example:`` in a command's epilog (or help), or None."""
    for text in (command.epilog or "", command.help or ""):
        match = re.search(r"Example:\s*(.+)", text)
        if match:
            return match[1].strip().strip("`")
    return None


def _section(command: Any, ctx: Any, level: str) -> list[str]:
    """The reference of one command: usage, help, example, its parameters."""
    from textwrap import dedent

    usage = _usage(command)
    help_text = re.sub(r"\s*Example:.*", "", dedent(command.help or ""), flags=re.S).strip()
    out = [f"{level} `{ctx.command_path}`", "", md_text(help_text), ""]
    out += ["```text", f"Usage: {ctx.command_path} {usage}", "```", ""]
    example = example_of(command)
    if example:
        out += ["Example:", "", "```sh", example, "```", ""]
    rows = [p for p in command.params if not getattr(p, "hidden", False)]
    if rows:
        out += ["| argument / option | type | default | env var | what it does |"]
        out += ["|---|---|---|---|---|"]
        for p in rows:
            envvar = p.envvar if isinstance(p.envvar, str) else ", ".join(p.envvar or ())
            cells = [_names(p), cell(_type(p, ctx)), _default(p), envvar and f"`{envvar}`"]
            out.append("| " + " | ".join([*cells, cell(p.help or "")]) + " |")
        out.append("")
    return out


def cli_page() -> str:
    """``reference/cli.md``: the global options, then every command and sub-command."""
    root = _command()
    ctx = root.context_class(root, info_name="tracekit")
    out = ["# Command line", "", "Generated from the typer app (`tracekit.cli.app`).", ""]
    out += _section(root, ctx, "##")
    pending = [(ctx, root)]
    while pending:
        parent_ctx, group = pending.pop(0)
        for name in group.list_commands(parent_ctx):
            command = group.commands[name]
            if getattr(command, "hidden", False):
                continue
            sub = command.context_class(command, info_name=name, parent=parent_ctx)
            out += _section(command, sub, "##")
            if hasattr(command, "commands"):
                pending.append((sub, command))
    return "\n".join(out).rstrip() + "\n"


def rules_page(rules: dict[str, Any] | None = None) -> str:
    """``reference/rules.md``: every rule of the registry (or ``rules``), built-in and
    plugins, with its documentation and options."""
    if rules is None:
        from tracekit.rules.registry import available

        rules = available()
    out = ["# Rules", "", "Generated from the rule registry (`tracekit.rules.registry`): "]
    out[-1] += f"{len(rules)} rules. Select some with `--rules`, set an option with "
    out[-1] += "`-O RULE.KEY=VALUE`."
    out.append("")
    from tracekit.rules.registry import describe

    for rule_id, rule in rules.items():
        doc = describe(rule)
        out += [f"## `{rule_id}`: {md_text(doc['name'])} {{#{rule_id}}}", ""]
        out += [md_text(doc["doc"]), ""]
        if doc["options"]:
            out += ["| option | default | what it sets |", "|---|---|---|"]
            for key, option in doc["options"].items():
                out.append(
                    f"| `{rule_id}.{key}` | `{option['default']!r}` | {cell(option['help'])} |"
                )
            out.append("")
    return "\n".join(out).rstrip() + "\n"


def schema_page() -> str:
    """``reference/schema.md``: columns, kinds and metadata of the timeline."""
    from tracekit import taxonomy, timeline

    out = ["# Timeline schema", "", "Generated from `tracekit.timeline` (schema version "]
    out[-1] += f"{timeline.SCHEMA_VERSION}). One row per event; times are integer ns. "
    out[-1] += "Every reader ends in this table; everything downstream reads only it."
    out += ["", "## Columns", "", "| column | Arrow type | null | meaning |", "|---|---|---|---|"]
    for field in timeline.SCHEMA:
        null = "yes" if field.nullable else "never"
        meaning = cell(COLUMN_MEANING.get(field.name, ""))
        kind = field.type
        arrow = f"dictionary<{kind.value_type}>" if hasattr(kind, "value_type") else str(kind)
        out.append(f"| `{field.name}` | `{arrow}` | {null} | {meaning} |")
    out += ["", "## Kinds", "", "| kind | device row | busy time | meaning |", "|---|---|---|---|"]
    for kind in timeline.KINDS:
        device = "yes" if kind in timeline.DEVICE_KINDS else ""
        busy = "yes" if kind in timeline.WORK_KINDS else ""
        out.append(f"| `{kind}` | {device} | {busy} | {cell(KIND_MEANING.get(kind, ''))} |")
    out += ["", f"A `comm` row naming another in `args` under `{timeline.PART_OF}` is one task "]
    out[-1] += "of that operator: interval unions keep it, sums of time leave it out."
    out += ["", "## Derived columns", "", "Added by the taxonomy and the steps, not by readers:"]
    out += [", ".join(f"`{c}`" for c in (*taxonomy.FLAG_COLUMNS, "step")) + ".", ""]
    out += ["Categories: " + ", ".join(f"`{c}`" for c in taxonomy.CATEGORIES) + ".", ""]
    out += ["## Metadata", "", f"JSON under the key `{timeline.META_KEY.decode()}` of the Arrow "]
    out[-1] += "schema metadata; every timeline has these keys (readers may add more):"
    out += ["", "| key | empty value | meaning |", "|---|---|---|"]
    for key, value in timeline.empty_meta().items():
        out.append(f"| `{key}` | `{value!r}` | {cell(META_MEANING.get(key, ''))} |")
    return "\n".join(out) + "\n"


PAGES = {CLI_PAGE: cli_page, RULES_PAGE: rules_page, SCHEMA_PAGE: schema_page}


def on_files(files: Any, config: Any) -> Any:
    """Add the generated reference pages; keep this hook's folder out of the site."""
    from mkdocs.structure.files import File

    _importable()
    for file in list(files):
        if file.src_uri.startswith("hooks/"):
            files.remove(file)
    for uri, build in PAGES.items():
        files.append(File.generated(config, uri, content=build()))
    return files
