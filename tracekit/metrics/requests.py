"""Per-request latency of a serving trace: time to first token (TTFT) and time per output
token (TPOT) from the service spans (msServiceProfiler's ``httpReq`` and the engine
iterations whose batch lists the request), or from the request rows of its ``request.csv``.

A request arrives at the start of its ``httpReq`` span; its first token is out at the end of
the first engine iteration holding it (its prefill), its last at the end of the last one;
it produced ``replyTokenSize=`` tokens where the trace says so, else one per iteration.
TPOT = (last - first token) / (tokens - 1), for requests of more than one token.
"""

from __future__ import annotations

from typing import Any

import polars as pl

ITERATIONS = ("modelExec", "modelRunnerExec")  # one span per executed batch
BATCHING = ("BatchSchedule", "batchFrameworkProcessing", "Execute")  # when no iteration spans
ARRIVALS = ("httpReq",)
REQUEST_ROW = "request"  # one row per request read from request.csv / the request table
COLUMNS = {
    "rid": pl.String,
    "arrival": pl.Int64,
    "first_token": pl.Int64,
    "last_token": pl.Int64,
    "output_tokens": pl.Int64,
    "ttft_ns": pl.Int64,
    "tpot_ns": pl.Float64,
}
_RID = r'"rid"\s*:\s*(?:"[^"]*"|-?[0-9][0-9.]*)'


def _request_ids(rows: pl.DataFrame) -> pl.DataFrame:
    """One row per (row, request it names): the ``rid`` values in its args (a batch's
    ``res_list`` entries, an early span's ``rid``) and a single request's ``res_list`` text."""
    args = pl.col("args").cast(pl.String)
    listed = args.str.extract_all(_RID).list.eval(
        pl.element().str.replace(r'^"rid"\s*:\s*', "").str.strip_chars('"')
    )
    single = args.str.extract(r'"res_list"\s*:\s*"([^"]*)"')
    batches = rows.with_columns(_rid=listed).explode("_rid")
    alone = rows.with_columns(_rid=single.str.split(",")).explode("_rid")
    ids = pl.concat([batches, alone])
    clean = pl.col("_rid").str.strip_chars().str.replace(r"^(-?\d+)\.0+$", "${1}")
    return ids.with_columns(rid=clean).filter(pl.col("rid").is_not_null() & (pl.col("rid") != ""))


def _empty() -> pl.DataFrame:
    return pl.DataFrame(schema=COLUMNS)


def _from_request_rows(rows: pl.DataFrame) -> pl.DataFrame:
    """Latency of the request rows read from ``request.csv`` (times in ms there)."""
    args = pl.col("args").cast(pl.String)

    def number(key: str) -> pl.Expr:
        return args.str.json_path_match(f"$.{key}").cast(pl.Float64, strict=False)

    ttft = (number("first_token_latency") * 1e6).round().cast(pl.Int64)
    tokens = number("reply_token_size").cast(pl.Int64)
    out = rows.select(
        rid=args.str.json_path_match("$.rid"),
        arrival=pl.col("ts"),
        first_token=pl.col("ts") + ttft,
        last_token=pl.col("ts") + pl.col("dur"),
        output_tokens=tokens,
        ttft_ns=ttft,
    )
    return _with_tpot(out)


def _with_tpot(frame: pl.DataFrame) -> pl.DataFrame:
    gap = (pl.col("last_token") - pl.col("first_token")).cast(pl.Float64)
    tpot = pl.when(pl.col("output_tokens") > 1).then(gap / (pl.col("output_tokens") - 1))
    return frame.with_columns(tpot_ns=tpot).select(list(COLUMNS)).cast(COLUMNS)  # type: ignore[arg-type]


def request_latency(rows: pl.DataFrame) -> pl.DataFrame:
    """Per request: ``rid``, ``arrival``, ``first_token``, ``last_token`` (ns), the
    ``output_tokens``, ``ttft_ns`` and ``tpot_ns`` (null where the spans do not give it);
    empty when the trace has no request spans."""
    if not rows.height or "args" not in rows.columns:
        return _empty()
    # most traces hold no request span: said by the distinct names, before any row is copied
    distinct = rows.get_column("name").unique().cast(pl.String)
    if not distinct.is_in([*ARRIVALS, REQUEST_ROW]).any():
        return _empty()
    host = rows.filter(pl.col("device").fill_null(-1) < 0)
    names = host.get_column("name").cast(pl.String)
    if not names.is_in(ARRIVALS).any():
        requests = host.filter(names == REQUEST_ROW)
        return _from_request_rows(requests).sort("arrival") if requests.height else _empty()
    iteration = ITERATIONS if names.is_in(ITERATIONS).any() else BATCHING
    wanted = host.filter(
        names.is_in([*ARRIVALS, *iteration]) | pl.col("args").str.contains("replyTokenSize=")
    )
    ids = _request_ids(wanted.select("ts", "dur", "name", "args")).with_columns(
        name=pl.col("name").cast(pl.String), end=pl.col("ts") + pl.col("dur")
    )
    arrivals = (
        ids.filter(pl.col("name").is_in(ARRIVALS)).group_by("rid").agg(arrival=pl.col("ts").min())
    )
    steps = (
        ids.filter(pl.col("name").is_in(iteration))
        .group_by("rid")
        .agg(
            first_token=pl.col("end").min(),
            last_token=pl.col("end").max(),
            iterations=pl.col("end").n_unique(),
        )
    )
    reply = ids.group_by("rid").agg(
        said=pl.col("args").str.extract(r'"replyTokenSize="\s*:\s*"?(\d+)').cast(pl.Int64).max()
    )
    out = (
        arrivals.join(steps, on="rid", how="left")
        .join(reply, on="rid", how="left")
        .with_columns(
            output_tokens=pl.coalesce("said", "iterations"),
            ttft_ns=pl.col("first_token") - pl.col("arrival"),
        )
    )
    return _with_tpot(out).sort("arrival", "rid")


def request_summary(latency: pl.DataFrame) -> dict[str, Any]:
    """``count`` of requests, and the median and p90 (linear) of TTFT and TPOT in ns."""

    def spread(column: str) -> dict[str, float | None]:
        values = latency.get_column(column).drop_nulls().cast(pl.Float64)
        if not values.len():
            return {"median": None, "p90": None}
        return {
            "median": float(values.median()),  # type: ignore[arg-type]
            "p90": float(values.quantile(0.9, "linear")),  # type: ignore[arg-type]
        }

    return {"count": latency.height, "ttft_ns": spread("ttft_ns"), "tpot_ns": spread("tpot_ns")}
