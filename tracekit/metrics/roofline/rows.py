"""The work each device row did, from the shapes the trace recorded: FLOPs, minimum bytes,
operator family and math dtype (:mod:`tracekit.metrics.roofline.formulas`).

Ascend rows carry their operator's shapes themselves (``input_shapes`` …); a PyTorch-profiler
kernel gets those of the host operator that launched it (:func:`launching_ops`). An
operator that launched several device rows (a GEMM and its split-K reduction) splits its work
over them by duration, so that per-step sums add up. The formulas run once per distinct
(operator, shapes) combination, never per row. Rows without shapes get nulls: never a guess.
"""

from __future__ import annotations

import polars as pl

from tracekit.metrics.roofline.formulas.base import Shape, Shapes, Work
from tracekit.metrics.roofline.formulas.inputs import ascend_shapes, torch_shapes
from tracekit.metrics.roofline.formulas.registry import work_of
from tracekit.metrics.shapes import launching_ops

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
HIT_SCHEMA: dict[str, pl.DataType] = {
    "_row": pl.UInt32(),
    "combo": pl.UInt64(),
    "_op": pl.UInt64(),  # the operator launch the row belongs to
    "share": pl.Float64(),
}
COMBO_SCHEMA: dict[str, pl.DataType] = {
    "combo": pl.UInt64(), "op": pl.String(), "shapes": pl.String(), **WORK_SCHEMA
}  # fmt: skip


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
    # an Ascend "" is an optional input left out, a PyTorch [] a 0-d tensor
    inputs = [s for s in shapes.inputs if s is not None and (s or shapes.source != "ascend")]
    text = ", ".join(_dims(s) for s in inputs)
    outputs = [s for s in shapes.outputs if s is not None]
    if outputs:
        text += " → " + ", ".join(_dims(s) for s in outputs)
    kinds = [d for s, d in zip(shapes.inputs, shapes.dtypes) if s is not None and d]
    distinct = "/".join(dict.fromkeys(kinds))
    return f"{text} {distinct}".strip()


def _ascend(work: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The rows that carry Ascend operator shapes (``_row``, ``_key``, ``share`` 1) and
    their distinct combinations with their work (``_key``, ``op`` and the work columns)."""
    has = pl.col("args").str.contains('"input_shapes"', literal=True).fill_null(False)
    # the parser writes op_type first and the shape keys together (input_shapes … output
    # dtypes, then the formats, step and ids): rows alike in that text are read once
    args = pl.col("args")
    start = args.str.find('"input_shapes"', literal=True)
    stop = pl.coalesce(args.str.find(',"output_formats"', literal=True), args.str.len_bytes())
    key = pl.concat_str(
        args.str.slice(0, args.str.find(",", literal=True)), args.str.slice(start, stop - start)
    )
    rows = work.filter(has).select("_row", "args", _key=key.hash())
    if rows.height == 0:
        return pl.DataFrame(), pl.DataFrame()
    firsts = rows.unique("_key", keep="first", maintain_order=True).select(
        "_key", *(args.str.json_path_match(f"$.{k}").alias(k) for k in ASCEND_KEYS)
    )
    combos = _combos_work(firsts, "ascend").rename({"op_type": "op"})
    # each Ascend row is one operator launch
    hits = rows.select("_row", "_key", _op=pl.col("_row").cast(pl.UInt64), share=pl.lit(1.0))
    return hits, combos.select("_key", "op", "shapes", *WORK_SCHEMA)


def _torch(rows: pl.DataFrame, work: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The device rows whose launching operator has shapes (``_row``, ``_key``, ``share``:
    the row's part of its operator's work, by duration among the rows the operator
    launched) and the distinct combinations with their work."""
    # kernels and fills; of the copies only those inside device memory (read and written
    # there): a copy to or from the host, or to a peer, is bound by its link, not by HBM
    linked = work.filter(pl.col("corr").is_not_null())
    copies = linked.filter(pl.col("kind") == "memcpy")  # few: their names read alone
    copies = copies.filter(pl.col("name").cast(pl.String).str.contains("DtoD"))
    device = pl.concat([linked.filter(pl.col("kind").is_in(["kernel", "memset"])), copies])
    if device.height == 0:
        return pl.DataFrame(), pl.DataFrame()
    found, inputs = launching_ops(rows, device.select("rank", "corr", "args"))
    found = pl.concat([device.select("_row", "rank", "dur"), found], how="horizontal")
    found = found.filter(pl.col("shape_id").is_not_null())
    if found.height == 0:
        return pl.DataFrame(), pl.DataFrame()
    # one integer per combination: the operator name's categorical code, then the inputs
    key = pl.col("op").to_physical().cast(pl.UInt64) * 2**32 + pl.col("shape_id")
    found = found.with_columns(_key=key)
    combos = found.unique("_key", keep="first", maintain_order=True).select(
        "_key", pl.col("op").cast(pl.String), "shape_id"
    )
    combos = combos.join(inputs, on="shape_id", how="left", maintain_order="left")
    combos = _combos_work(combos, "torch").select("_key", "op", "shapes", *WORK_SCHEMA)
    # most operators launch one device row: their share is 1, no window over all rows
    found = found.with_columns(_op="op_key").with_columns(_several=pl.col("_op").is_duplicated())
    total = pl.col("dur").clip(0).sum().over("_op")
    share = (
        pl.when(total > 0).then(pl.col("dur").clip(0) / total).otherwise(1.0 / pl.len().over("_op"))
    )
    split = found.filter("_several").select("_row", "_key", "_op", share=share)
    whole = found.filter(~pl.col("_several")).select("_row", "_key", "_op", share=pl.lit(1.0))
    return pl.concat([whole, split]), combos


def shaped(rows: pl.DataFrame, work: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The work of ``work``'s rows from their shapes, as two frames: per shaped row with a
    formula, ``_row`` (its index in ``work``), ``combo`` and ``share`` (its part of its
    operator's work); per distinct (operator, shapes) ``combo`` with ``op`` (the launching
    operator; Ascend: op type), ``shapes`` (as a reader scans them) and the formula's
    family, FLOPs, minimum bytes, math dtype, ``matrix``, ``exact`` (False: the shapes bound
    the work from above) and note. Rows without shapes, or whose operator no formula fits,
    are in neither: never a guess."""
    indexed = work.with_row_index("_row")
    parts = [p for p in (_ascend(indexed), _torch(rows, indexed)) if p[0].height]
    if not parts:
        return pl.DataFrame(schema=HIT_SCHEMA), pl.DataFrame(schema=COMBO_SCHEMA)
    # a combination's key (an integer from its operator and inputs) is its id
    combos = pl.concat([c for _, c in parts], how="vertical_relaxed").rename({"_key": "combo"})
    combos = combos.filter(pl.col("flops").is_not_null()).unique("combo", keep="first")
    hits = pl.concat([h for h, _ in parts], how="vertical_relaxed").rename({"_key": "combo"})
    if len(parts) > 1:  # a row with Ascend shapes and a launching operator: counted once
        hits = hits.unique("_row", keep="first")
    hits = hits.filter(pl.col("combo").is_in(combos["combo"].implode()))
    return hits.select(*HIT_SCHEMA), combos.select(*COMBO_SCHEMA)
