"""Finding the files of one rocprofv3 CSV run and telling what each holds.

rocprofv3 writes one CSV per domain, all named ``<prefix>_<stem>.csv`` (``decode_kernel_trace.csv``,
``decode_hip_api_trace.csv``, ``decode_agent_info.csv`` …; the default prefix is the process id).
A file's role is decided by its header (first line), so a renamed file still reads; the name
only groups siblings by prefix.

A folder that holds several prefixes (several runs or processes) loads one of them: the one
with the largest kernel trace (ties: the largest set of trace files, then the first name). The
others are named in a warning; pass one of their files to load that run instead.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from tracekit.errors import TraceError
from tracekit.parsers.rocprof.csv_header import read_header

# role -> columns that must be present to read it
REQUIRED: dict[str, tuple[str, ...]] = {
    "kernel": ("Agent_Id", "Queue_Id", "Kernel_Name", "Start_Timestamp", "End_Timestamp"),
    "api": ("Domain", "Function", "Start_Timestamp", "End_Timestamp"),
    "memcpy": (
        "Direction",
        "Source_Agent_Id",
        "Destination_Agent_Id",
        "Start_Timestamp",
        "End_Timestamp",
    ),
    "alloc": ("Operation", "Start_Timestamp", "End_Timestamp"),
    "scratch": ("Operation", "Start_Timestamp", "End_Timestamp"),
    "agent_info": ("Node_Id", "Agent_Type"),
}
TRACE_ROLES = ("kernel", "api", "memcpy", "alloc", "scratch")
LABELS = {
    "kernel": "kernel trace",
    "api": "API trace",
    "memcpy": "memory copy trace",
    "alloc": "memory allocation trace",
    "scratch": "scratch memory trace",
    "agent_info": "agent info",
}

# file-name stems rocprofv3 writes (and the names its documentation uses) -> expected role
_STEMS = {
    "kernel_trace": "kernel",
    "memory_copy_trace": "memcpy",
    "memory_allocation_trace": "alloc",
    "memory_allocation": "alloc",
    "scratch_memory_trace": "scratch",
    "agent_info": "agent_info",
    **{
        s: "api"
        for s in (
            "hip_api_trace",
            "hsa_api_trace",
            "marker_api_trace",
            "rccl_api_trace",
            "rocdecode_api_trace",
            "rocjpeg_api_trace",
            "hip_trace",
            "hip_runtime_trace",
            "hip_compile_trace",
            "hip_compiler_trace",
            "hsa_trace",
            "hsa_core_api_trace",
            "hsa_amd_ext_api_trace",
            "marker_trace",
            "rccl_trace",
            "ompt_trace",
        )
    },
    **{
        s: "other"
        for s in ("counter_collection", "pc_sampling_host_trap", "pc_sampling_stochastic")
    },
}
_STEM_RE = re.compile(
    r"^(?:(?P<prefix>.*?)_)?(?P<stem>"
    + "|".join(sorted(map(re.escape, _STEMS), key=len, reverse=True))
    + r")\.csv$"
)


def split_name(name: str) -> tuple[str, str] | None:
    """``(prefix, stem)`` of a rocprofv3 output file name, or None for other names."""
    match = _STEM_RE.match(name)
    if not match:
        return None
    return match.group("prefix") or "", match.group("stem")


def role_of_header(columns: list[str]) -> str | None:
    """The role a header announces, or None when it is no rocprofv3 CSV tracekit reads."""
    cols = set(columns)
    if "Counter_Name" in cols or "Sample_Timestamp" in cols or "TotalDurationNs" in cols:
        return None  # counter collection, PC sampling, statistics: not timeline rows
    if {"Kernel_Name", "Queue_Id"} <= cols:
        return "kernel"
    if {"Direction", "Source_Agent_Id"} <= cols:
        return "memcpy"
    if {"Domain", "Function"} <= cols:
        return "api"
    if "Allocation_Size" in cols or {"Operation", "Address"} <= cols:
        return "alloc"
    if "Alloc_Flags" in cols:
        return "scratch"
    if {"Node_Id", "Agent_Type"} <= cols:
        return "agent_info"
    return None


def check_columns(path: Path, role: str, columns: list[str]) -> None:
    """Raise one TraceError line naming the file and the required columns it lacks."""
    missing = [c for c in REQUIRED[role] if c not in columns]
    if missing:
        raise TraceError(
            f"{path}: rocprofv3 {LABELS[role]} lacks column(s) {', '.join(missing)}"
            f" (header has {len(columns)} columns); pass the CSV as rocprofv3 wrote it"
        )


@dataclass
class CsvSet:
    """The files of one run: role -> paths, plus what was skipped."""

    prefix: str
    files: dict[str, list[Path]] = field(default_factory=dict)
    ignored: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def trace_files(self) -> list[Path]:
        return [p for role in TRACE_ROLES for p in self.files.get(role, [])]


def _role_of_file(path: Path, stem_role: str | None) -> str | None:
    """Header role of a file, or the stem's role when the header is broken (checked later)."""
    role = role_of_header(read_header(path))
    if role is None and stem_role in REQUIRED:
        return stem_role  # a named file that is empty or damaged: the reader says which
    return role


