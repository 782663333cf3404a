"""Step phases from the attention kernels, where the step markers encode none.

Some attention kernels run only when a batch decodes (paged and split-KV decode kernels),
some only when it prefills (context / extend / ragged prefill kernels); many serve both and
say nothing, unless their shapes do (:func:`one_token`: one query token per sequence). The
table is ``tracekit/data/attention_phases.toml``. Per step: decode evidence only is
``decode``, prefill evidence only ``prefill``, both ``mixed``; weak decode evidence (GEMV,
split-KV combine) counts only without prefill evidence.
"""

from __future__ import annotations

import sys
from functools import cache
from importlib import resources

import polars as pl

from tracekit.steps.period import NOT_STEPS

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

EVIDENCE = ("decode", "weak_decode", "prefill", "mixed")
# One query token per sequence: Ascend's FusedInferAttentionScore with a BSND query of
# sequence length 1 (torch_npu / msprof ``Input Shapes``: "B,1,N,D;…"), the incremental branch.
ONE_TOKEN_KERNELS = r"FusedInferAttentionScore"
ONE_TOKEN_SHAPES = r'"input_shapes":"\d+,1,\d+,\d+;'


def one_token(work: pl.DataFrame) -> pl.DataFrame:
    """The rows of attention kernels whose query holds one token per sequence (decode):
    the kernels are picked by name first, so that only their args are searched."""
    if "args" not in work.columns:
        return work.clear()
    names = work.get_column("name").unique().cast(pl.String).drop_nulls()
    hits = names.filter(names.str.contains(ONE_TOKEN_KERNELS)).to_list()
    if not hits:
        return work.clear()
    rows = work.filter(pl.col("name").is_in(hits))
    return rows.filter(pl.col("args").str.contains(ONE_TOKEN_SHAPES))


@cache
def phase_patterns() -> dict[str, str]:
    """Evidence class -> one regex (the table's entries joined)."""
    text = resources.files("tracekit.data").joinpath("attention_phases.toml").read_text("utf-8")
    table = tomllib.loads(text)
    return {key: "|".join(f"(?:{e['match']})" for e in table.get(key, [])) for key in EVIDENCE}


def phase_evidence(names: pl.Series) -> pl.DataFrame:
    """Per distinct name that betrays a phase: ``name`` and one boolean column per evidence
    class."""
    distinct = pl.DataFrame({"name": names.unique().cast(pl.String).drop_nulls()})
    found = distinct.with_columns(
        pl.col("name").str.contains(pattern).alias(key)
        for key, pattern in phase_patterns().items()
        if pattern
    )
    keys = [k for k in EVIDENCE if k in found.columns]
    found = found.filter(pl.any_horizontal(keys)) if keys else found.clear()
    return found.with_columns(pl.lit(False).alias(k) for k in EVIDENCE if k not in keys)


def kernel_phases(work: pl.DataFrame) -> pl.DataFrame:
    """``rank, step, phase`` for the steps whose attention kernels betray their phase."""
    evidence = phase_evidence(work["name"])
    placed = work.filter(pl.col("step").is_not_null())
    shaped = one_token(placed).select(
        "rank", "step", *(pl.lit(k == "decode").alias(k) for k in EVIDENCE)
    )
    if not evidence.height and not shaped.height:
        return pl.DataFrame(schema={"rank": pl.Int32, "step": pl.Int64, "phase": pl.String})
    rows = placed.filter(pl.col("name").is_in(evidence["name"].to_list())).select(
        "rank", "step", name=pl.col("name").cast(pl.String)
    )
    named = rows.join(evidence, on="name", how="inner").drop("name")
    per = (
        pl.concat([named, shaped.select(named.columns)])
        .group_by("rank", "step")
        .agg(pl.col(k).any() for k in EVIDENCE)
    )
    phase = (
        pl.when(pl.col("mixed") | (pl.col("decode") & pl.col("prefill")))
        .then(pl.lit("mixed"))
        .when(pl.col("prefill"))
        .then(pl.lit("prefill"))
        .when(pl.col("decode") | pl.col("weak_decode"))
        .then(pl.lit("decode"))
    )
    return per.select("rank", "step", phase=phase).drop_nulls("phase")


def infer_phases(
    steps_ranges: pl.DataFrame, work: pl.DataFrame, override: bool
) -> tuple[pl.DataFrame, int]:
    """``steps_ranges`` with phases from the kernels filled in where missing (and, with
    ``override``, replacing a premise such as the period method's), and how many changed."""
    found = kernel_phases(work)
    if not found.height:
        return steps_ranges, 0
    joined = steps_ranges.join(found.rename({"phase": "_k"}), on=["rank", "step"], how="left")
    new = pl.coalesce("_k", "phase") if override else pl.coalesce("phase", "_k")
    # the period method's load and cut-short windows are no steps: they keep no phase
    new = pl.when(pl.col("label").is_in(NOT_STEPS)).then(pl.col("phase")).otherwise(new)
    changed = int(joined.select((new.ne_missing(pl.col("phase"))).sum()).item())
    return joined.with_columns(phase=new).drop("_k"), changed


def sampled_phases(steps_ranges: pl.DataFrame, work: pl.DataFrame) -> tuple[pl.DataFrame, int]:
    """``steps_ranges`` with ``decode`` for the steps that say no phase but run a sampling
    kernel: where a step is one forward of the model (a period of its kernels, a graph
    replay), sampling in it is one token per sequence, the mark of a decode step (a prefill's
    own attention kernels would have said prefill). The load and cut-short windows stay as
    they are; returns the ranges and how many changed."""
    if "category" not in work.columns:
        return steps_ranges, 0
    sampled = (
        work.filter(pl.col("step").is_not_null() & (pl.col("category") == "sampling"))
        .select("rank", "step")
        .unique()
        .with_columns(_sampled=pl.lit(True))
    )
    if not sampled.height:
        return steps_ranges, 0
    joined = steps_ranges.join(sampled, on=["rank", "step"], how="left")
    fill = (
        pl.col("phase").is_null()
        & pl.col("_sampled").fill_null(False)
        & ~pl.col("label").is_in(NOT_STEPS)
    )
    changed = int(joined.select(fill.sum()).item())
    out = joined.with_columns(phase=pl.when(fill).then(pl.lit("decode")).otherwise("phase"))
    return out.drop("_sampled"), changed
