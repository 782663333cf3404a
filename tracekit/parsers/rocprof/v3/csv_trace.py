"""rocprofv3 ``--output-format csv``: kernel, memory copy / allocation, scratch memory and
API (HIP, HSA, marker/roctx, RCCL, rocDecode, rocJPEG) traces of one run, read with polars.

Both quoting styles read the same (rocprofv3 quotes only text; re-written files quote every
field); the ``Guid`` column of CSVs regenerated from rocpd is ignored; older output without
``Stream_Id`` / ``Thread_Id`` / ``Dispatch_Id`` reads with those fields left out. The run's
``--stats`` files (``<prefix>_kernel_stats.csv`` …) become ``meta["summaries"]``
(:mod:`tracekit.parsers.rocprof.stats`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from tracekit.errors import TraceError
from tracekit.parsers.assemble import Part
from tracekit.parsers.base import Progress, cut_short_warning
from tracekit.parsers.csv_cut import csv_end
from tracekit.parsers.name_pool import NamePool
from tracekit.parsers.probe import Probe
from tracekit.parsers.rocprof import sdk
from tracekit.parsers.rocprof.args import INT, STR, Field, blank_as_null, json_args
from tracekit.parsers.rocprof.csv_header import read_header
from tracekit.parsers.rocprof.meta import skeleton
from tracekit.parsers.rocprof.stats import v3_summaries
from tracekit.parsers.rocprof.table import durations, events_table, used_devices
from tracekit.parsers.rocprof.v3.agents import AgentTable, read_agent_info
from tracekit.parsers.rocprof.v3.files import (
    LABELS,
    CsvSet,
    check_columns,
    discover,
    sniff_csv_path,
)
from tracekit.timeline import Timeline

# numeric columns read as Int64; every other column (and any unknown one) is text
_INT = {
    "Queue_Id",
    "Stream_Id",
    "Thread_Id",
    "Process_Id",
    "Dispatch_Id",
    "Kernel_Id",
    "Correlation_Id",
    "Start_Timestamp",
    "End_Timestamp",
    "LDS_Block_Size",
    "Scratch_Size",
    "VGPR_Count",
    "Accum_VGPR_Count",
    "SGPR_Count",
    "Workgroup_Size_X",
    "Workgroup_Size_Y",
    "Workgroup_Size_Z",
    "Grid_Size_X",
    "Grid_Size_Y",
    "Grid_Size_Z",
    "Workgroup_Size",
    "Grid_Size",
    "Allocation_Size",
    "Bytes",
    "Size",
    "Copy_Size",
}
# kernel args; grid sizes last: they vary most (see args.json_args's split)
_KERNEL_ARGS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("block", ("Workgroup_Size_X", "Workgroup_Size_Y", "Workgroup_Size_Z")),
    ("block", ("Workgroup_Size",)),
    ("lds", ("LDS_Block_Size",)),
    ("scratch", ("Scratch_Size",)),
    ("vgpr", ("VGPR_Count",)),
    ("accum_vgpr", ("Accum_VGPR_Count",)),
    ("sgpr", ("SGPR_Count",)),
    ("hip_stream", ("Stream_Id",)),
    ("grid", ("Grid_Size_X", "Grid_Size_Y", "Grid_Size_Z")),
    ("grid", ("Grid_Size",)),
)
_BYTES_COLUMNS = ("Bytes", "Size", "Copy_Size")


class CsvReader:
    """Reads the files of one :class:`CsvSet` into timeline parts."""

    def __init__(self, found: CsvSet, agents: AgentTable) -> None:
        self.found = found
        self.agents = agents
        self.pool = NamePool()
        self.warnings: list[str] = list(found.warnings)
        self.cuts: list[tuple[str, int, int]] = []  # (file, complete rows, bytes dropped)

    def _frame(
        self,
        path: Path,
        role: str,
        wanted: tuple[str, ...],
        cats: tuple[str, ...],
    ) -> pl.DataFrame | None:
        """One scan of the file: the ``wanted`` columns it has (numbers as Int64, ``cats``
        as Categorical, the first of them the row's name); None when it has no rows."""
        name = cats[0]
        columns = read_header(path)
        if not columns:
            self.warnings.append(f"{path.name}: empty file (no header); skipped")
            return None
        check_columns(path, role, columns)
        present = [c for c in wanted if c in columns]
        schema = {c: (pl.Int64 if c in _INT else pl.String) for c in columns}
        keep = [pl.col(c).cast(pl.Categorical) if c in cats else pl.col(c) for c in present]
        rows = self._complete_rows(path)
        try:
            frame = (
                pl.scan_csv(path, schema=schema, quote_char='"', n_rows=rows)
                .select(keep)
                .collect(engine="streaming")
            )
        except (pl.exceptions.PolarsError, OSError, UnicodeDecodeError) as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise TraceError(
                f"{path}: cannot read as a rocprofv3 {LABELS[role]} ({first[:200]});"
                " the file may be truncated or edited"
            ) from exc
        if not frame.height:
            self.warnings.append(f"{path.name}: header only, no rows; skipped")
            return None
        if frame["Start_Timestamp"].null_count():
            kept = frame.filter(pl.col("Start_Timestamp").is_not_null())
            blank = frame.select(
                (
                    pl.col("Start_Timestamp").is_null()
                    & pl.col("End_Timestamp").is_null()
                    & pl.col(name).is_null()
                ).sum()
            ).item()
            lost = frame.height - kept.height - blank
            if lost:  # blank lines (a trailing newline too many) are not rows
                self.warnings.append(f"{path.name}: {lost} rows without a start time dropped")
            frame = kept
        return frame

    def _complete_rows(self, path: Path) -> int | None:
        """None for a file whose rows are all whole; for one cut inside its last row, the
        number of rows complete before the cut, noted in :attr:`cuts` (refused with
        ``TRACEKIT_STRICT=1``, :func:`~tracekit.parsers.csv_cut.csv_end`)."""
        end = csv_end(path)
        if end.unterminated and end.last_column != "End_Timestamp":
            self.warnings.append(
                f"{path.name}: its last line has no line break; read as a whole row (a"
                " cut inside its last field would not show)"
            )
        if not end.cut:
            return None
        self.cuts.append((path.name, end.rows, end.dropped))
        return end.rows

    def _base(self, frame: pl.DataFrame, label: str) -> tuple[np.ndarray, np.ndarray]:
        start = frame["Start_Timestamp"].to_numpy()
        return start, durations(start, frame["End_Timestamp"], label, self.warnings)

    def _names(self, values: pl.Series) -> np.ndarray:
        """Pool indices of a String or Categorical column (hashing each distinct name once)."""
        if values.dtype != pl.Categorical:
            values = values.cast(pl.Categorical)
        arr = values.to_arrow()
        if isinstance(arr, pa.ChunkedArray):
            arr = arr.combine_chunks()
        codes = self.pool.from_strings(arr.dictionary.cast(pa.string()))
        if not len(codes):
            return np.full(len(arr), -1, dtype=np.int64)
        indices = arr.indices.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
        return np.where(arr.indices.is_null().to_numpy(zero_copy_only=False), -1, codes[indices])

    @staticmethod
    def _opt(frame: pl.DataFrame, column: str) -> Any:
        return frame[column].to_arrow() if column in frame.columns else None

    def kernels(self, path: Path) -> list[Part]:
        wanted = (
            "Agent_Id",
            "Queue_Id",
            "Kernel_Name",
            "Correlation_Id",
            "Start_Timestamp",
            "End_Timestamp",
            *dict.fromkeys(c for _, cols in _KERNEL_ARGS for c in cols),
        )
        frame = self._frame(path, "kernel", wanted, ("Kernel_Name", "Agent_Id"))
        if frame is None:
            return []
        start, dur = self._base(frame, "kernel")
        fields: list[Field] = []
        for key, cols in _KERNEL_ARGS:
            if key not in {f.key for f in fields} and all(c in frame.columns for c in cols):
                fields.append(Field(key, cols[0] if len(cols) == 1 else cols, INT, True))
        columns = {
            "device": self.agents.map_labels(frame["Agent_Id"]).to_arrow(),
            "stream": frame["Queue_Id"].to_arrow(),
            "rank": 0,
            "corr": self._opt(frame, "Correlation_Id"),
            "args": _kernel_args(frame, fields),
        }
        return [Part("kernel", start, dur, self._names(frame["Kernel_Name"]), "sm", columns)]

    def memcpy(self, path: Path) -> list[Part]:
        wanted = (
            "Direction",
            "Stream_Id",
            "Source_Agent_Id",
            "Destination_Agent_Id",
            "Correlation_Id",
            "Start_Timestamp",
            "End_Timestamp",
            *_BYTES_COLUMNS,
        )
        frame = self._frame(path, "memcpy", wanted, ("Direction",))
        if frame is None:
            return []
        start, dur = self._base(frame, "memory copy")
        src = self.agents.map_labels(frame["Source_Agent_Id"])
        dst = self.agents.map_labels(frame["Destination_Agent_Id"])
        direction = frame["Direction"].cast(pl.String)
        from_device = direction.str.contains("DEVICE_TO").fill_null(False)
        device = pl.select(
            pl.when(from_device).then(src.fill_null(dst)).otherwise(dst.fill_null(src))
        ).to_series()
        fields = [
            Field("src_agent", blank_as_null("Source_Agent_Id"), STR, True),
            Field("dst_agent", blank_as_null("Destination_Agent_Id"), STR, True),
        ]
        size = next((c for c in _BYTES_COLUMNS if c in frame.columns), None)
        if size:
            fields.append(Field("bytes", size, INT, True))
        if "Stream_Id" in frame.columns:
            fields.append(Field("hip_stream", "Stream_Id", INT, True))
        columns = {
            "device": device.to_arrow(),
            "rank": 0,
            "corr": self._opt(frame, "Correlation_Id"),
            "args": json_args(frame, *fields),
        }
        return [Part("memcpy", start, dur, self._names(frame["Direction"]), "copy", columns)]

    def _host_ops(self, path: Path, role: str, extra: tuple[tuple[str, str], ...]) -> list[Part]:
        """Memory allocation and scratch memory rows: runtime work on a host thread."""
        wanted = (
            "Operation",
            "Agent_Id",
            "Correlation_Id",
            "Thread_Id",
            "Start_Timestamp",
            "End_Timestamp",
            *(c for _, c in extra),
        )
        frame = self._frame(path, role, wanted, ("Operation",))
        if frame is None:
            return []
        start, dur = self._base(frame, LABELS[role].replace(" trace", ""))
        fields: list[Field] = []
        if "Agent_Id" in frame.columns:
            fields.append(Field("agent", blank_as_null("Agent_Id"), STR, True))
            if self.agents.known:  # without agent info a label's device would be a guess
                frame = frame.with_columns(gpu=self.agents.map_labels(frame["Agent_Id"]))
                fields.append(Field("device", "gpu", INT, True))
        for key, col in extra:
            if col in _INT and col in frame.columns:
                fields.append(Field(key, col, INT, True))
            elif col in frame.columns:
                fields.append(Field(key, blank_as_null(col), STR, True))
        args = json_args(frame, *fields) if fields else None
        columns = {
            "device": -1,
            "rank": 0,
            "tid": self._opt(frame, "Thread_Id"),
            "corr": self._opt(frame, "Correlation_Id"),
            "args": args,
        }
        return [Part("api", start, dur, self._names(frame["Operation"]), None, columns)]

    def allocations(self, path: Path) -> list[Part]:
        return self._host_ops(path, "alloc", (("bytes", "Allocation_Size"), ("address", "Address")))

    def scratch(self, path: Path) -> list[Part]:
        return self._host_ops(path, "scratch", (("queue", "Queue_Id"), ("flags", "Alloc_Flags")))

    def api(self, path: Path) -> list[Part]:
        wanted = (
            "Domain",
            "Function",
            "Process_Id",
            "Thread_Id",
            "Correlation_Id",
            "Start_Timestamp",
            "End_Timestamp",
        )
        frame = self._frame(path, "api", wanted, ("Function", "Domain"))
        if frame is None:
            return []
        start, dur = self._base(frame, "API")
        end = frame["End_Timestamp"].fill_null(-1).to_numpy()
        kinds = sdk.api_kinds(frame["Domain"], frame["Function"], start, end)
        args = json_args(frame, Field("domain", "Domain", STR, True))
        names = self._names(frame["Function"])
        parts = []
        for code, kind in enumerate(sdk.API_KINDS):
            mask = kinds == code
            if not mask.any():
                continue
            take = None if mask.all() else np.nonzero(mask)[0]

            def pick(values: Any, take: Any = take) -> Any:
                return values if take is None or values is None else values.take(take)

            columns = {
                "device": -1,
                "rank": 0,
                "pid": pick(self._opt(frame, "Process_Id")),
                "tid": pick(self._opt(frame, "Thread_Id")),
                "corr": pick(self._opt(frame, "Correlation_Id")),
                "args": pick(args),
            }
            sel = slice(None) if take is None else take
            parts.append(Part(kind, start[sel], dur[sel], names[sel], None, columns))
        return parts


def _kernel_args(frame: pl.DataFrame, fields: list[Field]) -> Any:
    if not fields:
        return None
    split = len(fields) - 1 if fields[-1].key == "grid" and len(fields) > 1 else None
    return json_args(frame, *fields, split=split)


def sniff(probe: Probe) -> bool:
    """A rocprofv3 CSV file (by its header), or a folder holding one."""
    return sniff_csv_path(probe.path, probe.head)


def parse(path: Path, progress: Progress | None = None) -> Timeline:
    """Read a rocprofv3 CSV set (a folder, or any one of its files) into a Timeline."""
    note = progress or (lambda _msg: None)
    found = discover(path)
    agent_files = found.files.get("agent_info", [])
    agents = read_agent_info(agent_files[0]) if agent_files else AgentTable([])
    reader = CsvReader(found, agents)
    readers = {
        "kernel": reader.kernels,
        "memcpy": reader.memcpy,
        "api": reader.api,
        "alloc": reader.allocations,
        "scratch": reader.scratch,
    }
    parts: list[Part] = []
    for role, read in readers.items():
        for file in found.files.get(role, []):
            note(f"reading {file.name}")
            parts.extend(read(file))
    if not found.trace_files and not agent_files:
        raise TraceError(f"{path}: not a rocprofv3 CSV (no kernel, API or memory trace header)")
    if not any(len(p) for p in parts) and found.trace_files:
        names = ", ".join(p.name for p in found.trace_files)
        raise TraceError(
            f"{path}: rocprofv3 CSV files hold no rows ({names}); rocprofv3 writes a file only"
            " when it has records, so these were cut short: profile again"
        )
    note("assembling")
    meta = skeleton("rocprofv3-csv", path.name, sdk.PRODUCER)
    table = events_table(parts, reader.pool, meta, sdk.CLOCK)
    meta["devices"] = agents.devices(used_devices(table))
    meta["files"] = [p.name for p in (*found.trace_files, *agent_files)]
    if found.ignored:
        meta["ignored_files"] = found.ignored
    if not found.trace_files:
        reader.warnings.append(f"only agent info ({agent_files[0].name}); no trace files")
    for name, rows, dropped in reader.cuts:
        reader.warnings.append(cut_short_warning(name, "file", None, rows, "row", dropped))
    if reader.cuts:
        meta["truncated"] = {"files": [c[0] for c in reader.cuts]}
    meta["warnings"] = reader.warnings + agents.warnings()
    folder = path if path.is_dir() else path.parent
    if summaries := v3_summaries(folder, found.prefix):
        meta["summaries"] = summaries
    return Timeline(table, meta)
