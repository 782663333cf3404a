"""Best-effort rows from Perfetto traces tracekit did not write.

Tracks map to timeline fields as follows (for files tracekit wrote, every field is exact):

* a track bound to a thread (thread descriptor, itself or an ancestor) holds host rows with
  its pid/tid; a process track gives the pid;
* otherwise a track whose name (or an ancestor's) says GPU, NPU, queue, stream, device or
  agent holds device rows: the device is the number after GPU/NPU/device/agent
  ("COMPUTE AGENT [1] STREAM [3]" of rocprofv3 -> device 1, stream 3), the stream the number
  after queue/stream; a missing device number becomes 0 and a missing stream stays null,
  both counted in the warnings;
* any other track holds host rows; a rank comes from "rank N" in a name, else 0; the
  "(12345)" of a rocprofv3 "THREAD n (12345)" track is its tid.

Kinds: a category that is a tracekit kind is kept; instants are markers; other categories
map as rocprofv3 and Kineto name them (kernel_dispatch, memory_copy, hip_api, hsa_api,
rccl_api, marker_api, cpu_op, ...); what is left is a kernel on a device track (memcpy or
memset when the name says so) and a range on a host track. A ``corr_id`` or
``correlation_id`` annotation (else the event's correlation id) becomes ``corr``; the other
annotations are kept as ``args`` JSON (interned names inside nested dicts stay "argN").
"""

from __future__ import annotations

import re
from typing import Any

import polars as pl

from tracekit.parsers.perfetto.read import TrackInfo
from tracekit.pftrace.schema import INSTANT
from tracekit.timeline import KINDS

_DEVICE_WORDS = re.compile(r"\b(?:gpu|npu|queue|stream|device|agent)\b", re.IGNORECASE)
_DEVICE_NUM = re.compile(r"\b(?:gpu|npu|device|agent)\s*[\[#:(]?\s*(\d+)", re.IGNORECASE)
_STREAM_NUM = re.compile(r"\b(?:queue|stream)\s*[\[#:(]?\s*(\d+)", re.IGNORECASE)
_RANK_NUM = re.compile(r"\brank\s*[\[#:(]?\s*(\d+)", re.IGNORECASE)
_TID_SUFFIX = re.compile(r"^thread\b.*\((\d+)\)\s*$", re.IGNORECASE)
CATEGORY_KINDS = {
    "kernel_dispatch": "kernel",
    "gpu_kernel": "kernel",
    "cuda_kernel": "kernel",
    "memory_copy": "memcpy",
    "gpu_memcpy": "memcpy",
    "gpu_memset": "memset",
    "hip_api": "api",
    "hsa_api": "api",
    "rccl_api": "api",
    "rocdecode_api": "api",
    "rocjpeg_api": "api",
    "cuda_runtime": "api",
    "cuda_driver": "api",
    "runtime": "api",
    "marker_api": "range",
    "nvtx": "range",
    "roctx": "range",
    "user_annotation": "range",
    "gpu_user_annotation": "range",
    "cpu_op": "op",
    "operator": "op",
}
ROCPROF_CATEGORIES = (
    "kernel_dispatch",
    "memory_copy",
    "hip_api",
    "hsa_api",
    "rccl_api",
    "marker_api",
)
CORR_KEYS = ("corr_id", "correlation_id", "corr", "correlation")


def _chain(tracks: dict[int, TrackInfo], key: int | None) -> list[TrackInfo]:
    """The track and its ancestors (cycles and unknown parents end the walk)."""
    chain: list[TrackInfo] = []
    seen: set[int] = set()
    while key is not None and key not in seen and key in tracks and len(chain) < 64:
        seen.add(key)
        chain.append(tracks[key])
        key = tracks[key].parent
    return chain


def _first(pattern: re.Pattern[str], names: list[str]) -> int | None:
    for name in names:
        match = pattern.search(name)
        if match:
            return int(match.group(1))
    return None


