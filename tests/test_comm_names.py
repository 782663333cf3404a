"""Communication by operation: the kernel names of the communication libraries' own sources
(tests/data/comm_names.tsv, each row citing its file and commit) and look-alikes that are
not communication; names that only look like communication are counted with a warning."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import polars as pl
import pytest

from tracekit.taxonomy import classify, guessed_comm, load_patterns

TABLE = Path(__file__).parent / "data" / "comm_names.tsv"
ROWS = list(csv.DictReader(TABLE.open(encoding="utf-8"), delimiter="\t"))
SCHEMA = {"name": pl.String, "kind": pl.String, "engine": pl.String, "dur": pl.Int64}


def _frame(rows: list[dict[str, str]], dur: int = 1_000) -> pl.DataFrame:
    data = {
        "name": [r["name"] for r in rows],
        "kind": [r.get("kind", "kernel") for r in rows],
        "engine": [None] * len(rows),
        "dur": [dur] * len(rows),
    }
    return pl.DataFrame(data, schema=SCHEMA)


def _by_vendor(rows: list[dict[str, str]]) -> dict[str, list[dict[str, str]]]:
    out: dict[str, list[dict[str, str]]] = {}
    for row in rows:
        out.setdefault(row["vendor"], []).append(row)
    return out


def test_the_table_is_large_enough_and_every_row_cites_its_source() -> None:
    comm = [r for r in ROWS if r["is_comm"] == "true"]
    alike = [r for r in ROWS if r["is_comm"] == "false"]
    assert len(comm) >= 80 and len(alike) >= 20
    cited = re.compile(r"(^|[ (])[\w.-]+/[\w.-]+[:@(]|https://|fixtures/\w+\.py")
    assert [r["name"] for r in ROWS if not cited.search(r["source"])] == []
    libraries = ["nccl", "hcom_", "MoeDistribute", "deep_ep::", "uccl::", "nccl_ep", "mooncake::",
                 "Ep", "dispatchKernel", "on_stream_kernel", "multimem", "cross_device_reduce",
                 "quickreduce", "sglang::", "aiter::", "flashinfer::", "tensorrt_llm::",
                 "mscclpp::", "mori"]  # fmt: skip
    assert all(any(lib in r["name"] for r in comm) for lib in libraries)


@pytest.mark.parametrize("vendor", ["nvidia", "amd", "ascend"])
def test_every_name_gets_its_category_and_flags(vendor: str) -> None:
    rows = _by_vendor(ROWS)[vendor]
    out = classify(_frame(rows), vendor)
    got = out.select("name", "category", "is_comm", "is_fused_comm").rows()
    want = [
        (r["name"], r["category"], r["is_comm"] == "true", r["is_fused_comm"] == "true")
        for r in rows
    ]
    assert [g for g, w in zip(got, want) if g != w] == []


@pytest.mark.parametrize("vendor", ["nvidia", "amd", "ascend"])
def test_no_name_of_the_table_is_a_guess(vendor: str) -> None:
    rows = _by_vendor(ROWS)[vendor]
    assert guessed_comm(_frame(rows), vendor).height == 0


@pytest.mark.parametrize(
    ("name", "fused"),
    [
        ("void deep_ep_v2::internode_ll::dispatch<true, false, 7168>(void*, int*)", True),
        ("void my_ep::internode_ll::combine<false, 7168, 9>(void*)", True),
        ("void deepep::intranode::notify_dispatch<8>(int const*, int*)", False),
        ("void deepep::intranode::dispatch<8, 768, 8192>(int4*, float*)", False),
        ("void deep_ep::low_latency::combine<(bool)0, (int)7168>(void*)", True),
    ],
)
def test_an_expert_parallel_fork_in_another_namespace_is_still_known(
    name: str, fused: bool
) -> None:
    row = classify(_frame([{"name": name}]), "nvidia").row(0, named=True)
    assert (row["category"], row["is_comm"], row["is_fused_comm"]) == ("comm", True, fused)
    assert guessed_comm(_frame([{"name": name}]), "nvidia").height == 0


UNKNOWN = [
    "void mylab::fancy_allreduce_v2<__nv_bfloat16, 8>(mylab::Params)",
    "rocshmem_ctx_putmem_kernel",
    "void xccl::ring_all_gather_v3<float>(float*, int)",
    "void router::moe_token_dispatch_kernel<8>(int*)",
    "sm100_reduce_scatter_rs_tma_kernel",
    "void ep::send_tokens_kernel(int*)",
    "NewAlltoAllVKernel",
]


def test_unknown_names_that_look_like_communication_are_counted_and_listed() -> None:
    rows = [{"name": n} for n in UNKNOWN] + [{"name": "void at::native::reduce_kernel<512>()"}]
    frame = _frame(rows, dur=2_500)
    out = classify(frame, "nvidia")
    assert out["is_comm"].to_list() == [True] * len(UNKNOWN) + [False]
    assert set(out["category"][: len(UNKNOWN)]) == {"comm"}
    guessed = guessed_comm(pl.concat([frame, frame.head(1)]), "nvidia")
    assert guessed.row(0) == (UNKNOWN[0], 2, 5_000)  # most time first
    assert sorted(guessed["name"]) == sorted(UNKNOWN)
    assert guessed["ns"].sum() == 2_500 * (len(UNKNOWN) + 1)


def test_a_users_pattern_settles_a_guess_either_way(tmp_path: Path) -> None:
    path = tmp_path / "mine.toml"
    path.write_text(
        "[[category]]\nmatch = 'fancy_allreduce'\ncategory = 'comm'\ncomm = true\n"
        "[[category]]\nmatch = 'moe_token_dispatch'\ncategory = 'moe'\n"
    )
    taxonomy = load_patterns(path)
    frame = _frame([{"name": UNKNOWN[0]}, {"name": UNKNOWN[3]}])
    out = classify(frame, "nvidia", taxonomy)
    assert out.select("category", "is_comm").rows() == [("comm", True), ("moe", False)]
    assert guessed_comm(frame, "nvidia", taxonomy).height == 0


def test_host_rows_and_copies_are_never_guesses() -> None:
    frame = _frame(
        [
            {"name": "nccl:all_reduce", "kind": "cpu_op"},
            {"name": "Memcpy DtoD (all_gather buffer)", "kind": "memcpy"},
        ]
    )
    assert not classify(frame, "nvidia")["is_comm"].any()
    assert guessed_comm(frame, "nvidia").height == 0


def test_inductor_kernels_and_broadcasting_ops_are_not_guesses() -> None:
    names = [
        "triton_poi_fused_add_all_reduce_bitwise_and_embedding_0",
        "void k_bin_bcast<&(op_add(float, float)), float, float>(float const*)",
        "BroadcastTo",
        "aclnnSendTokensToCpu_Cast_Cast",
    ]
    frame = _frame([{"name": n} for n in names])
    assert guessed_comm(frame, "nvidia").height == 0
    assert not classify(frame, "nvidia")["is_comm"].any()


def test_the_look_alikes_include_tensor_reductions() -> None:
    # a name is communication by its function: a reduction over one device's tensor whose
    # name holds a collective's words ("All_Reduce" in aclnnAll_ReduceAll_ReduceAll) is not
    alike = {r["name"] for r in ROWS if r["is_comm"] == "false"}
    reductions = {
        "aclnnAll_ReduceAll_ReduceAll", "ReduceAll", "aclnnAny_ReduceAny_ReduceAny", "ReduceSum",
        "aclnnReduceSum_ReduceSumOpAiCore_ReduceSum", "triton_unk_fused_all_reduce_add_0",
    }  # fmt: skip
    assert reductions <= alike
    assert any("at::native::reduce_kernel" in n for n in alike)
    frame = _frame([{"name": n} for n in sorted(reductions)])
    out = classify(frame, "ascend")
    assert not out["is_comm"].any() and guessed_comm(frame, "ascend").height == 0
    assert set(out.filter(pl.col("name").str.contains("Reduce"))["category"]) == {"elementwise"}


@pytest.mark.parametrize("kind", ["comm", "kernel"])
def test_a_reduction_is_communication_by_its_engine_or_kind(kind: str) -> None:
    # an HCCL operator's reduce task on the AI Cores is the collective's (kind comm, engine
    # comm); the same name as a plain kernel on the AI Vector cores is a tensor reduction
    engine = "comm" if kind == "comm" else "aiv"
    frame = pl.DataFrame(
        {"name": ["ReduceSum_AddN", "aclnnAll_ReduceAll_ReduceAll"], "kind": [kind] * 2,
         "engine": [engine] * 2, "dur": [4_000, 6_000]},
        schema=SCHEMA,
    )  # fmt: skip
    out = classify(frame, "ascend")
    assert out["is_comm"].to_list() == [kind == "comm"] * 2
    comm_ns = out.filter("is_comm")["dur"].sum()
    assert comm_ns == (10_000 if kind == "comm" else 0)
