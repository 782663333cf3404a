"""``batch.csv`` / ``request.csv`` and their ``profiler.db`` tables -> timeline rows.

The parse step writes one batch row per batching span (``BatchSchedule``, or
``batchFrameworkProcessing`` since MindIE's rework) and per execution span (``modelExec``,
``Execute``), with its requests (``res_list``: a Python ``repr`` of ``[{'rid': …, 'iter':
…}, …]``), ``batch_type``, ``batch_size`` and times (exporters/exporter_batch.py); one request
row per request with its arrival, token counts, TTFT and duration (exporter_req_data.py).
Quirk: ``batch.csv``'s ``start_time(ms)`` holds µs (only ``during_time`` is divided), so the
unit of a start column is read from its magnitude. The db tables hold the same columns
before the ``(ms)`` renames.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import msgspec
import polars as pl

from tracekit.errors import TraceError
from tracekit.parsers.sqlite import open_readonly

_NS = {"us": 1_000, "ms": 1_000_000}
_DATETIME = "%Y-%m-%d %H:%M:%S:%f"


def read_csv(path: Path) -> pl.DataFrame:
    """A CSV of the parse step, every column as text, ``(ms)`` dropped from the names."""
    try:
        frame = pl.read_csv(path, infer_schema=False, truncate_ragged_lines=True)
    except (pl.exceptions.PolarsError, UnicodeDecodeError) as exc:
        raise TraceError(f"{path}: cannot read as a CSV ({exc}); export it again") from None
    return _plain_names(frame)


def read_table(path: Path, table: str) -> pl.DataFrame | None:
    """A table of ``profiler.db`` as text columns, or None when the database lacks it."""
    with closing(open_readonly(path)) as con:
        try:
            cursor = con.execute(f'SELECT * FROM "{table}"')
        except sqlite3.OperationalError:
            return None
        names = [d[0] for d in cursor.description]
        rows = cursor.fetchall()
    columns = {n: [None if v is None else str(v) for v in col] for n, col in zip(names, zip(*rows))}
    frame = pl.DataFrame(columns or {n: [] for n in names}, schema=dict.fromkeys(names, pl.String))
    return _plain_names(frame)


def _plain_names(frame: pl.DataFrame) -> pl.DataFrame:
    renames = {c: c.removesuffix("(ms)") for c in frame.columns if c.endswith("(ms)")}
    return frame.rename({c: n for c, n in renames.items() if n not in frame.columns})


def _number(column: str) -> pl.Expr:
    return pl.col(column).str.strip_chars().cast(pl.Float64, strict=False)


def _epoch_unit(values: pl.Series) -> str:
    """``us`` or ``ms``: what unit puts these epoch times near the present."""
    median = values.drop_nulls().median()
    return "us" if median is not None and float(median) >= 1e14 else "ms"  # type: ignore[arg-type]


def _times(frame: pl.DataFrame, warnings: list[str], what: str) -> pl.DataFrame:
    """``ts`` / ``dur`` (ns since the epoch) from a start column, its end or duration."""
    if "start_time" in frame.columns:
        start = frame.select(_number("start_time"))[:, 0]
        scale = _NS[_epoch_unit(start)]
        ts = (start * scale).round().cast(pl.Int64)
        if "end_time" in frame.columns:
            end = frame.select(_number("end_time"))[:, 0]
            dur = ((end * scale).round().cast(pl.Int64) - ts).clip(0)
        else:
            dur = _duration(frame)
    elif "start_datetime" in frame.columns:
        when = frame.get_column("start_datetime").str.strptime(
            pl.Datetime("us"), _DATETIME, strict=False
        )
        ts = when.dt.epoch("us") * 1000
        dur = _duration(frame)
        warnings.append(
            f"{what} gives local wall-clock times only (start_datetime, no time zone):"
            " times are right relative to each other, not as epoch"
        )
    else:
        raise TraceError(f"{what} has no start_time or start_datetime column; export it again")
    return frame.with_columns(ts=ts, dur=dur.fill_null(0))


def _duration(frame: pl.DataFrame) -> pl.Series:
    for column in ("during_time", "execution_time"):
        if column in frame.columns:
            ms = frame.select(_number(column))[:, 0]
            return (ms * 1e6).round().cast(pl.Int64).clip(0)
    return pl.repeat(0, frame.height, dtype=pl.Int64, eager=True)


def _json_lists(texts: pl.Series) -> pl.Series:
    """Python ``repr`` lists (``[{'rid': '7', 'iter': 0}]``) as JSON text; null where the
    result is not JSON."""
    converted = (
        texts.str.replace_all("'", '"', literal=True)
        .str.replace_all(r"\bNone\b", "null")
        .str.replace_all(r"\bTrue\b", "true")
        .str.replace_all(r"\bFalse\b", "false")
    )
    values = converted.to_list()
    try:
        msgspec.json.decode("[" + ",".join(v or "null" for v in values) + "]")
        return converted
    except msgspec.DecodeError:
        ok = []
        for v in values:
            try:
                msgspec.json.decode(v or "null")
                ok.append(v)
            except msgspec.DecodeError:
                ok.append(None)
        return pl.Series(ok, dtype=pl.String)


def _args(frame: pl.DataFrame, keep: list[str], listed: str | None) -> pl.Series:
    """The kept columns as one JSON object per row, ``listed`` (a repr list) spliced in."""
    kept = [c for c in keep if c in frame.columns]
    base = frame.select(pl.struct(kept).struct.json_encode())[:, 0] if kept else None
    if base is None:
        base = pl.repeat("{}", frame.height, dtype=pl.String, eager=True)
    if listed is None or listed not in frame.columns:
        return base
    extra = _json_lists(frame.get_column(listed))
    joined = pl.DataFrame({"b": base, "x": extra}).select(
        pl.when(pl.col("x").is_null())
        .then(pl.col("b"))
        .when(pl.col("b") == "{}")
        .then(pl.lit('{"res_list":') + pl.col("x") + pl.lit("}"))
        .otherwise(
            pl.col("b").str.slice(0, pl.col("b").str.len_chars() - 1)
            + pl.lit(',"res_list":')
            + pl.col("x")
            + pl.lit("}")
        )
    )
    return joined[:, 0]


def batch_rows(frame: pl.DataFrame, what: str) -> tuple[pl.DataFrame, list[str]]:
    """Timeline rows of the batch table: one range per batching or execution span."""
    warnings: list[str] = []
    if "name" not in frame.columns:
        raise TraceError(f"{what} has no name column; export it again")
    timed = _times(frame, warnings, what)
    keep = [
        c
        for c in frame.columns
        if c
        not in (
            "name",
            "res_list",
            "start_time",
            "end_time",
            "start_datetime",
            "end_datetime",
            "during_time",
        )
    ]
    args = _args(timed, keep, "res_list")
    rows = timed.select(
        "ts", "dur", kind=pl.lit("range"), name=pl.col("name"), device=pl.lit(-1, pl.Int32)
    ).with_columns(args=args)
    return rows, warnings


def request_rows(frame: pl.DataFrame, what: str) -> tuple[pl.DataFrame, list[str]]:
    """Timeline rows of the request table: one ``request`` range per request, from its
    arrival for its end-to-end time, its ids, token counts and TTFT in the args."""
    warnings: list[str] = []
    if "http_rid" in frame.columns and "rid" not in frame.columns:
        frame = frame.rename({"http_rid": "rid"})
    timed = _times(frame, warnings, what)
    keep = [c for c in frame.columns if c not in ("start_time", "start_datetime")]
    rows = timed.select(
        "ts", "dur", kind=pl.lit("range"), name=pl.lit("request"), device=pl.lit(-1, pl.Int32)
    ).with_columns(args=_args(timed, keep, None))
    return rows, warnings
