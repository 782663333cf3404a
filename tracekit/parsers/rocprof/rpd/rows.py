"""Timeline rows of a rocmProfileData file (:class:`~.tables.RpdTables` -> parts).

* ``rocpd_op`` -> device rows: ``KernelExecution`` and ``Task`` (graph nodes) are kernels,
  ``Copy*``/``Memcpy`` copies, ``FillBuffer``/``Memset`` memsets, barriers/markers syncs; the
  name is the op's description (the demangled kernel name), or its type when that is empty
  (copies). device = ``gpuId`` as the tracer wrote it, stream = ``queueId``; the HIP stream,
  launch shape and copy size come from the launching call's ``rocpd_kernelapi`` /
  ``rocpd_copyapi`` row (``rocpd_kernelop`` / ``rocpd_copyop`` in v1) into args.
* ``rocpd_api`` -> host rows: ``UserMarker`` rows are roctx ranges (``marker`` when
  start == end) named by their message; HIP/HSA/CUDA calls (and any call that launched an op)
  are ``api`` rows; anything else (the tracer's own overhead records, ``rpd.rangePush``
  ranges) is a ``range`` named by its api name, its text in args.
* ``corr`` = the API call's id (its roctracer correlation id plus the session offset) on the
  call and on every op it launched (``rocpd_api_ops``; one call may launch many ops, e.g. a
  ``hipGraphLaunch``).
"""

from __future__ import annotations

import re

import numpy as np
import polars as pl

from tracekit.parsers.assemble import Part
from tracekit.parsers.name_pool import NamePool
from tracekit.parsers.rocprof.args import INT, STR, Field, json_args
from tracekit.parsers.rocprof.rpd.tables import RpdTables
from tracekit.parsers.rocprof.table import durations

CLOCK = "CLOCK_MONOTONIC"  # the tracer's clock, in the .rpd and in rpd2tracing's JSON
USER_MARKER = "UserMarker"
KERNEL_TYPES = ("KernelExecution", "Task", "KernelDispatch")
COPY_KINDS = {0: "HtoH", 1: "HtoD", 2: "DtoH", 3: "DtoD", 4: "Default"}  # hipMemcpyKind
API_NAME = re.compile(r"^(hip|__hip|hsa|cuda|__cuda|cu[A-Z]|nccl|rccl|roctx|nvtx)")
API_DOMAINS = ("hip", "hsa", "cuda")
_ENGINE = {"kernel": "sm", "memcpy": "copy", "memset": None, "sync": None}


def op_kind(op_type: str) -> str | None:
    """The timeline kind of an op type, or None when it is not known."""
    if op_type in KERNEL_TYPES:
        return "kernel"
    if op_type.startswith("Copy") or op_type.startswith("Memcpy"):
        return "memcpy"
    if op_type in ("FillBuffer", "Memset") or op_type.startswith("Memset"):
        return "memset"
    if "Barrier" in op_type:
        return "sync"
    return None


def _text_of(strings: pl.DataFrame, ids: pl.Series) -> pl.Series:
    """The strings of ``ids`` (null where unknown), looked up once per distinct id."""
    return ids.replace_strict(
        strings["id"], strings["string"], default=None, return_dtype=pl.String
    )


def device_parts(t: RpdTables, pool: NamePool, warnings: list[str]) -> list[Part]:
    """One part per kind of op, each with its launch link and arguments."""
    if not t.op.height:
        return []
    launch = t.links.group_by("op_id").agg(pl.col("api_id").min())
    op = t.op.join(launch.rename({"op_id": "id"}), on="id", how="left", maintain_order="left")
    op = op.join(
        t.api.select(api_id="id", pid="pid"), on="api_id", how="left", maintain_order="left"
    )
    if unlinked := int(op["api_id"].null_count()):
        warnings.append(f"{unlinked} device ops without a launching API call (rocpd_api_ops)")
    types = op["type_id"].unique()
    names = _text_of(t.strings, types).fill_null("").to_list()
    kinds = {i: op_kind(n) for i, n in zip(types.to_list(), names)}
    if unknown := sorted({n for n, k in zip(names, kinds.values()) if k is None}):
        count = int(op["type_id"].is_in([i for i, k in kinds.items() if k is None]).sum())
        warnings.append(f"{count} ops of unknown type {', '.join(unknown)} read as kernels")
    op = op.with_columns(
        kind=pl.col("type_id").replace_strict(
            {i: k or "kernel" for i, k in kinds.items()}, return_dtype=pl.String
        ),
        op_type=_text_of(t.strings, op["type_id"]),
        description=_text_of(t.strings, op["description_id"]),
    )
    key = "id" if t.args_key == "op_id" else "api_id"
    parts = []
    for kind, engine in _ENGINE.items():
        sel = op.filter(pl.col("kind") == kind)
        if not sel.height:
            continue
        extra = t.copy_args if kind in ("memcpy", "memset") else t.kernel_args
        if extra is not None and extra.height:
            extra = extra.unique(t.args_key, keep="first", maintain_order=True)
            extra = extra.rename(
                {t.args_key: key, **({"kind": "memcpy_kind"} if "kind" in extra.columns else {})}
            )
            sel = sel.join(extra, on=key, how="left", maintain_order="left")
        name = pl.when(pl.col("description") != "").then("description").otherwise("op_type")
        sel = sel.with_columns(name=name)
        dur = durations(sel["start"], sel["end"], f"{kind} op", warnings)
        columns = {
            "device": sel["gpu"].to_arrow(),
            "stream": sel["queue"].to_arrow(),
            "rank": 0,
            "pid": sel["pid"].to_arrow(),
            "corr": sel["api_id"].to_arrow(),
            "args": _op_args(sel, kind),
        }
        parts.append(
            Part(
                kind,
                sel["start"].to_arrow(),
                dur,
                pool.from_strings(sel["name"].to_arrow()),
                engine,
                columns,
            )
        )
    return parts


