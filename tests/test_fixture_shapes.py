"""The fixtures emit operator shapes as the real exports do (Kineto ``record_shapes`` keys on
the launching ``cpu_op``; torch_npu ``Input Shapes`` … in ``kernel_details.csv``), the shapes
survive ``tracekit.load``, and the hand-computed truth is what the arithmetic says and what the
roofline formulas give."""

from __future__ import annotations

import csv
import gzip
import json
from collections.abc import Callable
from pathlib import Path

import polars as pl
import pytest

import tracekit
from fixtures.ascend_names import OPS
from fixtures.ascend_scenario import build_ascend_scenario
from fixtures.ascend_text_writer import write_torch_npu
from fixtures.kineto_writer import write_kineto_json
from fixtures.make_demo import make_ascend_demo
from fixtures.scenario import build_scenario
from fixtures.scenario_shapes import ascend_role_truth, role_truth, torch_op
from fixtures.serving import decode
from fixtures.shaped_ops import (
    ASCEND_OPS,
    ASCEND_TRUTH,
    KV_TOKENS,
    SEQ_LENS,
    TORCH_OPS,
    TORCH_TRUTH,
    ascend_events,
    torch_events,
)
from tests.conftest import real_file
from tracekit.metrics.roofline.formulas.inputs import ascend_shapes, torch_shapes
from tracekit.metrics.roofline.formulas.registry import work_of_strict
from tracekit.metrics.shapes import launching_op_dims

ORDER = [
    "External id",
    "Record function id",
    "Concrete Inputs",
    "Input type",
    "Input Strides",
    "Input Dims",
    "Ev Idx",
]
REAL_TYPES = {"c10::BFloat16", "c10::Float8_e4m3fn", "float", "int", "long int", "Scalar", ""}


def _trace(path: Path) -> dict:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt") as fh:
        return json.load(fh)


def _kernel_ops(trace: dict) -> list[tuple[dict, dict | None]]:
    """(kernel, its launching cpu_op or None) for every kernel, in file order."""
    ops = {e["args"]["External id"]: e for e in trace["traceEvents"] if e.get("cat") == "cpu_op"}
    kernels = [e for e in trace["traceEvents"] if e.get("cat") == "kernel"]
    return [(k, ops.get(k["args"].get("External id"))) for k in kernels]


@pytest.mark.parametrize("flavour", ["cuda-2024", "rocm"])
def test_shaped_ops_carry_the_record_shapes_keys_in_the_profilers_order(
    tmp_path: Path, flavour: str
) -> None:
    path = write_kineto_json(torch_events(), tmp_path / "ops.json", flavour=flavour)
    pairs = _kernel_ops(_trace(path))
    assert [op["name"] for _, op in pairs] == [op.name for op, _ in TORCH_OPS.values()]
    for _, op in pairs:
        args = op["args"]
        assert list(args) == ORDER
        width = len(args["Input Dims"])
        assert all(len(args[k]) == width for k in ORDER[2:6])
        assert set(args["Input type"]) <= REAL_TYPES
        assert all(isinstance(v, str) for v in args["Concrete Inputs"])
    mm = pairs[0][1]["args"]
    assert mm["Input Dims"] == [[64, 7168], [7168, 2048]]
    assert mm["Input Strides"] == [[7168, 1], [1, 7168]]  # the weight viewed as w.t()
    scaled = pairs[3][1]["args"]
    assert scaled["Input type"][:4] == ["c10::Float8_e4m3fn"] * 2 + ["float"] * 2
    assert scaled["Concrete Inputs"][6:] == ["15", "False"]  # out_dtype bf16
    paged = pairs[6][1]["args"]
    assert paged["Input Dims"][6] == [64, 63] and paged["Concrete Inputs"][9] == "1004"
    assert max(SEQ_LENS) == 1004 and sum(SEQ_LENS) == KV_TOKENS == 48_128
    norm = pairs[7][1]["args"]
    assert norm["Concrete Inputs"][3] == "9.9999999999999995e-07"  # 1e-6 as c10 prints it