class Tracks:
    """Timeline fields (rank, device, stream, pid, tid) guessed for foreign tracks."""

    def __init__(self, tracks: dict[int, TrackInfo]) -> None:
        self.tracks = tracks
        self.guessed_device = 0
        self.no_stream = 0

    def fields(self, key: int) -> tuple[tuple[Any, ...], bool]:
        """(rank, device, stream, pid, tid) of a track and whether it holds device rows."""
        chain = _chain(self.tracks, key)
        names = [info.name for info in chain if info.name]
        pid = next((i.pid for i in chain if i.pid is not None), None)
        tid = next((i.tid for i in chain if i.tid is not None), None)
        rank = _first(_RANK_NUM, names) or 0
        if tid is None and any(_DEVICE_WORDS.search(n) for n in names):
            device = _first(_DEVICE_NUM, names)
            stream = _first(_STREAM_NUM, names)
            self.guessed_device += device is None
            self.no_stream += stream is None
            return (rank, device or 0, stream, pid, None), True
        if tid is None and names:
            tid = _first(_TID_SUFFIX, names[:1])
        return (rank, -1, None, pid, tid), False

    def warnings(self) -> list[str]:
        out = []
        if self.guessed_device:
            out.append(
                f"{self.guessed_device} GPU-queue-like tracks name no device number;"
                " device 0 assumed"
            )
        if self.no_stream:
            out.append(
                f"{self.no_stream} GPU-queue-like tracks name no queue/stream number;"
                " stream left null"
            )
        return out


def kinds() -> pl.Expr:
    """Kind of a foreign row from its category, type, track and name."""
    cat = pl.col("cat")
    lowered = pl.col("name").fill_null("").str.to_lowercase()
    return (
        pl.when(cat.is_in(KINDS))
        .then(cat)
        .when(pl.col("type") == INSTANT)
        .then(pl.lit("marker"))
        .when(cat.str.to_lowercase().is_in(list(CATEGORY_KINDS)))
        .then(cat.str.to_lowercase().replace_strict(CATEGORY_KINDS, default=None))
        .when(~pl.col("on_device"))
        .then(pl.lit("range"))
        .when(lowered.str.contains("memset"))
        .then(pl.lit("memset"))
        .when(lowered.str.contains("memcpy|copy"))
        .then(pl.lit("memcpy"))
        .otherwise(pl.lit("kernel"))
    )


def _escaped(col: pl.Expr) -> pl.Expr:
    """JSON string literal of a text column."""
    return pl.struct(col.alias("v")).struct.json_encode().str.slice(5).str.head(-1)


def annotations(notes: pl.DataFrame, corr: pl.DataFrame) -> pl.DataFrame:
    """Per event: ``corr`` from a correlation annotation, ``args`` JSON of the others."""
    priority = {k: i for i, k in enumerate(CORR_KEYS)}
    notes = notes.with_row_index("_i")
    is_int = pl.col("kind").is_in([2, 3])
    picked = (
        notes.filter(pl.col("name").is_in(CORR_KEYS) & is_int)
        .with_columns(_p=pl.col("name").replace_strict(priority, return_dtype=pl.Int64))
        .sort("ev", "_p")
        .unique("ev", keep="first")
        .select(
            "ev",
            "_i",
            corr_note=pl.when(pl.col("kind") == 2)
            .then(pl.col("uint").cast(pl.Int64))
            .otherwise("int"),
        )
    )
    text = pl.col("str")
    value = (
        pl.when(pl.col("kind") == 1)
        .then(pl.when(pl.col("uint") > 0).then(pl.lit("true")).otherwise(pl.lit("false")))
        .when(pl.col("kind").is_in([2, 5]))
        .then(pl.col("uint").cast(pl.String))
        .when(pl.col("kind") == 3)
        .then(pl.col("int").cast(pl.String))
        .when(pl.col("kind") == 4)
        .then(pl.when(pl.col("double").is_finite()).then(pl.col("double").cast(pl.String)))
        .when((pl.col("kind") == 7) & text.str.contains(r"^\s*[\[{][\s\S]*[\]}]\s*$"))
        .then(text)
        .when(pl.col("kind") == 9)
        .then(text)
        .when(pl.col("kind").is_in([6, 7]))
        .then(_escaped(text))
    ).fill_null("null")
    args = (
        notes.join(picked.select("_i"), on="_i", how="anti")
        .sort("_i")
        .select("ev", frag=pl.concat_str(_escaped(pl.col("name")), pl.lit(":"), value))
        .group_by("ev", maintain_order=True)
        .agg(args=pl.concat_str(pl.lit("{"), pl.col("frag").str.join(","), pl.lit("}")))
    )
    out = corr.join(picked.select("ev", "corr_note"), on="ev", how="left").join(
        args, on="ev", how="left"
    )
    return out.select(
        "ev",
        corr=pl.coalesce("corr_note", pl.when(pl.col("corr") != 0).then("corr")),
        args=pl.col("args"),
    )
