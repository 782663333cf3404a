"""Timeline rows of an ``rpd2tracing.py`` JSON (events as text columns, see :mod:`.json_trace`).

* GPU processes are the pids named ``GPU<n>`` by ``process_name`` metadata, or that ``api_op``
  flows end on. Their X events are ops (kind from the op type in ``args.desc``, as
  :func:`~.rows.op_kind` reads it; device = pid = gpuId, stream = tid = queueId), except
  the synthetic spans rpd2tracing adds there: ``Graph <exec>`` (``args.kernels``) and roctx
  "GPU frames" (``desc`` ``UserMarker frame: …``), which are device ``range`` rows.
* Host X events are roctx ranges when the name repeats a non-empty ``desc`` (rpd2tracing
  writes the message as both), API calls when named like HIP/HSA/CUDA calls or when a flow
  starts in them, other ranges otherwise (the tracer's own records); ``i`` events are marks.
* A flow's start (``ph: s``, at ``min(call end - 2 µs, op start)``) is matched to the call
  on its thread that holds that point, its end (``ph: f``) to the op starting at its ts on
  that GPU queue; a call's ``corr`` is its smallest flow id, shared by every op it launched.
"""

from __future__ import annotations

from typing import Any

import polars as pl
import pyarrow as pa

from tracekit.parsers.assemble import Part
from tracekit.parsers.convert import to_ns
from tracekit.parsers.name_pool import NamePool
from tracekit.parsers.rocprof.args import INT, STR, Field, json_args
from tracekit.parsers.rocprof.rpd.rows import API_NAME, host_kind_parts, op_kind
from tracekit.parsers.rocprof.table import durations

FLOW_LEAD_NS = 2_000  # rpd2tracing starts a flow 2 µs before the end of its call
_ENGINE = {"kernel": "sm", "memcpy": "copy", "memset": None, "sync": None}


def us_text_to_ns(column: str) -> pl.Expr:
    """µs written as text (``"8306017670485.923"``, ``"154889"``) -> int64 ns, rounded to
    the ns without passing through a float, by :func:`tracekit.parsers.convert.to_ns`'s
    rules; null where the text is no number."""
    return pl.col(column).map_batches(_us_to_ns, return_dtype=pl.Int64)


def _us_to_ns(text: pl.Series) -> pl.Series:
    ns, valid = to_ns(text.to_list())
    return pl.Series(pa.array(ns, pa.int64(), mask=~valid))


def _gpu_pids(frame: pl.DataFrame) -> list[int]:
    named = frame.filter(
        (pl.col("ph") == "M")
        & (pl.col("name") == "process_name")
        & pl.col("label").str.contains(r"^GPU\d*$")
    )["pid"]
    flows = frame.filter(pl.col("ph") == "f")["pid"]
    return sorted(set(named.drop_nulls().to_list()) | set(flows.drop_nulls().to_list()))


def _flows(spans: pl.DataFrame, frame: pl.DataFrame, gpus: list[int]) -> pl.DataFrame:
    """Per flow id: the row index of its call (``call``) and of its op (``op``)."""
    flows = frame.filter(pl.col("ph").is_in(["s", "f"]) & pl.col("id").is_not_null())
    flows = flows.select("ph", "pid", "tid", "start", flow=pl.col("id").cast(pl.Int64))
    roctx = (pl.col("desc").fill_null("") != "") & (pl.col("name") == pl.col("desc"))
    calls = spans.filter(~pl.col("pid").is_in(gpus) & (pl.col("ph") == "X") & ~roctx)
    calls = calls.select("pid", "tid", "row", "start", end=pl.col("start") + pl.col("dur_ns"))
    calls = calls.sort("start")
    starts = (
        flows.filter(pl.col("ph") == "s")
        .with_columns(key=pl.col("start") + FLOW_LEAD_NS - 1)
        .sort("key")
    )
    found = starts.join_asof(
        calls.rename({"start": "call_start"}),
        left_on="key",
        right_on="call_start",
        by=["pid", "tid"],
        strategy="backward",
        check_sortedness=False,
    )
    found = found.filter(pl.col("end") >= pl.col("start") - 1_000)
    ends = flows.filter(pl.col("ph") == "f").join(
        spans.filter(pl.col("pid").is_in(gpus)).select("pid", "tid", "start", "row"),
        on=["pid", "tid", "start"],
        how="inner",
    )
    return (
        found.select("flow", call="row")
        .join(ends.select("flow", op="row"), on="flow", how="full", coalesce=True)
        .unique("flow", keep="first")
    )