def test_the_key_order_and_value_forms_are_those_of_a_real_trace(tmp_path: Path) -> None:
    real = _trace(
        real_file(
            "nvidia", "tracelens-h100-hf-qwen1.5-0.5b/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"
        )
    )
    real_mm = next(op for _, op in _kernel_ops(real) if op and op["name"] == "aten::mm")
    mine = write_kineto_json(torch_events(), tmp_path / "ops.json")
    mine_mm = next(op for _, op in _kernel_ops(_trace(mine)) if op["name"] == "aten::mm")
    assert list(mine_mm["args"]) == list(real_mm["args"]) == ORDER
    for key in ORDER[2:6]:
        assert type(mine_mm["args"][key]) is type(real_mm["args"][key])
    # the same transposed-weight view of a linear layer's weight: strides [1, k]
    assert real_mm["args"]["Input Strides"][1][0] == mine_mm["args"]["Input Strides"][1][0] == 1


def test_shapes_reach_the_kernels_through_tracekit_load(tmp_path: Path) -> None:
    rows = tracekit.load(write_kineto_json(torch_events(), tmp_path / "ops.json")).df
    kernels = rows.filter(pl.col("kind") == "kernel").sort("ts")
    found = launching_op_dims(rows, kernels.select("rank", "corr", "args"))
    want = [(op.name, json.dumps(op.record()["Input Dims"], separators=(",", ":")))
            for op, _ in TORCH_OPS.values()]  # fmt: skip
    assert list(zip(found["op"].to_list(), found["input_dims"].to_list())) == want


def test_record_shapes_is_off_by_default_and_shapes_every_eager_computing_kernel() -> None:
    plain = build_scenario(steps=1, layers=2)
    assert not plain.events["args"].str.contains("op_args").any()
    assert "roofline_steps" not in plain.truth
    sc = build_scenario(steps=1, layers=2, record_shapes=True)
    kernels = sc.events.filter(pl.col("kind") == "kernel")
    shaped = kernels.filter(pl.col("args").str.contains('"op_args"'))
    ops = shaped["args"].str.json_path_match("$.op_name").alias("op").value_counts().sort("op")
    assert dict(ops.iter_rows()) == {
        "_C::fused_add_rms_norm": 2, "_C::rms_norm": 1, "_C::silu_and_mul": 4,
        "_flashmla_C::fwd_kvcache_mla": 4, "_moe_C::topk_softmax": 2, "aten::_scaled_grouped_mm": 4,
        "aten::_scaled_mm": 2, "aten::addmm": 2, "aten::bmm": 4, "aten::mm": 9,
        "flashinfer::top_k_mask_logits": 1, "flashinfer::top_k_top_p_sampling_from_probs": 1,
    }  # fmt: skip
    # unshaped, as in real traces: the fused all-reduce + norm and DeepEP's dispatch / combine
    assert kernels.height - shaped.height == 2 * 3
    assert len(sc.truth["shaped_ops"]) == shaped.height - 2  # the combine shares its op


def test_flashmla_and_its_combine_kernel_are_one_operator(tmp_path: Path) -> None:
    sc = build_scenario(steps=1, layers=2, record_shapes=True)
    pairs = _kernel_ops(_trace(write_kineto_json(sc.events, tmp_path / "sc.json")))
    mla = [(k, op) for k, op in pairs if op and op["name"] == "_flashmla_C::fwd_kvcache_mla"]
    assert [("combine" in k["name"]) for k, _ in mla] == [False, True] * 2
    assert mla[0][1] is mla[1][1] and mla[2][1] is mla[3][1] and mla[0][1] is not mla[2][1]
    op = mla[0][1]
    assert op["args"]["Input Dims"][:5] == [[64, 1, 128, 576], [4096, 64, 1, 576], [], [64],
                                            [64, 16]]  # fmt: skip
    end = float(op["ts"]) + float(op["dur"])  # the op spans both launches
    launches = [e for e in _trace(tmp_path / "sc.json")["traceEvents"]
                if e.get("cat") == "cuda_runtime"
                and e["args"].get("External id") == op["args"]["External id"]]  # fmt: skip
    assert len(launches) == 2 and all(float(op["ts"]) <= float(e["ts"]) < end for e in launches)


def test_graph_replayed_kernels_get_no_shapes() -> None:
    sc = build_scenario(steps=1, layers=2, record_shapes=True, graphs="piecewise")
    shaped = sc.events.filter(pl.col("args").str.contains('"op_args"'))
    names = set(shaped["args"].str.json_path_match("$.op_name").to_list())
    # attention runs eagerly between the pieces, sampling after the last one
    assert names == {
        "_flashmla_C::fwd_kvcache_mla",
        "flashinfer::top_k_mask_logits",
        "flashinfer::top_k_top_p_sampling_from_probs",
    }


