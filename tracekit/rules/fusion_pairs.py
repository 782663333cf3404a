"""Unfused GEMM + collective pairs: a GEMM and a collective in dependency order on one device,
the fused operator that fits each pair, and whether its shapes are large enough for fusion to
pay off. Used by rule ``mc2`` (:mod:`tracekit.rules.mc2`).

A pair is a collective (communication, not fused, not one task of another row) and a GEMM
in order with it: the GEMM right before or right after it on its stream, else the GEMM on its
device that ended last before it started or started first after it ended — one *ends* before
the other *starts*, within the gap: a GEMM that runs while the collective runs (on another
stream) is no pair, there is nothing to fuse. Rows that are one task of another row
(:func:`tracekit.timeline.is_part`: an HCCL collective's Notify Wait, SDMA and Write Value
tasks) are never neighbours: the search looks past them. Grouped MoE GEMMs
(:data:`GROUPED_GEMM`) count as GEMMs.
"""

from __future__ import annotations

import re

import polars as pl

from tracekit.intervals import same_group, sort_key
from tracekit.model import Context
from tracekit.rules.patterns import collective

_KERNEL_LIKE = ("kernel", "comm")
# Grouped (per-expert) GEMMs, whatever category the taxonomy gives them (``moe`` mostly):
# CANN GroupedMatmul, CUTLASS grouped GEMM (GroupProblemShape), Triton fused_moe_kernel,
# AITER / CK fused-MoE GEMMs (fmoe, ck_moe ... gemm), TensorRT-LLM MoeGemm.
GROUPED_GEMM = (
    r"(?i)grouped_?mat_?mul|grouped_?gemm|group_gemm|GroupProblemShape|fused_moe_kernel"
    r"|\bfmoe|moe_?gemm|moe\w*_gemm|ck_moe"
)

# Shapes that are too small for a fused matmul + collective operator to pay off. CANN's MC²
# operators (ops-transformer mc2/common/op_host/op_tiling: FormPartition in
# hccl_formulaic_tiling.h) pipeline the communication with the matmul by cutting the rows (m)
# of the matmul into tiles of at least BASE_BLOCK_M = 128 rows (matmul_formulaic_tiling.h),
# starting from "no cut": with fewer than two tiles' rows there is a single tile, so the
# communication cannot overlap any matmul work and the fused operator runs the two one after
# the other. AllGatherMatmul and MatmulReduceScatter also take k only in [256, 65535)
# (aclnnAllGatherMatmul / torch_npu.npu_mm_reduce_scatter_base constraints).
TILE_ROWS = 128
MIN_ROWS = 2 * TILE_ROWS
K_RANGE = (256, 65535)
SHAPE_SOURCES = {
    "ascend": "CANN MC² tiling cuts the matmul's rows into tiles of at least 128 "
    "(ops-transformer hccl_formulaic_tiling.h / matmul_formulaic_tiling.h BASE_BLOCK_M): "
    f"below {MIN_ROWS} rows there is one tile and nothing to overlap",
    None: "a fused GEMM + collective kernel overlaps them by cutting the GEMM's rows into "
    "chunks, one per peer or per communication tile (PyTorch's fused all-gather / "
    "reduce-scatter matmul in torch.distributed._symmetric_memory: one chunk per rank), "
    f"each worth at least one {TILE_ROWS}-row GEMM tile: below {MIN_ROWS} rows there is "
    "one tile and nothing to overlap",
}


def is_gemm() -> pl.Expr:
    """True for a GEMM row: category ``gemm``, or a grouped MoE GEMM by name."""
    return (pl.col("category") == "gemm") | pl.col("name").cast(pl.String).str.contains(
        GROUPED_GEMM
    ).fill_null(False)


def step_pairs(ctx: Context, max_gap_ns: int) -> pl.DataFrame:
    """:func:`unfused_pairs` of the context's work rows placed in steps, computed once per
    context and gap (rules ``mc2`` and ``overlap`` both read them)."""
    work = ctx.work.lazy().filter(pl.col("step").is_not_null())
    return ctx.shared(("unfused_pairs", max_gap_ns), lambda: unfused_pairs(work, max_gap_ns))


