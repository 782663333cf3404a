"""The CSV tables of torch_npu and msprof, read with polars (every column as text, explicit).

* op details: torch_npu ``kernel_details.csv`` and msprof ``op_summary_*.csv`` -- the same
  table under two sets of headers (``Name``/``Op Name``, ``Accelerator Core``/``Task Type``,
  ``Start Time(us)``/``Task Start Time(us)`` …), ``Block Dim`` or the newer ``Block Num``;
* ``task_time_*.csv`` -- every device task of an msprof run (kernel or not);
* ``step_trace_time.csv`` -- per-step Computing / Communication / Free totals (µs).

Values are cleaned as the producers write them: trailing TABs after timestamps, shapes inside
an extra pair of quotes, ``N/A`` for missing values, CRLF line ends.
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Collection
from pathlib import Path

import polars as pl

from tracekit.errors import TraceError
from tracekit.parsers.base import cut_short_warning
from tracekit.parsers.csv_cut import csv_end
from tracekit.parsers.msprof.times import (
    by_value,
    clean_text,
    float_text,
    int_text,
    us_column_ns,
    us_small_ns,
    us_text_ns,
)

# header -> canonical column, for op_summary / kernel_details
OP_COLUMNS = {
    "Step Id": "step",
    "Step ID": "step",
    "Device_id": "device",
    "Device ID": "device",
    "Model Name": "model_name",
    "Model ID": "model_id",
    "Task ID": "task_id",
    "Stream ID": "stream",
    "Infer ID": "infer_id",
    "Name": "name",
    "Op Name": "name",
    "Type": "op_type",
    "OP Type": "op_type",
    "OP State": "op_state",
    "Accelerator Core": "core",
    "Task Type": "core",
    "Start Time(us)": "start",
    "Task Start Time(us)": "start",
    "Task Start Time": "start",
    "Duration(us)": "dur",
    "Task Duration(us)": "dur",
    "Task Duration": "dur",
    "Wait Time(us)": "wait",
    "Task Wait Time(us)": "wait",
    "Task Wait Time": "wait",
    "Block Dim": "block_dim",
    "Block Num": "block_dim",
    "Mix Block Dim": "mix_block_dim",
    "Mix Block Num": "mix_block_dim",
    "HF32 Eligible": "hf32",
    "Input Shapes": "input_shapes",
    "Input Data Types": "input_dtypes",
    "Input Formats": "input_formats",
    "Output Shapes": "output_shapes",
    "Output Data Types": "output_dtypes",
    "Output Formats": "output_formats",
    "Context ID": "context_id",
}
TASK_TIME_COLUMNS = {
    "Device_id": "device",
    "kernel_name": "name",
    "kernel_type": "task_type",
    "stream_id": "stream",
    "task_id": "task_id",
    "task_time(us)": "dur",
    "task_start(us)": "start",
    "task_stop(us)": "stop",
}
_INTS = (
    "step",
    "device",
    "model_id",
    "task_id",
    "stream",
    "block_dim",
    "mix_block_dim",
    "context_id",
    "infer_id",
)
STEP_TRACE = (
    "Computing",
    "Communication(Not Overlapped)",
    "Overlapped",
    "Communication",
    "Free",
    "Stage",
    "Bubble",
    "Communication(Not Overlapped and Exclude Receive)",
    "Preparing",
)


def read_header(path: Path) -> list[str]:
    """The column names of a CSV's first line (empty for an empty or unreadable file)."""
    try:
        with path.open("rb") as fh:
            head = fh.read(1 << 16)
    except OSError:
        return []
    text = head.decode("utf-8", errors="replace").lstrip("\ufeff")
    lines = text.splitlines()
    if not lines or not lines[0].strip():
        return []
    try:
        return [c.strip() for c in next(csv.reader([lines[0]]))]
    except (csv.Error, StopIteration):
        return []


def csv_role(columns: list[str]) -> str | None:
    """``op`` (op_summary / kernel_details), ``task_time``, ``step_trace``, ``op_statistic``
    or None."""
    cols = set(columns)
    if {"kernel_type", "task_start(us)"} <= cols:
        return "task_time"
    named = bool(cols & {"Name", "Op Name"})
    started = bool(cols & {"Start Time(us)", "Task Start Time(us)", "Task Start Time"})
    if named and started and cols & {"Duration(us)", "Task Duration(us)", "Task Duration"}:
        return "op"
    if {"Step", "Computing", "Free"} <= cols:
        return "step_trace"
    if {"OP Type", "Count", "Total Time(us)"} <= cols:
        return "op_statistic"
    return None


