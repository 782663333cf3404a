"""What the ``transfers`` rule knows of each copy row: its direction, bytes, host memory, the
call site that launched it, and the peak bandwidth of the link it crossed
(``tracekit/data/links.toml``).

Where each format puts them (the parsers keep what the profiler recorded):

* Nsight Systems (CUPTI ``MEMCPY``): name ``Memcpy HtoD (Pinned -> Device)``, args ``bytes``
  and ``copy_kind`` (HtoD, DtoH, DtoD, PtoP, HtoH, the array and UVM kinds);
* Kineto: name ``Memcpy DtoH (Device -> Pageable)`` (ROCm: ``(Device -> Host)``), args
  ``bytes``;
* rocprofiler-sdk (v3 CSV / JSON, rocpd): name ``MEMORY_COPY_HOST_TO_DEVICE``, args ``bytes``
  where the output has it and the two ends (``src_agent`` / ``dst_agent``, ``src_device`` /
  ``dst_device``, ``src`` / ``dst``); legacy rocprof and rpd: ``CopyHostToDevice``, rpd args
  ``bytes`` and ``copy_kind``;
* Ascend (msprof, torch_npu): ``MEMCPY_ASYNC`` tasks (``PCIE_DMA_SQE`` / ``SDMA_SQE`` …)
  with neither bytes nor direction; torch_npu names the launching node
  ``acl_memcpy_host_to_device``, which gives the direction where it is linked.

A direction none of these gives is ``unknown``; bytes are never guessed.
"""

from __future__ import annotations

import re
import sys
from functools import cache
from importlib import resources
from typing import Any

import polars as pl

from tracekit.errors import TraceError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

DIRECTIONS = ("h2d", "d2h", "d2d", "peer", "h2h", "unknown")
HOST_LINK = ("h2d", "d2h")  # the directions that cross the host link
# nsys copyKind / rpd hipMemcpyKind names (as the parsers write them) -> direction
COPY_KINDS = {
    "HtoD": "h2d", "DtoH": "d2h", "DtoD": "d2d", "PtoP": "peer", "HtoH": "h2h",
    "HtoA": "h2d", "AtoH": "d2h", "AtoA": "d2d", "AtoD": "d2d", "DtoA": "d2d",
    "UVM HtoD": "h2d", "UVM DtoH": "d2h", "UVM DtoD": "d2d",
}  # fmt: skip
# direction words in copy and call-site names, first match wins
_WORDS = (
    ("peer", r"(?i)ptop|peer|p2p"),
    ("h2d", r"(?i)htod|host_?to_?device|\bh2d\b"),
    ("d2h", r"(?i)dtoh|device_?to_?host|\bd2h\b"),
    ("d2d", r"(?i)dtod|device_?to_?device|\bd2d\b"),
    ("h2h", r"(?i)htoh|host_?to_?host"),
)
_ENDS = (("src_device", "dst_device"), ("src_agent", "dst_agent"), ("src", "dst"))
SITE_WIDTH = 120
_ENCLOSING_TRIES = 3  # as-of steps past finished sibling ops when looking for the enclosing op


def _by_words(text: pl.Expr) -> pl.Expr:
    """The direction its words name, or null."""
    out = pl.lit(None, pl.String)
    for direction, regex in reversed(_WORDS):
        out = pl.when(text.str.contains(regex)).then(pl.lit(direction)).otherwise(out)
    return out


def _arg(key: str) -> pl.Expr:
    return pl.col("args").str.json_path_match(f"$.{key}")


def attributes(copies: pl.DataFrame) -> pl.DataFrame:
    """``copies`` (memcpy rows with ``name``, ``args`` and a ``site`` column, maybe null) with
    ``direction`` (one of :data:`DIRECTIONS`), ``bytes`` (null where the trace has none) and
    ``pageable`` (the host side is pageable memory, where the name says so)."""
    name = pl.col("name").cast(pl.String).fill_null("")
    site = pl.col("site").fill_null("")
    by_kind = _arg("copy_kind").replace_strict(COPY_KINDS, default=None, return_dtype=pl.String)
    direction = pl.coalesce(by_kind, _by_words(name), _by_words(site), pl.lit("unknown"))
    ends = [(_arg(a), _arg(b)) for a, b in _ENDS]
    src = pl.coalesce(*(a for a, _ in ends))
    dst = pl.coalesce(*(b for _, b in ends))
    to_peer = (pl.col("direction") == "d2d") & (pl.col("_src") != pl.col("_dst")).fill_null(False)
    return (
        copies.with_columns(
            direction=direction,
            _src=src,
            _dst=dst,
            bytes=_arg("bytes").cast(pl.Int64, strict=False),
            pageable=name.str.contains("(?i)pageable"),
        )
        .with_columns(direction=pl.when(to_peer).then(pl.lit("peer")).otherwise("direction"))
        .drop("_src", "_dst")
    )


