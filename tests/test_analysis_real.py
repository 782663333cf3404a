"""analyze() on every real sample: invariants, communication and fallback flags, and the
compute-communication overlap of HolisticTraceAnalysis on the NCCL traces."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import polars as pl
import pytest

import tracekit
from tests.conftest import real_file, real_files
from tracekit.intervals import intersect, lengths, merge
from tracekit.metrics import IS_COMPUTE

_ALL = real_files("nvidia", "**/*.json*", "**/*.sqlite") + real_files(
    "amd", "**/*.json*", "**/*.db", "**/*_kernel_trace.csv", "**/results.csv"
)
# Folders named _inspect / _reference_schemas hold notes about the samples, not traces.
SAMPLES = [
    p
    for p in _ALL
    if p.values[0] is None or not any(part.startswith("_") for part in p.values[0].parts)
]
HTA_NCCL = re.compile(r"^nccl.*Kernel")  # HTA's communication kernels
EAGER = re.compile(
    r"at::native::(vectorized_elementwise_kernel|unrolled_elementwise_kernel|"
    r"elementwise_kernel|reduce_kernel)"
)


def _analysis(path: Path) -> tracekit.analysis.Analysis:
    return tracekit.analyze(tracekit.load(path))


@pytest.mark.parametrize("path", SAMPLES)
def test_metrics_are_consistent(path: Path) -> None:
    a = _analysis(path)
    m = a.step_metrics
    assert len(a.steps) >= 1
    assert m.height >= 1 or a.work.height == 0  # a range-profiling trace has no device rows
    assert m.filter(pl.col("busy_ns") > pl.col("dur")).height == 0
    assert m.filter(pl.col("idle_ns") < 0).height == 0
    assert m.filter(pl.col("compute_ns") > pl.col("busy_ns")).height == 0
    assert m.filter(pl.col("exposed_comm_ns") > pl.col("comm_ns")).height == 0
    assert m.filter(pl.col("bubble_ns") > pl.col("idle_ns")).height == 0
    ratios = pl.concat([m["comm_overlap_ratio"].drop_nulls(), m["fallback_share"].drop_nulls()])
    assert ratios.is_between(0, 1).all()
    cats = m.select(pl.sum_horizontal(pl.col("^cat_.*_ns$")).sum()).item()
    assert cats == a.work.filter(pl.col("step").is_not_null())["dur"].sum()
    names = a.work.select(pl.col("name").cast(pl.String), "is_comm").unique()
    for name, is_comm in names.rows():  # NCCL/RCCL kernels are communication, by more than
        if HTA_NCCL.match(name):  # the prefix: the same rows HTA calls communication
            assert is_comm, name


@pytest.mark.parametrize(
    "rel", ["kineto_mi300x_hf_qwen1.5_0.5b_eager/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"]
)
def test_eager_elementwise_kernels_without_an_engine_are_not_fallbacks(rel: str) -> None:
    # eager Hugging Face generate(): no serving engine fuses these, so they are eager code
    path = real_file("amd", rel)
    raw = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    kernels = [e["name"] for e in raw if e.get("ph") == "X" and e.get("cat") == "kernel"]
    eager = sum(1 for n in kernels if EAGER.search(n))
    a = _analysis(path)
    assert eager > 1000
    assert a.work.filter(pl.col("is_fallback")).height == 0


def test_inductor_kernels_are_never_fallbacks() -> None:
    amd = _analysis(
        real_file("amd", "kineto_rocm_vllm_moe_prefilldecode_piecewise/graph_execution.json.gz")
    )
    triton = amd.work.filter(pl.col("name").cast(pl.String).str.starts_with("triton_poi_"))
    assert triton.height == 48 and not triton["is_fallback"].any()
    nv = _analysis(real_file("nvidia", "hta-triton-a100/triton_example.json.gz"))
    assert not nv.work.filter(pl.col("name").cast(pl.String).str.starts_with("triton_"))[
        "is_fallback"
    ].any()


# get_comm_comp_overlap of HolisticTraceAnalysis 0.5.0 on these files (bench/hta_overlap.py)
HTA_PERCENT = {
    "hta-a100-80gb-world16-multistream/rank0.json.gz": 1.37,
    "hta-trace-diff-a100-world8/control.json.gz": 47.03,
    "hta-v100-ddp-allreduce/df_index_resolver.json.gz": 0.00,
    "hta-sampled-world128-multistream/sampled_rank-0.json.gz": 11.81,
}


@pytest.mark.parametrize("rel", list(HTA_PERCENT))
def test_overlap_agrees_with_hta_on_the_rows_hta_keeps(rel: str) -> None:
    a = _analysis(real_file("nvidia", rel))
    rows = a.rows
    last = rows.filter(pl.col("name").cast(pl.String).str.contains("ProfilerStep"))["ts"].max()
    launches = rows.filter((pl.col("kind").cast(pl.String) == "api") & pl.col("corr").is_not_null())
    launches = launches.select("corr", _launch="ts").unique("corr", keep="first")
    kept = a.work.join(launches, on="corr").filter(pl.col("_launch") < last)
    comm = kept.filter(pl.col("is_comm"))
    compute = kept.filter(IS_COMPUTE)
    key = ["rank", "device"]
    comm_ns = lengths(merge(comm, key))["ns"].sum()
    both = lengths(intersect(comm, compute, key))["ns"].sum()
    assert round(100 * both / comm_ns, 2) == HTA_PERCENT[rel]
