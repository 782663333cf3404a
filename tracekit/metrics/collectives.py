"""Collective instances: every communication launch of every rank, keyed so that the same
collective can be found on each rank of its group.

A communication row (``is_comm``, not a task of another row) becomes one *launch*: its
``group`` (what must match across ranks), its ``instance`` within the group, its absolute
start and end (``ts + origin_ns``: ranks loaded apart keep their own origin) and, where the
trace records sizes, its ``bytes``.

How launches are keyed, most specific first:

* a PyTorch ``record_param_comms`` launch (NCCL/RCCL args ``pg_name``, ``collective``):
  group = collective kind @ process group; instance = its ``seq`` where the trace has one,
  else its order within the group and step;
* an HCCL ``hcom_*`` operator (args ``group``): group = operator @ HCCL group, instance =
  order within the group and step (the name's counters are per rank, not shared);
* a fused MoE operator (DeepEP, MC² ``MoeDistributeDispatch``/``Combine``) or any other
  communication kernel: group = its name's label (dispatch and combine stay apart),
  instance = order within the step.

Steps are told apart by the number their label ends in (``ProfilerStep#551``,
``decode_step_7``) where every step of every rank has one, so that ranks whose profiles
start at different iterations still pair the same step; otherwise by the rank's step index,
which assumes that step ``i`` is the same step on every rank (where it is not, the ends of
the paired launches disagree and :mod:`.waits` does not count them). Launches outside steps
are ordered over the whole trace.
"""

from __future__ import annotations

import polars as pl

from tracekit.names import kernel_key, short_name

# The collective kinds by name or by PyTorch's "Collective name" (first match wins).
KINDS = (
    ("all_to_all", r"all_?to_?all|alltoall|dispatch|combine|a2a"),
    ("reduce_scatter", r"reduce_?scatter"),
    ("all_gather", r"all_?gather"),
    ("all_reduce", r"all_?reduce|cross_device_reduce"),
    ("broadcast", r"broadcast|bcast"),
    ("send_recv", r"send_?recv|sendrecv|\bsend\b|\brecv\b|_send|_recv|p2p"),
    ("reduce", r"reduce"),
    ("barrier", r"barrier"),
)
DTYPE_BYTES = (
    (r"complex128|complexdouble|complex_double", 16),
    (r"complex64|complexfloat|complex_float", 8),
    (r"complex32|complexhalf|complex_half", 4),
    (r"float64|double|int64|long|fp64|uint64", 8),
    (r"float32|^float$|fp32|int32|^int$|uint32|tf32", 4),
    (r"bfloat16|bf16|half|float16|fp16|int16|short", 2),
    (r"int8|uint8|byte|char|bool|fp8|float8|hif8", 1),
)
# the args keys a launch is read from (PyTorch's record_param_comms, HCCL)
ARG_KEYS = (
    "pg_name", "collective", "group", "seq", "in_nelems", "out_nelems", "count", "dtype",
    "group_size",
)  # fmt: skip
LAUNCH_COLUMNS = {
    "rank": pl.Int32,
    "device": pl.Int32,
    "step": pl.Int64,
    "group": pl.String,
    "kind": pl.String,
    "instance": pl.String,
    "name": pl.String,
    "start": pl.Int64,
    "end": pl.Int64,
    "bytes": pl.Int64,
    "group_size": pl.Int64,
}


def kind_of(text: pl.Expr) -> pl.Expr:
    """The collective kind (:data:`KINDS`) of a name or collective-name column, or null."""
    low = text.str.to_lowercase()
    out = pl.lit(None, pl.String)
    for kind, pattern in reversed(KINDS):
        out = pl.when(low.str.contains(pattern)).then(pl.lit(kind)).otherwise(out)
    return out


def dtype_bytes(dtype: pl.Expr) -> pl.Expr:
    """Bytes per element of a dtype name (PyTorch ``Float``/``BFloat16``, HCCL ``FP32``…)."""
    low = dtype.str.to_lowercase()
    out = pl.lit(None, pl.Int64)
    for pattern, size in reversed(DTYPE_BYTES):
        out = pl.when(low.str.contains(pattern)).then(pl.lit(size, pl.Int64)).otherwise(out)
    return out


def _fields(rows: pl.DataFrame) -> pl.DataFrame:
    """``rows`` (``_i, args``) with one text column per key of :data:`ARG_KEYS`, each value as
    written in the args; a key no row holds is not looked up (HCCL rows hold 3 of the 9).
    Args repeated from step to step (HCCL operators) are parsed once each."""
    held = rows.select(
        pl.col("args").str.contains(f'"{k}"', literal=True).any().alias(k) for k in ARG_KEYS
    ).row(0, named=True)
    values = [
        (
            pl.col("args").str.json_path_match(f"$.{k}") if held[k] else pl.lit(None, pl.String)
        ).alias(k)
        for k in ARG_KEYS
    ]
    distinct = rows.select(pl.col("args").unique())
    if distinct.height * 2 > rows.height:  # mostly distinct (sequence numbers, ids)
        return rows.select("_i", *values)
    table = distinct.select("args", *values)
    found = rows.select("_i", "args").join(table, on="args", how="left", nulls_equal=True)
    return found.select("_i", *ARG_KEYS)


