"""Kernels matched by role across renames and vendors (tracekit.diff.roles): each stage on
its own, a vendor switch written by two profilers' writers, and the real H100 / MI300X pair
of one Hugging Face benchmark (TraceLens's own comparison of it is the oracle)."""

from __future__ import annotations

import os
from pathlib import Path

import polars as pl
import pytest

import tracekit
from fixtures.nsys_writer import write_nsys_sqlite
from fixtures.rocpd_writer import write_rocpd
from fixtures.rocprof_names import amd_kernel
from fixtures.scenario import KERNELS, build_scenario
from tracekit.diff import compare
from tracekit.diff.roles import Side, match_roles
from tracekit.diff.samples import OPS_SCHEMA
from tracekit.names import kernel_key

SIDE_SCHEMA = {"key": pl.String, "category": pl.String, "fallback": bool, "ns": pl.Float64}


def _side(kernels: list[tuple], ops: list[tuple] = (), sequences: list[list[str]] = ()) -> Side:
    """A side from (key, category, fallback, ns) kernels and (key, op, shapes, n, ns) operator
    rows, every row a kernel."""
    catalogue = pl.DataFrame(kernels, schema=SIDE_SCHEMA, orient="row")
    rows = [(k, op, shapes, n, n, ns) for k, op, shapes, n, ns in ops]
    return Side(catalogue, pl.DataFrame(rows, schema=OPS_SCHEMA, orient="row"), sequences)


def _by_key(roles: list) -> dict[str, tuple]:
    return {r.key: (r.base_keys, r.head_keys, r.matched_by, r.presence) for r in roles}


def test_operator_with_shapes_before_operator_alone() -> None:
    dims_a, dims_b = "[[16,896],[896,896]]", "[[16,896],[896,4864]]"
    base = _side(
        [("sm90_a", "gemm", False, 10.0), ("sm90_b", "gemm", False, 20.0)],
        [("sm90_a", "aten::mm", dims_a, 4, 10.0), ("sm90_b", "aten::mm", dims_b, 4, 20.0)],
    )
    head = _side(
        [("Cijk_x", "gemm", False, 12.0), ("Cijk_y", "gemm", False, 25.0)],
        [("Cijk_x", "aten::mm", dims_a, 4, 12.0), ("Cijk_y", "aten::mm", dims_b, 4, 25.0)],
    )
    roles = _by_key(match_roles(base, head))
    assert roles == {
        "sm90_a": (["sm90_a"], ["Cijk_x"], "operator+shapes", "renamed"),
        "sm90_b": (["sm90_b"], ["Cijk_y"], "operator+shapes", "renamed"),
    }
    # shapes unknown on one side: the operator alone joins all of its kernels
    head = _side(
        head.catalogue.rows(),
        [("Cijk_x", "aten::mm", None, 4, 12.0), ("Cijk_y", "aten::mm", None, 4, 25.0)],
    )
    (role,) = match_roles(base, head)
    assert (role.base_keys, role.head_keys, role.matched_by, role.op) == (
        ["sm90_a", "sm90_b"],
        ["Cijk_x", "Cijk_y"],
        "operator",
        "aten::mm",
    )


def test_function_name_within_a_category_and_unmatched_leftovers() -> None:
    base = _side(
        [
            ("elementwise_kernel<128, 4>", "elementwise", False, 5.0),
            ("old_only", "other", False, 1.0),
        ]
    )
    head = _side(
        [
            ("elementwise_kernel<128, 8>", "elementwise", False, 4.0),
            ("new_only", "comm", False, 2.0),
        ]
    )
    roles = _by_key(match_roles(base, head))
    assert roles["elementwise_kernel<128, 4>"] == (
        ["elementwise_kernel<128, 4>"],
        ["elementwise_kernel<128, 8>"],
        "function",
        "renamed",
    )
    # no sequences to align: other categories stay unmatched
    assert roles["old_only"] == (["old_only"], [], None, "disappeared")
    assert roles["new_only"] == ([], ["new_only"], None, "appeared")