def test_hand_truth_of_the_shaped_ops() -> None:
    got = {k: (v["flops"], v["bytes"]) for k, v in TORCH_TRUTH.items()}
    assert got == {
        "mm": (1_879_048_192, 30_539_776),
        "addmm": (1_879_179_264, 30_543_872),
        "bmm": (1_073_741_824, 27_262_976),
        "scaled_mm": (1_879_048_192, 15_409_408),
        "grouped_mm": (3_758_096_384, 37_224_464),
        "sdpa_prefill": (17_196_646_400, 67_108_864),
        "paged_decode": (263_192_576, 33_308_672),
        "rms_norm": (1_835_008, 1_849_344),
        "silu_and_mul": (5_242_880, 6_291_456),
    }
    paged = TORCH_TRUTH["paged_decode"]
    assert (paged["true_flops"], paged["true_bytes"]) == (197_132_288, 24_920_064)
    got = {k: (v["flops"], v["bytes"]) for k, v in ASCEND_TRUTH.items()}
    assert got == {
        "matmul": (1_879_048_192, 30_539_776),
        "matmul_bias": (1_879_179_264, 30_543_872),
        "batch_matmul": (1_073_741_824, 27_262_976),
        "quant_matmul": (1_879_048_192, 15_409_408),
        "grouped_matmul": (3_758_096_384, 37_224_480),
        "flash_attention": (4_294_967_296, 22_020_096),
        "paged_decode": (268_435_456, 33_818_624),
        "rms_norm": (1_835_008, 1_849_600),
        "swiglu": (5_242_880, 6_291_456),
    }
    assert ASCEND_TRUTH["flash_attention"]["true_flops"] == 2_151_677_952  # causal half


def test_hand_truth_of_a_decode_step() -> None:
    sc = build_scenario(record_shapes=True)  # 4 layers of 64 tokens; step 0 caches 1,000
    step = sc.truth["roofline_steps"][0]
    assert {f: (v["count"], v["flops"], v["bytes"]) for f, v in step.items()} == {
        "activation": (8, 23_592_960, 28_311_552),
        "attention": (4, 73_014_444_032, 373_310_464),
        "gemm": (33, 81_499_586_560, 1_264_919_552),
        "grouped_gemm": (8, 180_388_626_432, 770_392_192),
        "norm": (5, 11_010_048, 16_586_752),
    }
    # what the FlashMLA decode really does: 1,000 cached tokens, not the table's 1,024
    assert (step["attention"]["true_flops"], step["attention"]["true_bytes"]) == (
        71_303_168_000,
        366_232_576,
    )
    assert sc.truth["roofline_steps"][3]["attention"]["true_flops"] == 4 * 2 * 64 * 128 * 1003 * (
        576 + 512
    )


def _work(shapes: object) -> tuple:
    work = work_of_strict(shapes) if shapes is not None else None  # type: ignore[arg-type]
    return (None,) if work is None else (work.family, work.flops, work.bytes, work.exact)


def _want(truth: dict | None) -> tuple:
    if truth is None:
        return (None,)
    return (truth["family"], truth["flops"], truth["bytes"], truth["exact"])


def test_the_truth_is_what_the_roofline_formulas_give() -> None:
    for key, (op, _) in TORCH_OPS.items():
        rec = op.record()
        texts = [json.dumps(rec[k]) for k in ("Input Dims", "Input type", "Concrete Inputs")]
        assert _work(torch_shapes(op.name, *texts)) == _want(TORCH_TRUTH[key]), key
    for key, (name, op_type, _, ins, in_dt, _, outs, out_dt, _) in ASCEND_OPS.items():
        shapes = ascend_shapes(op_type, f'"{ins}"', in_dt, f'"{outs}"', out_dt, name=name)
        assert _work(shapes) == _want(ASCEND_TRUTH[key]), key
    for role in ("rmsnorm", "qkv_a", "q_b", "q_absorb", "attention", "w13", "act", "lm_head"):
        op = torch_op(role, decode(64), 2)
        assert op is not None
        rec = op.record()
        texts = [json.dumps(rec[k]) for k in ("Input Dims", "Input type", "Concrete Inputs")]
        assert _work(torch_shapes(op.name, *texts)) == _want(role_truth(role, decode(64), 2))
    for role, op in OPS.items():
        shapes = ascend_shapes(
            op.op_type, f'"{op.input_shapes}"', op.input_dtypes, f'"{op.output_shapes}"',
            op.output_dtypes, name=op.name,
        )  # fmt: skip
        assert _work(shapes) == _want(ascend_role_truth(role)), role


