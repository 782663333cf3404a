"""MC² (fused matrix-computation and communication) operators of CANN.

The fused operator runs on a compute stream under its own name (``aclnnMoeDistributeDispatchV2_
MoeDistributeDispatchV2_MoeDistributeDispatchV2``, OP Type ``MoeDistributeDispatchV2``). When
the communication side was traced, msprof writes it on the HCCL process, thread ``Group <g>
Communication Aicpu``, as an operator named ``<Fused>Aicpu`` with per-round phase slices
(``StartServer 0``, ``TaskWaitRequest 0``, ``TaskOrchestration 0``, ``TaskLaunch 0``,
``TaskExecute 0``, ``Finalize 0`` …).

:func:`mc2_type` names the MC² operator of a kernel row (``args.mc2``); :mod:`.hccl` marks the
Aicpu operator with the fused name and the phases as ``range`` rows with ``mc2_phase``/``round``.
"""

from __future__ import annotations

import re

import polars as pl

BASES = (
    "MoeDistributeDispatch",
    "MoeDistributeCombine",
    "MoeDistributeCombineAddRmsNorm",
    "MatmulAllReduce",
    "MatmulAllReduceAddRmsNorm",
    "InplaceMatmulAllReduceAddRmsNorm",
    "AllGatherMatmul",
    "MatmulReduceScatter",
    "AlltoAllAllGatherBatchMatMul",
    "BatchMatMulReduceScatterAlltoAll",
    "GroupedMatMulAllReduce",
    "MatmulAlltoAll",
    "AlltoAllMatmul",
    "GroupedMatMulAlltoAllv",
    "AlltoAllvGroupedMatMul",
    "QuantMatmulAllReduce",
    "WeightQuantMatmulAllReduce",
    "DistributeBarrier",
)
# the longest names first, so that MatmulAllReduceAddRmsNorm is not read as MatmulAllReduce
_ALTERNATION = "|".join(sorted(BASES, key=len, reverse=True))
PATTERN = rf"(?:^|[_\W]|aclnn)((?:{_ALTERNATION})(?:V\d+)?)(?:$|[_\W]|Aicpu)"
PHASE = (
    r"^(StartServer|TaskWaitRequest|TaskOrchestration|TaskLaunch|TaskExecute|Finalize)\s*(\d+)?$"
)


_COMPILED = re.compile(PATTERN)


def _types(values: pl.Series) -> pl.Series:
    """The MC² type in each distinct value (matched once per distinct value)."""
    values = values.cast(pl.String)
    found = {}
    for value in values.drop_nulls().unique().to_list():
        match = _COMPILED.search(value)
        if match:
            found[value] = match.group(1)
    return values.replace_strict(found, default=None, return_dtype=pl.String)


def mc2_types(op_type: pl.Series, name: pl.Series) -> pl.Series:
    """The MC² operator type of each row (``MoeDistributeDispatchV2`` …) from its OP Type,
    else its name; null for other operators."""
    return _types(op_type).fill_null(_types(name))


def summary(frames: list[pl.DataFrame]) -> dict[str, object]:
    """Counts for the metadata: MC² kernels per type and Aicpu communication operators."""
    kernels: dict[str, int] = {}
    aicpu = 0
    for frame in frames:
        if not frame.height or "args" not in frame.columns:
            continue
        tagged = frame.filter(pl.col("args").str.contains('"mc2":', literal=True))
        if not tagged.height:
            continue
        # an operator's tasks (``args.op``) are not operators of their own
        task = pl.col("args").str.contains('"op":', literal=True)
        names = tagged.select(
            pl.when(task).then(pl.lit("task")).otherwise(pl.col("kind")).alias("kind"),
            pl.col("args").str.extract(r'"mc2":"([^"]*)"', 1).alias("t"),
        )
        for kind, kind_type, n in names.group_by("kind", "t").len().iter_rows():
            if kind == "kernel":
                kernels[kind_type] = kernels.get(kind_type, 0) + n
            elif kind == "comm":
                aicpu += n
    return {"kernels": dict(sorted(kernels.items())), "aicpu_comm_rows": aicpu}