def test_order_pairs_a_replaced_stretch_but_not_an_insertion() -> None:
    steps_b = [["norm", "gemm_a", "act", "gemm_b", "copy"]] * 3
    steps_h = [["norm", "gemm_a", "fb1", "fb2", "fb3", "gemm_b", "extra_memset", "copy"]] * 3
    base = _side(
        [
            (k, c, False, 1.0)
            for k, c in [
                ("norm", "norm"),
                ("gemm_a", "gemm"),
                ("act", "activation"),
                ("gemm_b", "gemm"),
                ("copy", "memory"),
            ]
        ],
        sequences=steps_b,
    )
    head = _side(
        [
            ("norm", "norm", False, 1.0),
            ("gemm_a", "gemm", False, 1.0),
            ("gemm_b", "gemm", False, 1.0),
            ("copy", "memory", False, 1.0),
        ]
        + [(k, "elementwise", True, 1.0) for k in ("fb1", "fb2", "fb3")]
        + [("extra_memset", "memory", False, 1.0)],
        sequences=steps_h,
    )
    roles = _by_key(match_roles(base, head))
    assert roles["act"] == (["act"], ["fb1", "fb2", "fb3"], "order", "role")
    assert roles["extra_memset"] == ([], ["extra_memset"], None, "appeared")  # inserted: no partner
    assert roles["gemm_a"][2:] == ("name", "both")
    fallback = next(r for r in match_roles(base, head) if r.key == "act")
    assert fallback.fallback


@pytest.fixture(scope="module")
def vendor_pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, dict]:
    """The same scenario (an unfused all-reduce so that a plain collective runs too) written
    by the nsys writer and by the rocpd writer with ROCm kernel names: a vendor switch with
    no performance change."""
    tmp = tmp_path_factory.mktemp("vendor")
    sc = build_scenario(steps=8, layers=2, unfused_collective=True)
    nvidia = write_nsys_sqlite(sc.events, tmp / "nvidia.sqlite")
    amd = write_rocpd(sc.events, tmp / "amd.db")
    runs = [tracekit.analyze(tracekit.load(p)) for p in (nvidia, amd)]
    data = compare([runs[0]], [runs[1]], allow_low_confidence=True).to_dict()
    return data, {k["name"]: k for k in data["kernels"]}


def test_vendor_switch_matches_every_kernel_by_role(vendor_pair: tuple[dict, dict]) -> None:
    data, kernels = vendor_pair
    assert data["verdict"] == "no significant change" and data["step"]["estimate"]["delta"] == 0
    assert {k["detail"]["presence"] for k in data["kernels"]} == {"renamed"}
    assert all(k["estimate"]["delta"] == 0 for k in data["kernels"])
    for role in (
        "qkv_a",
        "o_proj",
        "router",
        "lm_head",
        "attention",
        "rmsnorm",
        "nccl_allreduce",
        "w13",
        "topk",
    ):
        spec = KERNELS[role]
        row = kernels[kernel_key(spec.name)]
        want = kernel_key(amd_kernel(spec.name, spec.args).name)
        assert row["detail"]["head_names"] == [want], role
        assert row["detail"]["matched_by"] in ("function", "order")
    # DeepEP's ROCm port keeps its function name: matched without the order
    assert kernels[kernel_key(KERNELS["dispatch"].name)]["detail"]["matched_by"] == "function"
    assert kernels[kernel_key(KERNELS["nccl_allreduce"].name)]["detail"]["category"] == "comm"


REAL = os.environ.get("TRACEKIT_REAL_TRACES")
QWEN = "Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"
H100 = f"nvidia/tracelens-h100-hf-qwen1.5-0.5b/{QWEN}"
MI300X = f"amd/kineto_mi300x_hf_qwen1.5_0.5b_eager/{QWEN}"


@pytest.fixture(scope="module")
def qwen() -> dict:
    if not REAL or not all((Path(REAL) / p).exists() for p in (H100, MI300X)):
        pytest.skip("TRACEKIT_REAL_TRACES with the Qwen H100 / MI300X pair is not set")
    runs = [tracekit.analyze(tracekit.load(Path(REAL) / p)) for p in (H100, MI300X)]
    return compare([runs[0]], [runs[1]], allow_low_confidence=True).to_dict()


def test_real_cross_vendor_pair_reads_per_operation(qwen: dict) -> None:
    # TraceLens's ops summary of the same pair (compare_h100_mi300_qwen_csvs), in ms
    oracle = {
        "aten::mm": (6.67, 8.66),
        "aten::addmm": (2.33, 2.95),
        "aten::_flash_attention_forward": (2.72, 3.91),
        "aten::mul": (6.75, 4.54),
    }
    ops = {o["op"]: o for o in qwen["operations"]}
    for op, (base_ms, head_ms) in oracle.items():
        assert ops[op]["base_ns"] / 1e6 == pytest.approx(base_ms, abs=0.005), op
        assert ops[op]["head_ns"] / 1e6 == pytest.approx(head_ms, abs=0.005), op
    # 96 GEMM kernels a side (the H100's time also holds a cuBLAS memset beside each)
    assert ops["aten::mm"]["count_base"] == ops["aten::mm"]["count_head"] == 96
    assert ops["aten::copy_"]["count_base"] == 197