def unfused_pairs(work: pl.DataFrame | pl.LazyFrame, max_gap_ns: int) -> pl.DataFrame:
    """Collectives (communication, not fused, not a task of another row) in dependency order
    with a GEMM: the GEMM right before it ended before it started, or the GEMM right after it
    started after it ended, within ``max_gap_ns``; the neighbour on the collective's stream
    wins over the one on its device. Rows that are one task of another never count as
    neighbours. One row per collective and side with a GEMM: the collective row, ``row`` (its
    index among the kernel rows: the same for both sides), ``gemm`` (the neighbour's name),
    ``gemm_args`` and ``gemm_corr`` (its args and correlation id), ``grouped`` (the GEMM is
    a grouped MoE GEMM) and ``order`` ("gemm first" or "collective first")."""
    kernels = (
        work.lazy()
        .filter(pl.col("kind").is_in(_KERNEL_LIKE) & ~pl.col("is_part"))
        .with_row_index("_i")
    )
    # Neighbours are found on a narrow copy (index, keys, times, GEMM or not); only the
    # collectives' rows and their GEMMs' args are gathered whole.
    probe = kernels.select(
        "_i", "rank", "device", "stream", "ts", "is_fused_comm",
        _end=pl.col("ts") + pl.col("dur"), _gemm=is_gemm(),
    ).collect()  # fmt: skip
    before, after = _nearest_gemm(probe, max_gap_ns)
    on_stream = _beside_gemm(probe, ["rank", "device", "stream"], max_gap_ns)
    before = on_stream[0].fill_null(before)  # same stream wins over the device-wide neighbour
    after = on_stream[1].fill_null(after)
    plain = pl.col("is_comm") & ~pl.col("is_fused_comm")
    beside = before.is_not_null() | after.is_not_null()
    rows = kernels.filter(plain & pl.lit(beside)).collect()
    at = rows["_i"]
    rows = rows.with_columns(
        _before=before.gather(at), _after=after.gather(at), _end=probe["_end"].gather(at)
    )
    found = outside_fused(rows, probe.filter("is_fused_comm"))
    # one candidate per side that has a GEMM: the rule keeps the one a fused operator fits
    sides = pl.concat(
        [
            found.filter(pl.col(side).is_not_null()).with_columns(_g=side, order=pl.lit(order))
            for side, order in (("_before", "gemm first"), ("_after", "collective first"))
        ]
    )
    gemms = (
        kernels.select(
            "_i", gemm=pl.col("name").cast(pl.String), gemm_args="args", gemm_corr="corr"
        )
        .filter(pl.col("_i").is_in(sides["_g"].implode()))
        .collect()
    )
    return (
        sides.join(gemms, left_on="_g", right_on="_i", how="left")
        .with_columns(
            row=pl.col("_i"),
            name=pl.col("name").cast(pl.String),
            grouped=pl.col("gemm").str.contains(GROUPED_GEMM).fill_null(False),
        )
        .select(pl.exclude("^_.*$"))
    )


def _beside_gemm(probe: pl.DataFrame, over: list[str], gap: int) -> tuple[pl.Series, pl.Series]:
    """Per row of ``probe`` (in its order): the index ``_i`` of the GEMM right before it
    (ended at most ``gap`` ns before it started, not after) and right after it (started at
    most ``gap`` ns after it ended, not before) among the rows of its group ``over``; null
    where none. A neighbour that overlaps the row ran beside it, not before or after it."""
    same_prev, same_next = same_group(over, 1), same_group(over, -1)
    idle_before = pl.col("ts") - pl.col("_end").shift(1)
    idle_after = pl.col("ts").shift(-1) - pl.col("_end")
    prev_hit = same_prev & pl.col("_gemm").shift(1) & idle_before.is_between(0, gap)
    next_hit = same_next & pl.col("_gemm").shift(-1) & idle_after.is_between(0, gap)
    found = (
        probe.sort(sort_key(probe, over, "ts"), maintain_order=True)  # _i ascending: ties
        .select(
            "_i",
            _b=pl.when(prev_hit).then(pl.col("_i").shift(1)),
            _a=pl.when(next_hit).then(pl.col("_i").shift(-1)),
        )
        .sort("_i")
    )
    return found["_b"], found["_a"]


def _nearest_gemm(probe: pl.DataFrame, gap: int) -> tuple[pl.Series, pl.Series]:
    """Per row of ``probe`` (in its order): the index ``_i`` of the GEMM on its device that
    ended last at or before its start, at most ``gap`` ns before, and of the GEMM that
    started first at or after its end, at most ``gap`` ns after; null where none. GEMMs
    that overlap the row (ran beside it on another stream) are neither."""
    dev = ["rank", "device"]
    gemms = probe.filter("_gemm").select(*dev, "_i", _gs="ts", _ge="_end")
    rows = probe.select("_i", *dev, "ts", "_end")
    prev = rows.sort("ts").join_asof(
        gemms.sort("_ge").select(*dev, _b="_i", _ge="_ge"),
        left_on="ts", right_on="_ge", by=dev, strategy="backward",
        tolerance=gap, check_sortedness=False,
    )  # fmt: skip
    nxt = rows.sort("_end").join_asof(
        gemms.sort("_gs").select(*dev, _a="_i", _gs="_gs"),
        left_on="_end", right_on="_gs", by=dev, strategy="forward",
        tolerance=gap, check_sortedness=False,
    )  # fmt: skip
    return prev.sort("_i")["_b"], nxt.sort("_i")["_a"]