def _op_args(sel: pl.DataFrame, kind: str) -> object:
    has = set(sel.columns)
    fields = [Field("op_type", "op_type", STR, True)]
    if kind == "kernel":
        for key, cols in (
            ("grid", ("gridX", "gridY", "gridZ")),
            ("workgroup", ("workgroupX", "workgroupY", "workgroupZ")),
        ):
            if set(cols) <= has:
                fields.append(
                    Field(key, tuple(pl.col(c).cast(pl.Int64, strict=False) for c in cols), INT)
                )
        for key, col in (("lds", "groupSegmentSize"), ("scratch", "privateSegmentSize")):
            if col in has:
                fields.append(Field(key, pl.col(col).cast(pl.Int64, strict=False)))
    elif "size" in has:
        fields.append(Field("bytes", pl.col("size").cast(pl.Int64, strict=False)))
    if kind != "kernel" and "memcpy_kind" in has:
        direction = (
            pl.col("memcpy_kind")
            .cast(pl.Int64, strict=False)
            .replace_strict(COPY_KINDS, default=None, return_dtype=pl.String)
        )
        fields.append(Field("copy_kind", direction, STR))
    if "stream" in has:
        fields.append(Field("hip_stream", pl.col("stream").cast(pl.String), STR))
    return json_args(sel, *fields)


def host_parts(t: RpdTables, pool: NamePool, warnings: list[str]) -> list[Part]:
    """API calls, roctx ranges and marks, and the other host records of ``rocpd_api``."""
    api = t.api
    if not api.height:
        return []
    ids = api["name_id"].unique()
    texts = _text_of(t.strings, ids).fill_null("")
    is_api = {i: bool(API_NAME.match(s)) for i, s in zip(ids.to_list(), texts.to_list())}
    marker_ids = [i for i, s in zip(ids.to_list(), texts.to_list()) if s == USER_MARKER]
    call = pl.col("name_id").replace_strict(is_api, return_dtype=pl.Boolean)
    if "domain_id" in api.columns:
        domains = t.strings.filter(pl.col("string").is_in(API_DOMAINS))["id"]
        call = call | pl.col("domain_id").is_in(domains.implode())
    launched = pl.col("id").is_in(t.links["api_id"].unique().implode())
    user = pl.col("name_id").is_in(marker_ids)
    api = api.with_columns(
        code=pl.when(~user & (call | launched))
        .then(0)
        .when(pl.col("start") == pl.col("end"))
        .then(2)
        .otherwise(1),
        label=pl.when(user)
        .then(pl.col("args").fill_null(""))
        .otherwise(_text_of(t.strings, api["name_id"])),
        text=pl.when(~user & (pl.col("args") != "")).then("args"),
    )
    api = api.with_columns(kind=pl.col("code").replace_strict([0, 1, 2], HOST_KINDS))
    return host_kind_parts(api.rename({"id": "corr", "label": "name"}), pool, warnings)


HOST_KINDS = ("api", "range", "marker")


def host_kind_parts(host: pl.DataFrame, pool: NamePool, warnings: list[str]) -> list[Part]:
    """Host rows by ``kind`` (api / range / marker): columns ``kind``, ``name``, ``start``,
    ``end``, ``pid``, ``tid``, ``corr`` (kept on api rows) and ``text`` (the args text)."""
    parts = []
    for kind in HOST_KINDS:
        sel = host.filter(pl.col("kind") == kind)
        if not sel.height:
            continue
        if kind == "marker":
            dur: object = np.zeros(sel.height, dtype=np.int64)
        else:
            dur = durations(sel["start"], sel["end"], kind, warnings)
        columns = {
            "device": -1,
            "rank": 0,
            "pid": sel["pid"].to_arrow(),
            "tid": sel["tid"].to_arrow(),
            "corr": sel["corr"].to_arrow() if kind == "api" else None,
            "args": json_args(sel, Field("args", "text", STR)),
        }
        name = pool.from_strings(sel["name"].to_arrow())
        parts.append(Part(kind, sel["start"].to_arrow(), dur, name, None, columns))
    return parts