def build_parts(
    frame: pl.DataFrame, pool: NamePool, warnings: list[str]
) -> tuple[list[Part], dict[str, Any]]:
    """Parts of every row kind, and what the metadata needs (GPUs, time unit)."""
    frame = frame.with_columns(
        pl.col("pid", "tid").cast(pl.Int64, strict=False),
        start=us_text_to_ns("ts"),
        dur_ns=us_text_to_ns("dur"),
    )
    fractional = frame.filter(pl.col("ph") == "X")["ts"].str.contains(r"\.").any()
    info = {"time_unit": "µs with ns fractions" if fractional else "whole µs", "gpus": []}
    if frame.filter(pl.col("ph") == "X").height and not fractional:
        warnings.append("times are whole µs (rpd2tracing before Nov 2024): ns digits are lost")
    gpus = _gpu_pids(frame)
    info["gpus"] = gpus
    spans = frame.filter(pl.col("ph").is_in(["X", "i"]) & pl.col("start").is_not_null())
    spans = spans.with_row_index("row").with_columns(pl.col("row").cast(pl.Int64))
    flows = _flows(spans, frame, gpus)
    call_corr = (
        flows.filter(pl.col("call").is_not_null()).group_by("call").agg(corr=pl.col("flow").min())
    )
    op_corr = (
        flows.filter(pl.col("op").is_not_null())
        .join(call_corr, on="call", how="left")
        .select(row="op", corr=pl.coalesce("corr", "flow"), call="call")
    )
    if lost := int(flows["call"].null_count() + flows["op"].null_count()):
        warnings.append(f"{lost} api_op flow ends match no call or op; those links are lost")
    spans = spans.join(
        call_corr.rename({"call": "row"}), on="row", how="left", maintain_order="left"
    )
    spans = spans.join(
        op_corr.rename({"corr": "op_corr"}), on="row", how="left", maintain_order="left"
    )
    calls = spans.select(call="row", call_pid="pid")
    spans = spans.join(calls, on="call", how="left", maintain_order="left")
    on_gpu = pl.col("pid").is_in(gpus)
    parts = _device_parts(spans.filter(on_gpu & (pl.col("ph") == "X")), pool, warnings)
    parts += _host_parts(spans.filter(~on_gpu), pool, warnings)
    return parts, info


def _device_parts(ops: pl.DataFrame, pool: NamePool, warnings: list[str]) -> list[Part]:
    if not ops.height:
        return []
    ops = ops.with_columns(pl.col("desc").fill_null(""))
    desc = pl.col("desc")
    types = ops["desc"].unique().to_list()
    kinds = {t: op_kind(t) for t in types}
    synthetic = pl.col("kernels").is_not_null() | desc.str.starts_with("UserMarker frame")
    known = {t: k for t, k in kinds.items() if k is not None}
    by_type = desc.replace_strict(known, default="kernel", return_dtype=pl.String)
    ops = ops.with_columns(kind=pl.when(synthetic).then(pl.lit("range")).otherwise(by_type))
    unknown = sorted(t for t, k in kinds.items() if k is None and not t.startswith("UserMarker"))
    odd = ops.filter((pl.col("kind") == "kernel") & desc.is_in(unknown)).height
    if odd:
        warnings.append(f"{odd} GPU ops of unknown type {', '.join(unknown)} read as kernels")
    parts = []
    for kind, engine in (*_ENGINE.items(), ("range", None)):
        sel = ops.filter(pl.col("kind") == kind)
        if not sel.height:
            continue
        args = json_args(
            sel,
            Field("op_type", pl.when(pl.col("kind") != "range").then("desc"), STR),
            Field("desc", pl.when(pl.col("kind") == "range").then("desc"), STR),
            Field("kernels", pl.col("kernels").cast(pl.Int64, strict=False), INT),
        )
        dur = durations(sel["start"], sel["start"] + sel["dur_ns"], f"{kind} op", warnings)
        columns = {
            "device": sel["pid"].to_arrow(),
            "stream": sel["tid"].to_arrow(),
            "rank": 0,
            "pid": sel["call_pid"].to_arrow(),
            "corr": sel["op_corr"].to_arrow(),
            "args": args,
        }
        name = pool.from_strings(sel["name"].to_arrow())
        parts.append(Part(kind, sel["start"].to_arrow(), dur, name, engine, columns))
    return parts


def _host_parts(host: pl.DataFrame, pool: NamePool, warnings: list[str]) -> list[Part]:
    if not host.height:
        return []
    desc = pl.col("desc").fill_null("")
    roctx = (desc != "") & (pl.col("name") == desc)
    call = (
        pl.col("name").fill_null("").str.contains(API_NAME.pattern) | pl.col("corr").is_not_null()
    )
    host = host.with_columns(
        kind=pl.when(pl.col("ph") == "i")
        .then(pl.lit("marker"))
        .when(~roctx & call)
        .then(pl.lit("api"))
        .otherwise(pl.lit("range")),
        text=pl.when(~roctx & (desc != "")).then(desc),
    )
    host = host.with_columns(end=pl.col("start") + pl.col("dur_ns"))
    return host_kind_parts(host, pool, warnings)