def _labels(names: pl.Series) -> dict[str, str]:
    return {n: short_name(kernel_key(n), 80) for n in names.unique().drop_nulls().to_list()}


def step_keys(ranges: pl.DataFrame | None) -> pl.DataFrame | None:
    """``rank, step, _key``: the number each step's label ends in, when every step of every
    rank has one and no rank repeats one; else None (the step index is the key)."""
    if ranges is None or ranges.height == 0 or "label" not in ranges.columns:
        return None
    keys = ranges.select(
        "rank",
        pl.col("step").cast(pl.Int64),
        _key=pl.col("label").cast(pl.String).str.extract(r"(\d+)\s*$").cast(pl.Int64),
    )
    if keys["_key"].null_count() or keys.select("rank", "_key").is_duplicated().any():
        return None
    return keys


def launches(
    work: pl.DataFrame, origin_ns: int | None = None, ranges: pl.DataFrame | None = None
) -> pl.DataFrame:
    """One row per communication launch of ``work`` (columns :data:`LAUNCH_COLUMNS`),
    ``start``/``end`` in absolute ns (``ts + origin_ns``); ``ranges`` (the steps' ``rank,
    step, label``) lets steps be paired across ranks by their labels' numbers."""
    rows = work.filter(pl.col("is_comm") & ~pl.col("is_part"))
    if rows.height == 0:
        return pl.DataFrame(schema=LAUNCH_COLUMNS)
    origin = int(origin_ns or 0)
    rows = rows.with_row_index("_i")
    # args are parsed only where they hold one of the keys (a kernel's args rarely do)
    holds = pl.col("args").str.contains('"(?:' + "|".join(ARG_KEYS) + ')"')
    fields = _fields(rows.filter(holds.fill_null(False)).select("_i", "args")).select(
        "_i",
        pg="pg_name",
        coll="collective",
        hccl="group",
        seq="seq",
        nelems=pl.max_horizontal(
            pl.col("in_nelems").cast(pl.Int64, strict=False),
            pl.col("out_nelems").cast(pl.Int64, strict=False),
        ),
        count=pl.col("count").cast(pl.Int64, strict=False),
        dtype="dtype",
        group_size=pl.col("group_size").cast(pl.Int64, strict=False),
    )
    rows = rows.select(
        "_i",
        "rank",
        "device",
        pl.col("step").cast(pl.Int64),
        "is_fused_comm",
        "name",
        start=pl.col("ts") + origin,
        end=pl.col("ts") + pl.col("dur") + origin,
    )
    rows = rows.join(fields, on="_i", how="left", maintain_order="left").drop("_i")
    # label and kind once per distinct name (hundreds of thousands of launches, a few names)
    names = rows.select(pl.col("name").unique())
    text = names["name"].cast(pl.String)
    labels = _labels(text)
    names = names.with_columns(
        label=text.replace_strict(labels, default=text),
        _kind=kind_of(pl.col("name").cast(pl.String)),
    )
    rows = rows.join(names, on="name", how="left", maintain_order="left")
    rows = rows.with_columns(
        name=pl.col("name").cast(pl.String), kind=pl.coalesce(kind_of(pl.col("coll")), "_kind")
    )
    by_pg = pl.col("pg").is_not_null() & ~pl.col("is_fused_comm")
    by_hccl = pl.col("hccl").is_not_null() & ~pl.col("is_fused_comm") & pl.col("pg").is_null()
    rows = rows.with_columns(
        group=pl.when(by_pg)
        .then(pl.format("{} @ pg {}", pl.coalesce("kind", "label"), "pg"))
        .when(by_hccl)
        .then(pl.format("{} @ {}", "label", "hccl"))
        .otherwise("label"),
        bytes=pl.coalesce("nelems", "count") * dtype_bytes(pl.col("dtype")),
    )
    keys = step_keys(ranges)
    if keys is not None:
        rows = rows.join(keys, on=["rank", "step"], how="left")
    else:
        rows = rows.with_columns(_key=pl.col("step"))
    order = pl.int_range(pl.len()).over("rank", "device", "group", "step", order_by="start")
    numbered = pl.format("{}:{}", pl.col("_key").fill_null(-1), order)
    rows = rows.with_columns(
        instance=pl.when(by_pg & pl.col("seq").is_not_null())
        .then(pl.format("seq {}", "seq"))
        .otherwise(numbered)
    )
    return rows.select([pl.col(c).cast(t) for c, t in LAUNCH_COLUMNS.items()]).sort(
        "rank", "start", "group", maintain_order=True
    )


def bus_factor(kind: pl.Expr, ranks: pl.Expr) -> pl.Expr:
    """nccl-tests' bus-bandwidth factor of a collective ``kind`` over ``ranks`` ranks
    (``all_reduce`` 2(n-1)/n; all-gather, reduce-scatter, all-to-all (n-1)/n; others 1)."""
    n = ranks.cast(pl.Float64)
    return (
        pl.when(kind == "all_reduce")
        .then(2 * (n - 1) / n)
        .when(kind.is_in(["all_gather", "reduce_scatter", "all_to_all"]))
        .then((n - 1) / n)
        .otherwise(1.0)
    )
