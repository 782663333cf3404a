"""Which Ascend profiler output a path names, and the files of each rank in it.

Accepted (MANIFEST appendix A):

* a torch_npu ``*_ascend_pt`` / MindSpore ``*_ascend_ms`` folder, or its
  ``ASCEND_PROFILER_OUTPUT`` (text: ``trace_view.json``, ``kernel_details.csv``,
  ``step_trace_time.csv`` …; db: ``ascend_pytorch_profiler_N.db``), rank from
  ``profiler_info_N.json``, chip from a ``PROF_*/device_N/info.json.N`` inside when present;
* a ``PROF_*`` folder of the msprof command line: current layout (``mindstudio_profiler_output``
  with ``msprof_*.json``, ``op_summary_*.csv``, ``task_time_*.csv``, ``*_slice_N`` pieces, or
  ``msprof_*.db``) or the older per-device ``device_N/timeline/*.json`` (device-monotonic µs,
  converted through ``start_info.N``);
* one file: a timeline JSON, an op_summary / kernel_details / task_time CSV (read with the
  Ascend files beside it), a ``msprof_*.db`` / ``ascend_pytorch_profiler*.db``;
* a folder holding several of these (ranks, or one PROF_ per device): one source each.

A PROF_ folder whose ``device_N`` lacks the ``.done`` markers msprof writes last is refused as
half-written; MindSpore 1.x output (``ascend_timeline_display_*.json`` …) as unsupported.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from tracekit.errors import TraceError
from tracekit.parsers.io import GZIP_MAGIC, SQLITE_MAGIC, inflate_head
from tracekit.parsers.msprof.csv_tables import csv_role, read_header
from tracekit.parsers.msprof.device_index import MEMORY_CSVS

OUTPUT = "ASCEND_PROFILER_OUTPUT"
MS_OUTPUT = "mindstudio_profiler_output"
TIMELINE_JSON = re.compile(r"^(trace_view|msprof(_\d+)*(_slice_\d+)?(_\d+)*)\.json(\.gz)?$")
_LEGACY_JSON = re.compile(r"^(msprof|task_time|hccl|step_trace)_(\d+)_(\d+)_(\d+)\.json$")
_DEVICE_DIR = re.compile(r"^device_(\d+)$")
_RANK_NAME = re.compile(r"rank[-_]?(\d+)", re.IGNORECASE)
_MS1X = re.compile(
    r"^(ascend_timeline_display_\d+\.json|aicore_intermediate_\d+_detail\.csv|"
    r"framework_raw_\d+\.csv|output_timeline_data_\d+\.txt)$"
)
JSON_MARKERS = (
    b'"Ascend Hardware"',
    b'"AscendCL@',
    b'"HostToDevice',
    b'"torch_to_npu"',
    b'"async_npu"',
    b'"Physic Stream Id"',
    b'"Overlap Analysis"',
    b'"Task Type"',
)
DB_TABLES = ("TASK", "STRING_IDS")
TOP = 4  # folder levels searched below the path given


@dataclass
class Source:
    """The files of one rank (or one device of an msprof run)."""

    root: Path
    kind: str  # "text" | "db" | "legacy"
    timeline: list[Path] = field(default_factory=list)
    op_details: list[Path] = field(default_factory=list)
    task_time: list[Path] = field(default_factory=list)
    step_trace: list[Path] = field(default_factory=list)
    op_statistic: list[Path] = field(default_factory=list)
    memory: list[Path] = field(default_factory=list)  # torch_npu memory CSVs (NPU:<device>)
    db: Path | None = None
    info: list[Path] = field(default_factory=list)
    start_info: dict[int, Path] = field(default_factory=dict)
    profiler_info: Path | None = None
    rank: int | None = None
    device: int | None = None
    warnings: list[str] = field(default_factory=list)

    @property
    def files(self) -> list[Path]:
        paths = [*self.timeline, *self.op_details, *self.task_time, *self.step_trace]
        return paths + ([self.db] if self.db else [])


def is_sqlite(path: Path) -> bool:
    try:
        with path.open("rb") as fh:
            return fh.read(16) == SQLITE_MAGIC
    except OSError:
        return False


def json_is_ascend(path: Path, limit: int = 4 << 20) -> bool:
    """A JSON trace with Ascend layers (known name, or an Ascend marker in its first MBs)."""
    try:
        with path.open("rb") as fh:
            head = fh.read(limit)
    except OSError:
        return False
    if head.startswith(GZIP_MAGIC):
        head = inflate_head(head, limit)  # empty when it is not valid gzip
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if text[:1] not in (b"[", b"{"):
        return False
    return any(marker in text for marker in JSON_MARKERS)


def _csvs(folder: Path) -> dict[str, list[Path]]:
    roles: dict[str, list[Path]] = {}
    for path in sorted(folder.glob("*.csv")):
        role = csv_role(read_header(path))
        if role is None and path.stat().st_size == 0 and _known_csv(path.name):
            role = _known_csv(path.name)
        if role:
            roles.setdefault(role, []).append(path)
    return roles


def _known_csv(name: str) -> str | None:
    if name.startswith(("kernel_details", "op_summary")):
        return "op"
    if name.startswith("task_time"):
        return "task_time"
    if name.startswith("step_trace_time"):
        return "step_trace"
    return None


def _text_source(folder: Path, root: Path) -> Source | None:
    """The text files of an ASCEND_PROFILER_OUTPUT / mindstudio_profiler_output folder."""
    timeline = [p for p in sorted(folder.iterdir()) if p.is_file() and TIMELINE_JSON.match(p.name)]
    roles = _csvs(folder)
    if not timeline and not roles.get("op") and not roles.get("task_time"):
        return None
    return Source(
        root,
        "text",
        timeline=timeline,
        op_details=roles.get("op", []),
        task_time=roles.get("task_time", []),
        step_trace=roles.get("step_trace", []),
        op_statistic=roles.get("op_statistic", []),
        memory=[p for p in (folder / n for n in MEMORY_CSVS) if p.is_file()],
    )


def _db_in(folder: Path) -> Path | None:
    for pattern in ("ascend_pytorch_profiler*.db", "msprof_*.db", "msprof.db"):
        found = [p for p in sorted(folder.glob(pattern)) if p.is_file() and is_sqlite(p)]
        if found:
            return found[0]
    return None


def _rank_of(folder: Path) -> int | None:
    for info in sorted(folder.glob("profiler_info*.json")):
        try:
            rank = json.loads(info.read_text(errors="replace")).get("rank_id")
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(rank, int) and rank >= 0:
            return rank
    return None


def _device_infos(folder: Path, source: Source) -> None:
    """info.json / start_info files of the device_N (and host) folders under ``folder``."""
    for device_dir in sorted(folder.glob("device_*")):
        match = _DEVICE_DIR.match(device_dir.name)
        if not match or not device_dir.is_dir():
            continue
        device = int(match.group(1))
        source.info += sorted(device_dir.glob("info.json*[0-9]"))
        starts = sorted(device_dir.glob("start_info*[0-9]"))
        if starts:
            source.start_info[device] = starts[0]
        if source.device is None:
            source.device = device
    host = folder / "host"
    if host.is_dir():
        source.info += sorted(p for p in host.glob("info.json*") if not p.name.endswith(".done"))


def _check_done(device_dir: Path) -> None:
    for stem in ("info.json", "start_info"):
        for path in sorted(device_dir.glob(f"{stem}.*[0-9]")):
            if not Path(f"{path}.done").exists():
                raise TraceError(
                    f"{device_dir}: half-written msprof output ({path.name} has no .done marker);"
                    " wait until msprof has finished, or collect again"
                )


def _legacy_source(prof: Path) -> list[Source]:
    sources = []
    for device_dir in sorted(prof.glob("device_*")):
        match = _DEVICE_DIR.match(device_dir.name)
        timeline = device_dir / "timeline"
        if not match or not timeline.is_dir():
            continue
        _check_done(device_dir)
        files = sorted(p for p in timeline.iterdir() if _LEGACY_JSON.match(p.name))
        main = [p for p in files if p.name.startswith("msprof_")]
        if not main:  # no merged timeline: the per-layer files hold the same events
            main = [p for p in files if not p.name.startswith("msprof_")]
        device = int(match.group(1))
        source = Source(prof, "legacy", timeline=main, device=device)
        _device_infos(prof, source)
        source.device = device
        source.info = [p for p in source.info if p.parent.name in (device_dir.name, "host")]
        sources.append(source)
    return sources


def _prof(prof: Path) -> list[Source]:
    """Sources of one PROF_* folder."""
    output = prof / MS_OUTPUT
    source = _text_source(output, prof) if output.is_dir() else None
    if source is None:
        db = _db_in(prof)
        if db is not None:
            source = Source(prof, "db", db=db)
    if source is not None:
        for device_dir in prof.glob("device_*"):
            if device_dir.is_dir():
                _check_done(device_dir)
        _device_infos(prof, source)
        return [source]
    legacy = _legacy_source(prof)
    if legacy:
        return legacy
    raw = [d for d in (*prof.glob("device_*"), prof / "host") if (d / "data").is_dir()]
    if raw:
        for device_dir in raw:
            _check_done(device_dir)
        raise TraceError(
            f"{prof}: msprof raw data that was never exported; run"
            f" `msprof --export=on --output={prof}` first"
        )
    if output.is_dir():
        raise TraceError(
            f"{output}: holds no op_summary, task_time or msprof_*.json output;"
            " the export was cut short, export again"
        )
    return []


def _torch(rank_dir: Path, output: Path) -> list[Source]:
    db = _db_in(output)
    source = _text_source(output, rank_dir)
    if source is None and db is not None:
        source = Source(rank_dir, "db", db=db)
    if source is None:
        return []
    source.rank = _rank_of(rank_dir)
    infos = sorted(rank_dir.glob("profiler_info*.json"))
    source.profiler_info = infos[0] if infos else None
    for prof in sorted(rank_dir.glob("PROF_*")):
        if prof.is_dir():
            _device_infos(prof, source)
    return [source]


def ms1x(folder: Path) -> bool:
    """A MindSpore 1.x profiler folder (ascend_timeline_display_*.json …)."""
    try:
        return any(_MS1X.match(p.name) for p in folder.iterdir())
    except OSError:
        return False


def _folder(folder: Path, depth: int) -> list[Source]:
    if folder.name == OUTPUT:
        return _torch(folder.parent, folder)
    if (folder / OUTPUT).is_dir():
        return _torch(folder, folder / OUTPUT)
    if folder.name.startswith("PROF_") and not folder.name.startswith("PROF_GROUP"):
        return _prof(folder)
    if folder.name == MS_OUTPUT:
        return _prof(folder.parent) if folder.parent.name.startswith("PROF_") else _one(folder)
    if _DEVICE_DIR.match(folder.name) and (folder / "timeline").is_dir():
        return [s for s in _legacy_source(folder.parent) if s.device == int(folder.name[7:])]
    if folder.name == "timeline" and _DEVICE_DIR.match(folder.parent.name):
        return _folder(folder.parent, depth)
    if ms1x(folder):
        if depth < TOP:  # inside a larger folder: leave it out, the others still load
            _SKIPPED.append(folder)
            return []
        raise _unsupported(folder)
    own = _one(folder)
    if own or depth <= 0:
        return own
    sources: list[Source] = []
    for child in sorted(p for p in folder.iterdir() if p.is_dir()):
        sources += _folder(child, depth - 1)
    return sources


def _one(folder: Path) -> list[Source]:
    """Loose Ascend files in a folder of another name (a copied output folder)."""
    source = _text_source(folder, folder)
    if source is None:
        db = _db_in(folder)
        source = Source(folder, "db", db=db) if db else None
    if source is None:
        return []
    source.rank = _rank_of(folder) if source.rank is None else source.rank
    return [source]


def _unsupported(folder: Path) -> TraceError:
    return TraceError(
        f"{folder}: MindSpore 1.x profiler output is an unsupported layout; profile again"
        " with MindSpore >= 2.3 (which writes *_ascend_ms/ASCEND_PROFILER_OUTPUT)"
    )


_SKIPPED: list[Path] = []


def discover(path: Path) -> list[Source]:
    """The sources a path names (several for a folder of ranks); TraceError when none."""
    if path.is_file():
        return [_file_source(path)]
    _SKIPPED.clear()
    sources = _folder(path, depth=TOP)
    if not sources and _SKIPPED:
        raise _unsupported(_SKIPPED[0])
    if not sources:
        raise TraceError(
            f"{path}: no Ascend profiler output here (no ASCEND_PROFILER_OUTPUT, PROF_*, "
            "trace_view.json, op_summary/kernel_details CSV or msprof db); pass the folder "
            "torch_npu or msprof wrote"
        )
    for source in sources:
        if source.rank is None:
            match = _RANK_NAME.search(source.root.name)
            source.rank = int(match.group(1)) if match else None
    return sources


def _file_source(path: Path) -> Source:
    if is_sqlite(path):
        return Source(path, "db", db=path, rank=_rank_of(path.parent.parent))
    if _LEGACY_JSON.match(path.name) and path.parent.name == "timeline":
        device_dir = path.parent.parent
        source = Source(
            device_dir.parent,
            "legacy",
            timeline=[path],
            device=int(_LEGACY_JSON.match(path.name).group(2)),
        )
        _device_infos(device_dir.parent, source)
        return source
    if path.suffix.lower() == ".csv" or path.name.lower().endswith(".csv"):
        role = csv_role(read_header(path)) or _known_csv(path.name)
        if role is None:
            raise TraceError(f"{path}: not an Ascend op_summary, kernel_details or task_time CSV")
        source = Source(path, "text")
        {"op": source.op_details, "task_time": source.task_time, "step_trace": source.step_trace}[
            role
        ].append(path)
    else:
        source = Source(path, "text", timeline=[path])
    if path.parent.name in (OUTPUT, MS_OUTPUT):
        siblings = _text_source(path.parent, path)
        if siblings is not None:  # the other tables of the same export enrich the file
            own = set(source.files)
            source.op_details = source.op_details or [
                p for p in siblings.op_details if p not in own
            ]
            source.step_trace = source.step_trace or siblings.step_trace
            source.memory = siblings.memory
            if path in siblings.timeline or path in siblings.op_details:
                source.timeline = source.timeline or siblings.timeline
                source.task_time = source.task_time or siblings.task_time
        rank_dir = path.parent.parent
        source.rank = _rank_of(rank_dir)
        infos = sorted(rank_dir.glob("profiler_info*.json"))
        source.profiler_info = infos[0] if infos else None
    return source