def _collect(prefix: str, members: list[tuple[Path, str]]) -> CsvSet:
    found = CsvSet(prefix)
    for path, stem in sorted(members):
        role = _role_of_file(path, _STEMS.get(stem))
        if role is None:
            found.ignored.append(path.name)
        else:
            found.files.setdefault(role, []).append(path)
    return found


def _groups(folder: Path) -> dict[str, list[tuple[Path, str]]]:
    groups: dict[str, list[tuple[Path, str]]] = {}
    for path in folder.iterdir():
        parts = split_name(path.name) if path.is_file() else None
        if parts:
            groups.setdefault(parts[0], []).append((path, parts[1]))
    return groups


def _rank(members: list[tuple[Path, str]]) -> tuple[int, int]:
    kernel = sum(p.stat().st_size for p, s in members if _STEMS[s] == "kernel")
    traces = sum(p.stat().st_size for p, s in members if _STEMS[s] in TRACE_ROLES)
    return kernel, traces


def discover(path: Path) -> CsvSet:
    """The CSV set a path names: a folder (one prefix chosen) or one file and its siblings."""
    if path.is_dir():
        groups = {
            k: v
            for k, v in _groups(path).items()
            if any(_STEMS[s] in (*TRACE_ROLES, "agent_info") for _, s in v)
        }
        if not groups:
            raise TraceError(f"{path}: folder holds no rocprofv3 CSV files (*_kernel_trace.csv …)")
        order = sorted(groups, key=lambda k: (-_rank(groups[k])[0], -_rank(groups[k])[1], k))
        chosen = _collect(order[0], groups[order[0]])
        if len(order) > 1:
            others = ", ".join(f"'{k}'" for k in order[1:])
            chosen.warnings.append(
                f"folder holds {len(order)} runs (file prefixes); loaded '{order[0]}' (largest"
                f" kernel trace), not {others}; pass one of their files to load another"
            )
        return chosen
    parts = split_name(path.name)
    if parts is None:  # a renamed or regenerated file (rocpd-to-csv.csv …): read it alone
        role = role_of_header(read_header(path))
        found = CsvSet(path.stem)
        if role is not None:
            found.files[role] = [path]
        return found
    members = _groups(path.parent).get(parts[0], [(path, parts[1])])
    return _collect(parts[0], members)


def sniff_csv_path(path: Path, head: bytes) -> bool:
    """True for a rocprofv3 CSV (header decides), or a folder holding one."""
    if path.is_dir():
        try:
            return any(
                role_of_header(read_header(p)) in (*TRACE_ROLES, "agent_info")
                for p in sorted(path.iterdir())
                if p.is_file() and split_name(p.name)
            )
        except OSError:
            return False
    if not path.name.lower().endswith(".csv") and b"_Timestamp" not in head[:2048]:
        return False
    columns = read_header(path, head)
    if role_of_header(columns) is not None:
        return True
    parts = split_name(path.name)  # a damaged header of a named file: claim it to say why
    role = _STEMS.get(parts[1]) if parts else None
    return role in REQUIRED and len(set(columns) & set(REQUIRED[role])) >= 2
