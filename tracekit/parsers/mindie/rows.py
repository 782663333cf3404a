"""Decoded msServiceProfiler events -> timeline rows: every span a host ``range`` (an
instant a ``marker``), device -1; counters, flows and events merged in from other profilers
left out, each said in a warning."""

from __future__ import annotations

import json

import polars as pl

# the spans msServiceProfiler writes once per executed batch (MindIE modelExec / Execute,
# vLLM and SGLang hooks modelExec): one engine iteration each
ITERATION_SPANS = ("modelExec", "modelRunnerExec")
# processes of an msprof or torch profiler export merged into chrome_tracing.json
# (exporter_trace.py merge_json_data): their device rows are read by --parser msprof
FOREIGN_PROCESSES = ("Ascend Hardware", "CANN", "AscendCL", "Overlap Analysis", "HCCL",
                     "Communication", "Stars Chip Trace", "Stars Soc Info", "Acc PMU",
                     "NPU MEM", "Python", "Python GC")  # fmt: skip


def _process_names(frame: pl.DataFrame) -> pl.DataFrame:
    names = frame.filter((pl.col("ph") == "M") & (pl.col("name") == "process_name"))
    return names.select("pid", process=pl.col("args").str.json_path_match("$.name")).unique(
        "pid", keep="last"
    )


def _with_lane(args: pl.Expr, lane: pl.Expr) -> pl.Expr:
    """``args`` with the event's text tid as ``"lane"`` first (JSON-quoted by msgspec)."""
    quoted = lane.map_elements(json.dumps, return_dtype=pl.String)  # few distinct lanes
    body = args.str.strip_chars()
    rest = pl.when(body == "{}").then(pl.lit("}")).otherwise(pl.lit(",") + body.str.slice(1))
    return (
        pl.when(lane.is_null() | ~body.str.starts_with("{"))
        .then(args)
        .otherwise(pl.lit('{"lane":') + quoted + rest)
    )


def service_rows(frame: pl.DataFrame) -> tuple[pl.DataFrame, list[str]]:
    """Timeline rows (absolute ns) of the service spans of ``frame``, and the warnings."""
    warnings = []
    counters = frame.filter(pl.col("ph") == "C").height
    if counters:
        warnings.append(
            f"{counters:,} counter samples (KV cache blocks, queue sizes, CPU / NPU usage) are"
            " not kept: the timeline holds spans and instants"
        )
    foreign = _process_names(frame).filter(pl.col("process").is_in(FOREIGN_PROCESSES))
    spans = frame.filter(pl.col("ph").is_in(["X", "I", "i"]) & pl.col("name").is_not_null())
    if foreign.height:
        merged = spans.filter(pl.col("pid").is_in(foreign["pid"].implode()))
        spans = spans.filter(~pl.col("pid").is_in(foreign["pid"].implode()))
        names = ", ".join(sorted(set(foreign["process"].to_list())))
        warnings.append(
            f"{merged.height:,} events of an msprof / torch profiler export merged into the"
            f" file (processes {names}) are not read here: read that export (its PROF_ folder"
            " or *_ascend_pt folder) on its own for the device rows"
        )
    bad = spans.filter(~pl.col("ts_ok")).height
    if bad:
        warnings.append(f"{bad:,} spans without a readable timestamp were dropped")
        spans = spans.filter(pl.col("ts_ok"))
    dur = pl.when(pl.col("dur_ok") & (pl.col("dur") > 0)).then(pl.col("dur")).otherwise(0)
    thread = pl.col("lane").str.extract(r"\((\d+)\)$").cast(pl.Int64, strict=False)
    rows = spans.select(
        ts=pl.col("ts"),
        dur=dur,
        kind=pl.when(dur > 0).then(pl.lit("range")).otherwise(pl.lit("marker")),
        name=pl.col("name"),
        device=pl.lit(-1, pl.Int32),
        pid=pl.col("pid"),
        tid=pl.coalesce(pl.col("tid"), thread),
        args=_with_lane(pl.col("args"), pl.coalesce(pl.col("lane"), pl.col("pid_text"))),
    )
    return rows, warnings


def ranks_of(rows: pl.DataFrame) -> tuple[pl.Series, list[str]]:
    """Each row's rank: one per process that runs engine iterations when there are several
    (the rest on rank 0), else 0 everywhere."""
    engines = (
        rows.filter(pl.col("name").is_in(ITERATION_SPANS) & pl.col("pid").is_not_null())
        .get_column("pid")
        .unique()
        .sort()
    )
    if engines.len() <= 1:
        return pl.repeat(0, rows.height, dtype=pl.Int32, eager=True), []
    ranks = pl.DataFrame({"pid": engines, "rank": pl.int_range(engines.len(), eager=True)})
    rank = rows.select("pid").join(ranks, on="pid", how="left", maintain_order="left")["rank"]
    note = (
        f"{engines.len()} processes run engine iterations: each is taken for a rank"
        " (pid order); the other processes' spans are on rank 0"
    )
    return rank.fill_null(0).cast(pl.Int32), [note]