def call_sites(rows: pl.DataFrame, copies: pl.DataFrame) -> pl.DataFrame:
    """``rank, corr, site`` for the copies' launches: the framework op linked to the copy by
    (rank, corr) (torch_npu) or else the innermost op around the launching API call on its
    thread (Kineto), then ``→`` and the API call (``aten::copy_ → cudaMemcpyAsync``); the
    API call alone where no op is known. Copies without a launch link have none."""
    keys = copies.select(pl.col("rank").fill_null(0).cast(pl.Int32), "corr").drop_nulls()
    keys = keys.unique()
    empty = pl.DataFrame(schema={"rank": pl.Int32, "corr": pl.Int64, "site": pl.String})
    if not keys.height:
        return empty
    host = (
        rows.lazy()
        .filter(pl.col("kind").is_in(["api", "op"]) & pl.col("corr").is_not_null())
        .select(
            pl.col("rank").fill_null(0).cast(pl.Int32),
            pl.col("corr").cast(pl.Int64),
            pl.col("kind").cast(pl.String),
            pl.col("name").cast(pl.String),
            "ts",
            _end=pl.col("ts") + pl.col("dur"),
            pid=pl.col("pid").fill_null(-1),
            tid=pl.col("tid").fill_null(-1),
        )
        .join(keys.lazy(), on=["rank", "corr"], how="semi")
        .sort("ts")
        .collect()
    )
    if not host.height:
        return empty
    linked = host.filter(pl.col("kind") == "op").unique(["rank", "corr"], keep="first")
    api = host.filter(pl.col("kind") == "api").unique(["rank", "corr"], keep="first")
    api = api.join(_enclosing(rows, api), on=["rank", "corr"], how="left")
    out = (
        keys.join(linked.select("rank", "corr", _linked="name"), on=["rank", "corr"], how="left")
        .join(api.select("rank", "corr", _api="name", _op="_op"), on=["rank", "corr"], how="left")
        .select(
            "rank",
            "corr",
            site=pl.concat_str(
                [pl.coalesce("_linked", "_op"), pl.col("_api")], separator=" → ", ignore_nulls=True
            ),
        )
    )
    return out.with_columns(
        pl.when(pl.col("site") != "").then(pl.col("site").str.slice(0, SITE_WIDTH))
    ).filter(pl.col("site").is_not_null())


def _enclosing(rows: pl.DataFrame, api: pl.DataFrame) -> pl.DataFrame:
    """``rank, corr, _op``: the innermost framework op on the API call's thread that holds
    the call. An as-of join finds the latest op starting before the call; when that op has
    already ended (a finished sibling), the search steps back past it, a few times."""
    threads = api.select("rank", "pid", "tid").unique()
    ops = (
        rows.lazy()
        .filter(pl.col("kind") == "op")
        .select(
            pl.col("rank").fill_null(0).cast(pl.Int32),
            pid=pl.col("pid").fill_null(-1),
            tid=pl.col("tid").fill_null(-1),
            _ots=pl.col("ts"),
            _oend=pl.col("ts") + pl.col("dur"),
            _oname=pl.col("name").cast(pl.String),
        )
        .join(threads.lazy(), on=["rank", "pid", "tid"], how="semi")
        .sort("_ots", pl.col("_oend"), descending=[False, True])  # innermost last on a tie
        .collect()
    )
    found = pl.DataFrame(schema={"rank": pl.Int32, "corr": pl.Int64, "_op": pl.String})
    if not ops.height:
        return found
    pending = api.select("rank", "corr", "pid", "tid", "ts", "_end", _at="ts")
    parts = []
    for _ in range(_ENCLOSING_TRIES):
        hit = pending.sort("_at").join_asof(
            ops,
            left_on="_at",
            right_on="_ots",
            by=["rank", "pid", "tid"],
            strategy="backward",
            check_sortedness=False,
        )
        holds = pl.col("_oend") >= pl.col("_end")
        parts.append(hit.filter(holds).select("rank", "corr", _op="_oname"))
        pending = hit.filter(pl.col("_ots").is_not_null() & ~holds).select(
            "rank", "corr", "pid", "tid", "ts", "_end", _at=pl.col("_ots") - 1
        )
        if not pending.height:
            break
    return pl.concat([found, *parts], how="vertical_relaxed")


@cache
def link_table() -> dict[str, Any]:
    """``tracekit/data/links.toml``: ``links`` (id -> name, gbps, source) and ``devices``
    (match, host, peer), read once."""
    text = resources.files("tracekit.data").joinpath("links.toml").read_text("utf-8")
    return tomllib.loads(text)


def link(link_id: str, option: str) -> dict[str, Any]:
    """The link ``link_id`` of the table; a :class:`TraceError` naming the known ones when
    the user gave an unknown one (in ``option``)."""
    links = link_table()["links"]
    if link_id not in links:
        raise TraceError(
            f"rule transfers: option {option} = {link_id!r} is no known link; known: "
            f"{', '.join(links)}"
        )
    return {"id": link_id, **links[link_id]}


def device_links(meta: dict[str, Any], host: str = "", peer: str = "") -> pl.DataFrame:
    """Per device of the trace's metadata: ``device``, ``device_name``, the peak GB/s of its
    host link and peer link (``host_gbps``, ``peer_gbps``) and their names (null where the
    device matches no entry of the table); ``host`` / ``peer`` name a link for every device
    instead (the rule's options)."""
    table = link_table()
    given = {"host": link(host, "link") if host else None}
    given["peer"] = link(peer, "peer_link") if peer else None
    out: list[dict[str, Any]] = []
    for dev in meta.get("devices") or []:
        if not isinstance(dev, dict) or dev.get("index") is None:
            continue
        name = str(dev.get("name") or "")
        found = (d for d in table["devices"] if name and re.search(d["match"], name, re.I))
        entry = next(found, {})
        row: dict[str, Any] = {"device": int(dev["index"]), "device_name": name or None}
        for end in ("host", "peer"):
            chosen = given[end] or (link(entry[end], end) if entry.get(end) else None)
            row[f"{end}_gbps"] = chosen["gbps"] if chosen else None
            row[f"{end}_link"] = chosen["name"] if chosen else None
        out.append(row)
    schema = {
        "device": pl.Int32,
        "device_name": pl.String,
        "host_gbps": pl.Float64,
        "host_link": pl.String,
        "peer_gbps": pl.Float64,
        "peer_link": pl.String,
    }
    return pl.DataFrame(out, schema=schema).unique("device", keep="first", maintain_order=True)
