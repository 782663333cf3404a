"""Parsing the shapes texts of the real exports into Shapes (Kineto ``Input Dims`` / ``Input
type`` / ``Concrete Inputs``; torch_npu ``Input Shapes`` / ``Input Data Types``), and every
distinct (operator, shapes) of real samples through the formulas without an exception."""

from __future__ import annotations

import csv
import gzip
import json

from tests.conftest import real_file
from tracekit.metrics.roofline.dtypes import canonical, from_code, itemsize
from tracekit.metrics.roofline.formulas.inputs import ascend_shapes, torch_shapes
from tracekit.metrics.roofline.formulas.registry import work_of_strict


def test_canonical_dtypes_and_itemsizes() -> None:
    names = {
        "c10::BFloat16": "bf16", "c10::Half": "fp16", "float": "fp32", "double": "fp64",
        "c10::Float8_e4m3fn": "fp8", "c10::Float8_e5m2fnuz": "fp8", "signed char": "int8",
        "unsigned char": "uint8", "int": "int32", "long int": "int64", "bool": "bool",
        "c10::Float4_e2m1fn_x2": "fp4", "FLOAT": "fp32", "FLOAT16": "fp16", "BF16": "bf16",
        "DT_BF16": "bf16", "INT8": "int8", "INT4": "int4", "FLOAT8_E4M3FN": "fp8",
        "HIFLOAT8": "fp8", "FLOAT4_E2M1": "fp4", "UINT64": "uint64",
    }  # fmt: skip
    assert {k: canonical(k) for k in names} == names
    assert canonical("Scalar") is None and canonical("UNDEFINED") is None and canonical("") is None
    assert (itemsize("fp4"), itemsize("int4"), itemsize("bf16"), itemsize("int64")) == (
        0.5,
        0.5,
        2,
        8,
    )
    assert from_code("15") == "bf16" and from_code("6") == "fp32" and from_code("") is None


def test_kineto_texts() -> None:
    # the real aten::linear and aten::cat texts of the Qwen1.5 trace
    s = torch_shapes(
        "aten::linear",
        "[[16, 559, 1024], [1024, 1024], []]",
        '["c10::BFloat16", "c10::BFloat16", ""]',
        '["", "", ""]',
    )
    assert s is not None and s.source == "torch"
    assert s.inputs == ((16, 559, 1024), (1024, 1024), None)
    assert s.dtypes == ("bf16", "bf16", None) and s.scalars == ("", "", "")
    cat = torch_shapes(
        "aten::cat", "[[[16, 16, 559, 32], [16, 16, 559, 32]], []]", '["TensorList", "Scalar"]',
        '["", "-1"]',
    )  # fmt: skip
    assert cat is not None and cat.inputs == (None, None)
    assert cat.lists == (((16, 16, 559, 32), (16, 16, 559, 32)), None)
    assert cat.scalars == ("", "-1")
    # a number argument is no tensor; a 0-d tensor of a dtype is
    mul = torch_shapes("aten::mul", "[[1, 559, 64], []]", '["float", "double"]', '["", ""]')
    assert mul is not None and mul.inputs == ((1, 559, 64), None)
    scale = torch_shapes("aten::mul", "[[4], []]", '["float", "float"]', None)
    assert scale is not None and scale.inputs == ((4,), ()) and scale.scalars == ("", "")
    # two fp4 per Float4_e2m1fn_x2 element: shapes count fp4 values
    fp4 = torch_shapes("aten::_scaled_mm", "[[64, 3584]]", '["c10::Float4_e2m1fn_x2"]', None)
    assert fp4 is not None and fp4.inputs == ((64, 7168),) and fp4.dtypes == ("fp4",)
    assert torch_shapes("aten::mm", None, None, None) is None
    assert torch_shapes("aten::mm", "not json", None, None) is None