def test_torch_npu_kernel_details_hold_shapes_as_the_real_export(tmp_path: Path) -> None:
    out = write_torch_npu(ascend_events(), tmp_path)
    text = (out / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv").read_text()
    assert ',"""64,7168;2048,7168;2048""",DT_BF16;DT_BF16;DT_BF16,ND;ND;ND,"""64,2048""",' in text
    with open(out / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    grouped = next(r for r in rows if r["Type"] == "GroupedMatmul")
    assert grouped["Input Shapes"] == '"512,7168;4,512,7168;;;;;;4"'  # the real 8-input form
    assert len(grouped["Input Data Types"].split(";")) == 8
    loaded = tracekit.load(out).df.filter(pl.col("kind") == "kernel").sort("ts")
    shapes = loaded["args"].str.json_path_match("$.input_shapes").to_list()
    assert shapes == [v[3] for v in ASCEND_OPS.values()]


def test_the_ascend_scenario_shapes_its_operators() -> None:
    sc = build_ascend_scenario(steps=1, layers=1)
    kernels = sc.events.filter(pl.col("kind") == "kernel")
    args = [json.loads(a) for a in kernels["args"].to_list()]
    by_type = {a["op_type"]: a for a in args}
    fia = by_type["FusedInferAttentionScore"]
    assert fia["input_shapes"].split(";")[14] == "64,1"  # the block table
    assert fia["input_shapes"].startswith("64,1,128,576;")  # one query token: decode
    assert by_type["AddRmsNorm"]["output_dtypes"] == "DT_BF16;FLOAT;DT_BF16"
    assert by_type["GroupedMatmul"]["input_dtypes"].split(";")[0] in ("INT8", "DT_BF16")


# Every shaped fixture, written as its export and the device to analyse it on (None: the one
# its trace names, the Kineto writer's H200), and how many distinct (operator, shapes) it has.
SHAPED_FIXTURES: dict[str, tuple[Callable[[Path], Path], str | None, int]] = {
    "kineto-scenario": (
        lambda tmp: write_kineto_json(
            build_scenario(steps=4, layers=4, record_shapes=True).events, tmp / "sc.json"
        ),
        None,
        15,
    ),
    "kineto-scenario-jitter-fallback": (
        lambda tmp: write_kineto_json(
            build_scenario(
                steps=4, layers=4, record_shapes=True, jitter=0.03, fallback_kernel=True
            ).events,
            tmp / "sc.json",
        ),
        None,
        18,
    ),
    "ascend-scenario": (
        lambda tmp: write_torch_npu(build_ascend_scenario(steps=4, layers=4).events, tmp),
        "910b2",
        19,
    ),
    "ascend-scenario-mla": (
        lambda tmp: write_torch_npu(
            build_ascend_scenario(steps=4, layers=4, record_shapes=True).events, tmp
        ),
        "910b2",
        22,
    ),
    "ascend-demo": (lambda tmp: make_ascend_demo(tmp), "910b2", 19),
    "torch-ops": (lambda tmp: write_kineto_json(torch_events(), tmp / "ops.json"), None, 9),
    "ascend-ops": (lambda tmp: write_torch_npu(ascend_events(), tmp), "910b2", 9),
}


@pytest.mark.parametrize("fixture", list(SHAPED_FIXTURES))
def test_every_shaped_operator_runs_within_its_roofline(tmp_path: Path, fixture: str) -> None:
    """Each instance of each shaped operator at 15-100 % of its roofline bound on the device
    the trace names (the Ascend ones name no variant: the 910B2), and the device check does
    not call any of them impossible."""
    write, device, distinct = SHAPED_FIXTURES[fixture]
    analysis = tracekit.analyze(tracekit.load(write(tmp_path)), device=device)
    roof = analysis.roofline
    assert roof.operators.height == distinct
    rows = roof.rows.with_columns(efficiency=pl.col("bound_ns") / pl.col("dur"))
    assert rows["efficiency"].null_count() == 0
    worst = rows.sort("efficiency").select("op", "shapes", "efficiency")
    assert worst["efficiency"].min() > 0.15, worst.head(3).to_dicts()
    assert worst["efficiency"].max() < 1.0, worst.tail(3).to_dicts()
    assert roof.operators["efficiency"].is_between(0.15, 1.0, closed="none").all()
    [check] = [c for c in analysis.checks if c.name == "roofline.devices"]
    assert "faster than" not in check.detail, check.detail