def outside_fused(collectives: pl.DataFrame, fused: pl.DataFrame) -> pl.DataFrame:
    """Collectives that do not start inside a fused operator on their device (an MC²
    operator's AI CPU communication side is part of the fused operator, not a pair), sorted
    by ``ts``; ``fused`` has the fused rows' ``rank, device, ts, _end``."""
    dev = ["rank", "device"]
    fused = fused.sort("ts").select(*dev, _fs="ts", _reach=pl.col("_end").cum_max().over(dev))
    found = collectives.sort("ts").join_asof(
        fused, left_on="ts", right_on="_fs", by=dev, strategy="backward", check_sortedness=False
    )
    inside = pl.col("_reach").is_not_null() & (pl.col("_reach") > pl.col("ts"))
    return found.filter(~inside).drop("_fs", "_reach")


# -- which fused operator fits ---------------------------------------------------------------
# (collective, order, grouped GEMM) -> advice kind; a pair in no row here has no fused
# operator (an all-reduce that feeds a GEMM, an all-gather of a GEMM's output ...).
FITS: dict[tuple[str, str, bool], str] = {
    ("all_reduce", "gemm first", False): "unfused_all_reduce",  # MatmulAllReduce
    ("all_reduce", "gemm first", True): "unfused_all_reduce",  # GroupedMatMulAllReduce
    ("reduce_scatter", "gemm first", False): "unfused_reduce_scatter",  # MatmulReduceScatter
    ("all_gather", "collective first", False): "unfused_all_gather",  # AllGatherMatmul
    ("all_to_all", "collective first", True): "unfused_moe_dispatch",  # AlltoAllvGroupedMatMul
    ("all_to_all", "gemm first", True): "unfused_moe_combine",  # GroupedMatMulAlltoAllv
    ("all_to_all", "collective first", False): "unfused_all_to_all",  # AlltoAllMatmul
    ("all_to_all", "gemm first", False): "unfused_all_to_all",  # MatmulAlltoAll
}
# The kinds whose fused operator pipelines the matmul's row tiles with the communication (the
# tiling above): the MoE dispatch / combine operators are made for small decode batches.
SHAPED = ("unfused_all_reduce", "unfused_all_gather", "unfused_reduce_scatter")
# Which side a collective's pair is when both fit: the MoE operators first, then the others.
PRIORITY = (
    "unfused_moe_dispatch",
    "unfused_moe_combine",
    "unfused_all_reduce",
    "unfused_reduce_scatter",
    "unfused_all_gather",
    "unfused_all_to_all",
    "unfused",
)
UNKNOWN = "unfused"  # a collective whose kind the name does not say (RCCL's Generic kernel)
NO_FIT = None


def fused_kind(name: str, args: str | None, order: str, grouped: bool) -> str | None:
    """The advice kind of a pair: the fused operator that fits the collective ``name`` (or
    the collective its ``args`` name, Kineto's ``collective``), the order and whether the
    GEMM is grouped; :data:`UNKNOWN` when the collective is not known, None when no fused
    operator fits the pair."""
    kind = collective(name)
    if kind is None and args:
        named = re.search(r'"collective":\s*"([^"]*)"', args)
        kind = collective(named.group(1)) if named else None
    if kind is None:
        return UNKNOWN
    return FITS.get((kind, order, grouped), NO_FIT)


def too_small(
    shape: tuple[int, int] | None, kind: str | None, vendor: str | None = None
) -> str | None:
    """Why fusing a pair whose GEMM has ``shape`` would not pay off (or is not supported),
    as a sentence; None where it would or the shape is not known."""
    if shape is None or kind not in SHAPED:
        return None
    rows, k = shape
    if rows < MIN_ROWS:
        source = SHAPE_SOURCES.get(vendor) or SHAPE_SOURCES[None]
        return f"the GEMM has {rows:,} rows (k = {k:,}), fewer than {MIN_ROWS} ({source})"
    cann_only = kind in ("unfused_all_gather", "unfused_reduce_scatter")
    if vendor == "ascend" and cann_only and not (K_RANGE[0] <= k < K_RANGE[1]):
        return (
            f"the GEMM's k = {k:,} is outside [{K_RANGE[0]}, {K_RANGE[1]}), the range the "
            "fused all-gather / reduce-scatter matmul operators take (CANN "
            "aclnnAllGatherMatmul constraints)"
        )
    return None