def test_ascend_texts() -> None:
    s = ascend_shapes(
        "MatMulV2", '"32,9216;4096,9216;4096"', "FLOAT;FLOAT;FLOAT", '"32,4096"', "FLOAT",
        name="aclnnAddmm_MatMulCommon_MatMulV2",
    )  # fmt: skip
    assert s is not None and s.source == "ascend" and s.name == "aclnnAddmm_MatMulCommon_MatMulV2"
    assert s.inputs == ((32, 9216), (4096, 9216), (4096,)) and s.dtypes == ("fp32",) * 3
    assert s.outputs == ((32, 4096),) and s.out_dtypes == ("fp32",)
    fa = ascend_shapes(
        "FlashAttentionScore",
        '"4096,2,512;4096,2,512;4096,2,512;;;;4096,4096;;;;;"',
        "DT_BF16;DT_BF16;DT_BF16;DT_BF16;UINT8;DT_BF16;BOOL;INT64;INT64;INT64;INT64;INT64",
        '"2,4,4096,8;2,4,4096,8;;4096,2,512"',
        "FLOAT;FLOAT;DT_BF16;DT_BF16",
    )
    assert (
        fa is not None
        and len(fa.inputs) == 12
        and fa.inputs[3] == ()
        and fa.inputs[6] == (4096, 4096)
    )
    assert fa.outputs[0] == (2, 4, 4096, 8) and fa.out_dtypes[0] == "fp32"
    # a trailing ";" with no dtype is dropped; "N/A" = no shapes
    foreach = ascend_shapes("ForeachMulScalar", '"1000;"', "FLOAT", '"1000"', "FLOAT")
    assert foreach is not None and foreach.inputs == ((1000,),)
    assert ascend_shapes("MemSet", "N/A", "N/A", "N/A", "N/A") is None
    assert ascend_shapes("Add", '"4,x"', "FLOAT", '"4"', "FLOAT") is None


def test_every_distinct_op_of_the_real_kineto_sample() -> None:
    path = real_file(
        "nvidia", "tracelens-h100-hf-qwen1.5-0.5b/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"
    )
    with gzip.open(path, "rt") as fh:
        events = json.load(fh)["traceEvents"]
    combos: dict[tuple[str, str, str, str], int] = {}
    for e in events:
        args = e.get("args", {})
        if e.get("cat") == "cpu_op" and "Input Dims" in args:
            key = (
                e["name"], json.dumps(args["Input Dims"]), json.dumps(args.get("Input type")),
                json.dumps(args.get("Concrete Inputs")),
            )  # fmt: skip
            combos[key] = combos.get(key, 0) + 1
    assert len(combos) == 140
    families: dict[str, int] = {}
    gemm_events = 0
    for key, count in combos.items():
        shapes = torch_shapes(*key)
        assert shapes is not None
        work = work_of_strict(shapes)  # raises on a formula bug
        if key[0] in ("aten::mm", "aten::addmm"):
            assert work is not None and work.family == "gemm" and work.flops > 0
            gemm_events += count
        if work is not None:
            families[work.family] = families.get(work.family, 0) + 1
    # 3 distinct mm shapes and 1 addmm: 96 mm and 72 addmm events
    assert sum(1 for k in combos if k[0] in ("aten::mm", "aten::addmm")) == 4
    assert gemm_events == 96 + 72
    assert families["gemm"] == 13 and families["attention"] == 3


def test_every_distinct_row_of_a_real_kernel_details() -> None:
    path = real_file(
        "ascend",
        "msinsight_torchnpu_910B_2rank/text/level2/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/"
        "kernel_details.csv",
    )
    with open(path, encoding="utf-8-sig") as fh:
        rows = list(csv.DictReader(fh))
    keys = ("Type", "Input Shapes", "Input Data Types", "Output Shapes", "Output Data Types")
    combos = {tuple(r[k] for k in keys) for r in rows}
    gemms = 0
    for key in combos:
        shapes = ascend_shapes(*key)
        work = work_of_strict(shapes) if shapes is not None else None
        if key[0].startswith("MatMul"):
            assert work is not None and work.family == "gemm"
            gemms += 1
    assert gemms == 9  # 8 MatMulV2 + 1 MatMulV3 distinct shapes, all fit
