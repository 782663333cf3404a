"""The vendor's own summaries of an Ascend output, kept for ``tracekit.checks``:
torch_npu ``step_trace_time.csv`` / ``analysis.db`` StepTraceTime (per step), and
``op_statistic.csv`` (per operator type), ``kernel_details.csv`` / ``op_summary_*.csv`` (per
operator name, when the rows came from the timeline). Each becomes one ``meta["summaries"]`` entry
(``tracekit.checks.vendor`` documents the shape); times in ns."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import polars as pl

from tracekit.parsers.csv_cut import csv_end
from tracekit.parsers.msprof.csv_tables import read_header
from tracekit.parsers.msprof.times import clean_text, float_text

US = 1_000.0
STEP_COLUMNS = {  # step_trace_time.csv header / analysis.db column -> summary field
    "Computing": "computing_ns",
    "Communication(Not Overlapped)": "not_overlapped_ns",
    "Overlapped": "overlapped_ns",
    "computing": "computing_ns",
    "communication_not_overlapped": "not_overlapped_ns",
    "overlapped": "overlapped_ns",
}


def _step_rows(records: list[dict[str, Any]], step_key: str) -> list[dict[str, Any]]:
    rows = []
    for record in records:
        row: dict[str, Any] = {"step": str(record.get(step_key))}
        for column, field in STEP_COLUMNS.items():
            if record.get(column) is not None:
                row[field] = float(record[column]) * US
        rows.append(row)
    return rows


def step_trace(records: list[dict[str, Any]], source: str, rank: int | None) -> dict[str, Any]:
    """``step_trace_time.csv`` rows (µs, as :func:`~.csv_tables.read_step_trace` reads them)."""
    return {"kind": "steps", "source": source, "rank": rank, "rows": _step_rows(records, "Step")}


def analysis_db(path: Path, rank: int | None) -> dict[str, Any] | None:
    """torch_npu's ``analysis.db`` StepTraceTime (beside the db export), or None."""
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
            cursor = db.execute("SELECT * FROM StepTraceTime")
            names = [d[0] for d in cursor.description]
            records = [dict(zip(names, r)) for r in cursor.fetchall()]
    except sqlite3.Error:
        return None
    rows = _step_rows(records, "step")
    return {"kind": "steps", "source": path.name, "rank": rank, "rows": rows} if rows else None


def _per_key(
    path: Path, key: str, us: str, calls: pl.Expr, device: int | None
) -> list[dict[str, Any]] | None:
    """Rows ``{key, calls, total_ns}`` of a CSV grouped by its ``key`` column (``us``: the
    duration column; ``calls``: the aggregation counting calls); only this device's rows when
    the file has a ``Device_id`` column. None when the file cannot be read or is cut short
    (its totals would be of part of the run)."""
    if csv_end(path).cut:
        return None
    try:
        raw = pl.read_csv(path, infer_schema=False)
    except (pl.exceptions.PolarsError, OSError):
        return None
    frame = raw.with_columns(key=clean_text(key), us=float_text(us))
    if device is not None and "Device_id" in raw.columns:
        frame = frame.filter(pl.col("Device_id").cast(pl.Int64, strict=False) == device)
    table = frame.group_by("key").agg(calls=calls, total_ns=pl.col("us").sum() * US)
    return table.sort("key").to_dicts()


def op_statistic(path: Path, device: int | None, rank: int | None) -> dict[str, Any] | None:
    """``op_statistic.csv``: per operator type (summed over core types), calls and total
    time; only this device's rows when the file has a ``Device_id`` column."""
    if not {"OP Type", "Count", "Total Time(us)"} <= set(read_header(path)):
        return None
    calls = pl.col("Count").cast(pl.Int64, strict=False).sum()
    rows = _per_key(path, "OP Type", "Total Time(us)", calls, device)
    if rows is None:
        return None
    return {"kind": "kernels", "source": path.name, "key": "op_type", "rank": rank, "rows": rows}


DETAIL_COLUMNS = (("Name", "Duration(us)"), ("Op Name", "Task Duration(us)"))


def op_details(path: Path, device: int | None, rank: int | None) -> dict[str, Any] | None:
    """``kernel_details.csv`` / ``op_summary_*.csv``: per operator name, calls and total
    time; only this device's rows when the file has a ``Device_id`` column."""
    columns = set(read_header(path))
    found = next(((n, d) for n, d in DETAIL_COLUMNS if {n, d} <= columns), None)
    rows = None if found is None else _per_key(path, *found, pl.len(), device)
    if rows is None:
        return None
    return {"kind": "kernels", "source": path.name, "key": "name", "rank": rank, "rows": rows}
