"""The work each device row did, from the shapes the trace recorded: FLOPs, minimum bytes,
operator family and math dtype (:mod:`tracekit.roofline.formulas`).

Ascend rows carry their operator's shapes themselves (``input_shapes`` …); a PyTorch-profiler
kernel gets those of the host operator that launched it (:func:`launching_op_dims`). An
operator that launched several device rows (a GEMM and its split-K reduction) splits its work
over them by duration, so that per-step sums add up. The formulas run once per distinct
(operator, shapes) combination, never per row. Rows without shapes get nulls: never a guess.
"""

from __future__ import annotations

import polars as pl

from tracekit.metrics.shapes import launching_op_dims
from tracekit.roofline.formulas.base import Shape, Shapes, Work
from tracekit.roofline.formulas.inputs import ascend_shapes, torch_shapes
from tracekit.roofline.formulas.registry import work_of

ASCEND_KEYS = ("op_type", "input_shapes", "input_dtypes", "output_shapes", "output_dtypes")
TORCH_KEYS = ("op", "input_dims", "input_types", "concrete_inputs")
WORK_SCHEMA: dict[str, pl.DataType] = {
    "family": pl.String(),
    "flops": pl.Float64(),
    "bytes": pl.Float64(),
    "dtype": pl.String(),
    "matrix": pl.Boolean(),
    "exact": pl.Boolean(),
    "note": pl.String(),
}
# what :func:`shaped_rows` adds to each row
COLUMNS = ("op", "shapes", *WORK_SCHEMA)


def _combos_work(combos: pl.DataFrame, source: str) -> pl.DataFrame:
    """The formula's :class:`Work` for each distinct combination (one row per row of
    ``combos``), plus ``shapes``: the inputs as shown to a reader."""
    out: list[dict[str, object]] = []
    for combo in combos.iter_rows(named=True):
        if source == "ascend":
            shapes = ascend_shapes(*(combo[k] for k in ASCEND_KEYS))
        else:
            shapes = torch_shapes(*(combo[k] for k in TORCH_KEYS))
        work: Work | None = work_of(shapes) if shapes is not None else None
        row: dict[str, object] = {"shapes": shown(shapes) if shapes is not None else None}
        row.update(
            {k: getattr(work, k) if work is not None else None for k in WORK_SCHEMA},
        )
        out.append(row)
    schema = {"shapes": pl.String(), **WORK_SCHEMA}
    return pl.concat([combos, pl.DataFrame(out, schema=schema)], how="horizontal")


def _dims(shape: Shape) -> str:
    return "×".join(map(str, shape)) if shape else "scalar"


def shown(shapes: Shapes) -> str:
    """The shapes as a reader scans them: ``8944×1024, 1024×2816 bf16`` (tensor inputs,
    then ``→`` the outputs where the trace gives them, then their distinct dtypes)."""
    text = ", ".join(_dims(s) for s in shapes.inputs if s is not None)
    outputs = [s for s in shapes.outputs if s is not None]
    if outputs:
        text += " → " + ", ".join(_dims(s) for s in outputs)
    kinds = [d for s, d in zip(shapes.inputs, shapes.dtypes) if s is not None and d]
    distinct = "/".join(dict.fromkeys(kinds))
    return f"{text} {distinct}".strip()


def _ascend(work: pl.DataFrame) -> pl.DataFrame:
    """Row index, op and work of the rows that carry Ascend operator shapes."""
    has = pl.col("args").str.contains('"input_shapes"', literal=True).fill_null(False)
    rows = work.filter(has).select(
        "_row",
        *(pl.col("args").str.json_path_match(f"$.{k}").alias(k) for k in ASCEND_KEYS),
    )
    if rows.height == 0:
        return pl.DataFrame()
    combos = _combos_work(rows.drop("_row").unique(maintain_order=True), "ascend")
    joined = rows.join(combos, on=list(ASCEND_KEYS), how="left", nulls_equal=True)
    return joined.select("_row", pl.col("op_type").alias("op"), "shapes", *WORK_SCHEMA)


def _torch(rows: pl.DataFrame, work: pl.DataFrame) -> pl.DataFrame:
    """Row index, op and work of the device rows whose launching operator has shapes, each
    with its share of that operator's work (by duration among the rows it launched)."""
    device = work.filter(pl.col("corr").is_not_null())
    if device.height == 0:
        return pl.DataFrame()
    found = launching_op_dims(rows, device.select("rank", "corr", "args"))
    found = pl.concat([device.select("_row", "rank", "dur"), found], how="horizontal")
    found = found.filter(pl.col("input_dims").is_not_null())
    if found.height == 0:
        return pl.DataFrame()
    combos = _combos_work(found.select(TORCH_KEYS).unique(maintain_order=True), "torch")
    joined = found.join(combos, on=list(TORCH_KEYS), how="left", nulls_equal=True)
    total = pl.col("dur").clip(0).sum().over("rank", "op_ext")
    count = pl.len().over("rank", "op_ext")
    share = pl.when(total > 0).then(pl.col("dur").clip(0) / total).otherwise(1.0 / count)
    return joined.with_columns(flops=pl.col("flops") * share, bytes=pl.col("bytes") * share).select(
        "_row", "op", "shapes", *WORK_SCHEMA
    )


def shaped_rows(rows: pl.DataFrame, work: pl.DataFrame) -> pl.DataFrame:
    """``work`` with :data:`COLUMNS` added: the launching operator (Ascend: op type) and its
    shapes as text wherever the trace recorded them, and where a formula applies the row's
    family, FLOPs, minimum bytes, math dtype, ``matrix`` (matrix units), ``exact`` (False:
    the shapes bound the work from above) and a note; nulls elsewhere."""
    indexed = work.with_row_index("_row")
    parts = [p for p in (_ascend(indexed), _torch(rows, indexed)) if p.height]
    empty = {"op": pl.String(), "shapes": pl.String(), **WORK_SCHEMA}
    if not parts:
        return work.with_columns(pl.lit(None, dtype).alias(k) for k, dtype in empty.items())
    found = pl.concat(parts, how="vertical_relaxed").unique("_row", keep="first")
    out = indexed.join(found, on="_row", how="left", maintain_order="left")
    return out.drop("_row")
