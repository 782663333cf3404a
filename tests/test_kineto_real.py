"""The Kineto parser against every real PyTorch-profiler trace in $TRACEKIT_REAL_TRACES.

The reference is computed here from the raw JSON with the standard library and exact
decimals, independently of the parser.
"""

from __future__ import annotations

import gzip
import json
from collections import Counter
from decimal import Decimal
from pathlib import Path

import polars as pl
import pytest

import tracekit
from tests.conftest import real_files, real_root, sha256

KINETO_FILES = real_files("nvidia", "*/*.json.gz") + real_files(
    "amd", "kineto_*/*.json.gz", "kineto_*/*.json"
)
KINDS = {
    "kernel": "kernel",
    "Kernel": "kernel",
    "gpu_memcpy": "memcpy",
    "Memcpy": "memcpy",
    "gpu_memset": "memset",
    "Memset": "memset",
}


def _raw(path: Path) -> dict:
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    doc = json.loads(data, parse_float=Decimal)
    return doc if isinstance(doc, dict) else {"traceEvents": doc}


def _stream(event: dict) -> int | None:
    value = event.get("args", {}).get("stream", event.get("tid"))
    if isinstance(value, str):
        value = int(value.replace("stream", "").strip())
    return None if value in (-1, 4294967295) else value


def _reference(doc: dict) -> dict:
    counts: Counter[str] = Counter()
    kernel_ns: Counter[tuple[int, int | None]] = Counter()
    ranks = set()
    default_rank = (doc.get("distributedInfo") or {}).get("rank", 0)
    for event in doc["traceEvents"]:
        kind = KINDS.get(event.get("cat"))
        if event.get("ph") != "X" or kind is None:
            continue
        counts[kind] += 1
        args = event.get("args", {})
        ranks.add(args.get("rank", default_rank))
        if kind == "kernel":
            device = args.get("device", event.get("pid"))
            kernel_ns[(device, _stream(event))] += int(Decimal(event.get("dur", 0)) * 1000)
    return {"counts": counts, "kernel_ns": kernel_ns, "ranks": ranks}


@pytest.mark.parametrize("path", KINETO_FILES)
def test_counts_durations_ranks_devices_equal_raw_json(path: Path) -> None:
    before = sha256(path)
    doc = _raw(path)
    want = _reference(doc)
    tl = tracekit.load(path)
    assert tl.meta["format"] == "kineto"
    assert tl.validate() == []
    df = tl.df.with_columns(pl.col("kind").cast(pl.String))
    for kind in ("kernel", "memcpy", "memset"):
        assert df.filter(pl.col("kind") == kind).height == want["counts"][kind], kind
    got = {
        (d, s): n
        for d, s, n in df.filter(pl.col("kind") == "kernel")
        .group_by("device", "stream")
        .agg(pl.col("dur").sum())
        .rows()
    }
    assert got == dict(want["kernel_ns"])
    if want["counts"]["kernel"]:
        assert set(df["rank"].unique()) == want["ranks"]
    names = [p.get("name") or None for p in doc.get("deviceProperties", [])]
    assert [d["name"] for d in tl.meta["devices"]] == names
    assert sha256(path) == before


def _one(pattern: str) -> Path:
    root = real_root()
    if root is None:
        pytest.skip("TRACEKIT_REAL_TRACES not set")
    return next(root.glob(pattern))


def test_ns_resolution_epoch_floats_keep_every_nanosecond() -> None:
    """Epoch µs with ns fractions exceed float precision: ts must come from the JSON text."""
    path = _one("nvidia/hta-v100-ns-resolution/*.json.gz")
    tl = tracekit.load(path)
    assert tl.meta["origin_ns"] == 1712195495406752797
    kernels = tl.df.filter(pl.col("kind") == "kernel").sort("ts")
    raw = [e for e in _raw(path)["traceEvents"] if e.get("cat") == "kernel"]
    first = min(raw, key=lambda e: e["ts"])
    assert kernels["ts"][0] + tl.meta["origin_ns"] == int(first["ts"] * 1000)
    assert str(first["ts"]).split(".")[1] != "000"


def test_base_time_relative_timestamps() -> None:
    path = _one("nvidia/hta-nccl-parser-a100-2rank/*.json.gz")
    doc = _raw(path)
    tl = tracekit.load(path)
    first = min(e["ts"] for e in doc["traceEvents"] if e.get("ph") == "X")
    assert tl.meta["origin_ns"] == doc["baseTimeNanoseconds"] + int(first * 1000)
    assert tl.meta["world_size"] == 2 and tl.meta["distributed_backend"] == "nccl"
    assert tl.meta["producer"]["backend"] == "CUPTI"