def _read(path: Path, label: str, warnings: list[str], keep: Collection[str] = ()) -> pl.DataFrame:
    """Every column as text, or only those in ``keep`` (when given and the names are unique);
    of a file cut inside a row, the rows before it, said in ``warnings``."""
    columns = read_header(path)
    if not columns:
        raise TraceError(
            f"{path}: empty {label} (no header); the export was cut short, export again"
        )
    end = csv_end(path)
    if end.cut:
        warnings.append(cut_short_warning(path.name, "file", None, end.rows, "row", end.dropped))
    elif end.unterminated and end.last_column in keep:
        warnings.append(
            f"{path.name}: its last line has no line break; read as a whole row (a cut inside"
            f" its last field, {end.last_column}, would not show)"
        )
    wanted = [c for c in columns if c in keep]
    try:
        return pl.read_csv(
            path,
            schema={c: pl.String for c in columns},
            has_header=True,
            new_columns=columns,
            truncate_ragged_lines=True,
            columns=wanted if wanted and len(set(columns)) == len(columns) else None,
            n_rows=end.rows if end.cut else None,
        )
    except (pl.exceptions.PolarsError, OSError, UnicodeDecodeError) as exc:
        first = str(exc).strip().splitlines()[0][:160] if str(exc).strip() else type(exc).__name__
        raise TraceError(
            f"{path}: cannot read as {label} ({first}); the file may be truncated"
        ) from exc


def read_op_details(path: Path, warnings: list[str]) -> pl.DataFrame:
    """op_summary / kernel_details rows: canonical columns, ``start``/``dur``/``wait`` in ns,
    ids as Int64 (null for N/A), text cleaned. ``block_key`` says which block header was used."""
    raw = _read(path, "op summary / kernel details", warnings, OP_COLUMNS)
    rename: dict[str, str] = {}
    for column in raw.columns:  # the first of two spellings wins ("Step Id" / "Step ID")
        if column in OP_COLUMNS and OP_COLUMNS[column] not in rename.values():
            rename[column] = OP_COLUMNS[column]
    frame = raw.select(list(rename)).rename(rename)
    frame = pl.DataFrame(
        [_convert(frame[c], _OP_CONVERT.get(c, clean_text)) for c in frame.columns]
    )
    block = "Block Num" if "Block Num" in raw.columns else "Block Dim"
    return (
        frame.with_columns(pl.lit(block).alias("block_key"))
        if "block_dim" in frame.columns
        else frame
    )


def read_task_time(path: Path, warnings: list[str]) -> pl.DataFrame:
    """task_time rows: ``name`` (binary kernel name or null), ``task_type``, ids, ns times."""
    raw = _read(path, "task_time", warnings, TASK_TIME_COLUMNS)
    rename = {c: TASK_TIME_COLUMNS[c] for c in raw.columns if c in TASK_TIME_COLUMNS}
    frame = raw.select(list(rename)).rename(rename)
    return pl.DataFrame(
        [_convert(frame[c], _TASK_CONVERT.get(c, clean_text)) for c in frame.columns]
    )


def _us(column: str) -> pl.Expr:
    return us_text_ns(pl.col(column)).alias(column)


# how a raw text column is converted: "time" (µs timestamps, nearly all distinct) or an
# expression on the column, evaluated once per distinct value; clean_text when not listed
_OP_CONVERT = {"start": "time", "dur": us_small_ns, "wait": us_small_ns} | dict.fromkeys(
    _INTS, int_text
)
_TASK_CONVERT = {"start": "time", "stop": "time", "dur": _us} | dict.fromkeys(
    ("device", "stream", "task_id"), int_text
)


def _convert(values: pl.Series, convert: Callable[[str], pl.Expr] | str) -> pl.Series:
    if convert == "time":
        return us_column_ns(values)
    return by_value(values, convert)  # type: ignore[arg-type]


def read_step_trace(path: Path, warnings: list[str]) -> pl.DataFrame:
    """step_trace_time.csv: ``step`` (text, as written) and the µs totals as floats."""
    raw = _read(path, "step_trace_time", warnings)
    keep = [c for c in ("Step", "Device_id", *STEP_TRACE) if c in raw.columns]
    return raw.select(clean_text("Step"), *(float_text(c) for c in keep[1:]))