def test_real_cross_vendor_pair_pairs_kernels_by_role(qwen: dict) -> None:
    kernels = qwen["kernels"]
    by_op = {}
    for k in kernels:
        by_op.setdefault(k["detail"]["op"], []).append(k)
    # GEMM: cuBLAS sm90_xmma on H100 against hipBLASLt Cijk tiles on MI300X, one role
    (gemm,) = [k for k in by_op["aten::mm"] if k["detail"]["category"] == "gemm"]
    assert gemm["detail"]["matched_by"] == "operator+shapes"
    assert any(n.startswith("sm90_xmma_gemm") for n in gemm["detail"]["base_names"])
    assert all(n.startswith("Cijk_") for n in gemm["detail"]["head_names"])
    assert len(gemm["detail"]["head_names"]) == 2
    # attention: FlashAttention-2 against AOTriton's attn_fwd
    (attn,) = by_op["aten::_flash_attention_forward"]
    assert attn["detail"]["head_names"] == ["attn_fwd"]
    assert attn["detail"]["base_names"][0].startswith("pytorch_flash::flash_fwd_kernel")
    # every launch of the kernels, with an operator linked (24 per side) or not
    assert (attn["detail"]["count_base"], attn["detail"]["count_head"]) == (34, 34)
    # RMSNorm runs eagerly on both (pow, mean, add, rsqrt, mul): the kernels of pow and rsqrt
    # carry one name on both sides, mean's reduce kernel other template arguments
    (mean,) = by_op["aten::mean"]
    assert (mean["detail"]["matched_by"], mean["detail"]["presence"]) == (
        "operator+shapes",
        "renamed",
    )
    assert mean["detail"]["base_names"][0].startswith("at::native::reduce_kernel<512, 1,")
    assert mean["detail"]["head_names"][0].startswith("at::native::reduce_kernel<")
    names = {k["label"]: k["detail"]["presence"] for k in kernels}
    assert names["at::native::vectorized_elementwise_kernel [pow]"] == "both"
    assert names["at::native::vectori…d_elementwise_kernel [rsqrt_kernel_cuda]"] == "both"
    presence = {k["detail"]["presence"] for k in kernels}
    assert presence <= {"both", "renamed", "role", "appeared"}
    appeared = [k for k in kernels if k["detail"]["presence"] == "appeared"]
    assert [k["label"] for k in appeared] == [
        "at::native::vectorized_elementwise_kernel [FillFunctor]"
    ]


def test_order_never_joins_kernels_of_other_categories() -> None:
    """A replaced stretch around a name-matched copy: the all-reduce of one side and the MoE
    kernels of the other stand in one place, but do different jobs."""
    steps_b = [["norm", "all_reduce", "copy", "gemm"]] * 3
    steps_h = [["norm", "moe_gemm", "copy", "routing", "gemm"]] * 3
    base = _side(
        [
            ("norm", "norm", False, 1.0),
            ("all_reduce", "comm", False, 5.0),
            ("copy", "memory", False, 1.0),
            ("gemm", "gemm", False, 2.0),
        ],
        sequences=steps_b,
    )
    head = _side(
        [
            ("norm", "norm", False, 1.0),
            ("moe_gemm", "moe", False, 9.0),
            ("copy", "memory", False, 1.0),
            ("routing", "moe", False, 1.0),
            ("gemm", "gemm", False, 2.0),
        ],
        sequences=steps_h,
    )
    roles = _by_key(match_roles(base, head))
    assert roles["copy"] == (["copy"], ["copy"], "name", "both")
    assert roles["all_reduce"] == (["all_reduce"], [], None, "disappeared")
    assert roles["moe_gemm"] == ([], ["moe_gemm"], None, "appeared")
    assert roles["routing"] == ([], ["routing"], None, "appeared")


def test_long_steps_are_aligned_on_their_first_kernels() -> None:
    """A step of 50,000 kernels: only the first MAX_TOKENS are aligned (difflib is quadratic),
    and a rename in them is still found."""
    from tracekit.diff.roles import MAX_TOKENS

    layer_b, layer_h = ["norm", "gemm_old", "act"], ["norm", "gemm_new", "act"]
    base = _side(
        [
            ("norm", "norm", False, 1.0),
            ("gemm_old", "gemm", False, 1.0),
            ("act", "activation", False, 1.0),
        ],
        sequences=[layer_b * 16_667],
    )
    head = _side(
        [
            ("norm", "norm", False, 1.0),
            ("gemm_new", "gemm", False, 1.0),
            ("act", "activation", False, 1.0),
        ],
        sequences=[layer_h * 16_667],
    )
    assert len(base.sequences[0]) > 10 * MAX_TOKENS
    roles = _by_key(match_roles(base, head))
    assert roles["gemm_old"] == (["gemm_old"], ["gemm_new"], "order", "renamed")