def test_nccl_kernel_metadata_in_args() -> None:
    tl = tracekit.load(_one("nvidia/hta-nccl-parser-a100-2rank/*.json.gz"))
    nccl = tl.df.filter(pl.col("kind") == "kernel", pl.col("stream") == 40)
    assert nccl.height == 21
    args = [json.loads(a) for a in nccl.sort("ts")["args"]]
    assert Counter(a["collective"] for a in args) == {"allreduce": 15, "broadcast": 6}
    allreduce = next(a for a in args if a["collective"] == "allreduce")
    assert allreduce["group_size"] == 2 and allreduce["dtype"] == "Float"
    assert allreduce["pg_ranks"] == "[0, 1]" and allreduce["pg_desc"] == "default_pg"
    assert allreduce["grid"] == [8, 1, 1] and allreduce["block"] == [544, 1, 1]
    compute = tl.df.filter(pl.col("kind") == "kernel", pl.col("stream") == 7)
    assert "collective" not in compute["args"][0]


def test_legacy_2021_string_streams_and_categories() -> None:
    tl = tracekit.load(_one("nvidia/kineto-tbplugin-resnet50-v100-legacy/*.json.gz"))
    df = tl.df.with_columns(pl.col("kind").cast(pl.String))
    kernels = df.filter(pl.col("kind") == "kernel")
    assert set(kernels["stream"]) == {7}
    assert df.filter(pl.col("kind") == "op").height == 23646
    assert df.filter(pl.col("kind") == "api").height == 11923
    assert json.loads(kernels["args"][0])["external_id"] > 0


def test_cuda_sync_sentinel_streams_are_null() -> None:
    tl = tracekit.load(_one("nvidia/hta-event-sync-multistream/*.json.gz"))
    syncs = tl.df.filter(pl.col("kind") == "sync").sort("ts")
    assert syncs.height == 5
    assert syncs["stream"].to_list() == [None, None, 24, None, None]
    assert syncs["name"].cast(pl.String).to_list()[2] == "Stream Wait Event"
    assert json.loads(syncs["args"][2])["wait_on_stream"] == 20


def test_rocm_backends_and_graph_launches() -> None:
    sdk = tracekit.load(_one("amd/kineto_mi350x_rocprofsdk_backend_aorta/*.json"))
    assert sdk.meta["producer"]["backend"] == "rocprofiler-sdk"
    assert sdk.meta["devices"][0]["vendor"] == "AMD"
    vllm = tracekit.load(_one("amd/kineto_rocm_vllm_moe_prefilldecode_piecewise/*.json.gz"))
    assert vllm.meta["producer"]["backend"] == "roctracer"
    launches = vllm.df.filter(pl.col("kind") == "api", pl.col("name") == "hipGraphLaunch")
    assert launches.height == 25 and launches["corr"].null_count() == 0


def test_merged_multi_rank_file_keeps_rank_per_event() -> None:
    tl = tracekit.load(_one("amd/kineto_mi300_ddp4rank_rccl_FUSED/merged_nccl_only.json.gz"))
    kernels = tl.df.filter(pl.col("kind") == "kernel")
    assert dict(kernels.group_by("rank").len().sort("rank").rows()) == {0: 21, 1: 21, 2: 21, 3: 21}
    assert tl.meta["ranks"] == [0, 1, 2, 3]


def test_python_functions_only_when_asked() -> None:
    from tracekit.parsers import kineto

    path = _one("amd/kineto_mi300x_sglang_qwen3_8b_decode/*.json.gz")
    default = tracekit.load(path)
    with_python = kineto.parse(path, include_python=True)
    assert len(with_python) - len(default) == 821


def test_folder_of_rank_files_is_one_timeline(tmp_path: Path) -> None:
    folder = _one("nvidia/hta-sampled-world128-multistream/sampled_rank-0.json.gz").parent
    tl = tracekit.load(folder)
    kernels = tl.df.filter(pl.col("kind") == "kernel")
    assert dict(kernels.group_by("rank").len().sort("rank").rows()) == {0: 1154, 1: 1104}
    assert tl.meta["ranks"] == [0, 1]
    assert tl.meta["files"] == ["sampled_rank-0.json.gz", "sampled_rank-1.json.gz"]
    origins = [tracekit.load(folder / f).meta["origin_ns"] for f in tl.meta["files"]]
    assert tl.meta["origin_ns"] == min(origins)
    rank1 = tracekit.load(folder / "sampled_rank-1.json.gz")
    first1 = tl.df.filter(pl.col("rank") == 1)["ts"].min()
    assert first1 + tl.meta["origin_ns"] == rank1.meta["origin_ns"]


def test_legacy_operator_rows_keep_their_external_id() -> None:
    tl = tracekit.load(_one("nvidia/kineto-tbplugin-resnet50-v100-legacy/*.json.gz"))
    ops = tl.df.filter(pl.col("kind") == "op")
    assert ops["args"].null_count() == 0
    ids = [json.loads(a)["external_id"] for a in ops["args"]]
    assert min(ids) == 1 and len(set(ids)) == 23646
