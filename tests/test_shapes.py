"""Shapes of what a kernel computed: Ascend ``input_shapes`` on the device row, Kineto
``Input Dims`` on the launching operator (kept by the parser, reached by External id)."""

from __future__ import annotations

import json

import polars as pl

import tracekit
from tests.conftest import real_file
from tracekit.metrics.shapes import launching_op_dims, matmul_shape


def test_matmul_shape_takes_the_first_input_of_two_or_more_dimensions() -> None:
    assert matmul_shape("64,16384;16384,7168", None) == (64, 16384)
    assert matmul_shape("4,16,7168;7168,2112", None) == (64, 7168)  # batched rows multiply
    addmm = "[[1024],[8944,1024],[1024,1024],[],[]]"
    assert matmul_shape(None, addmm, "aten::addmm") == (8944, 1024)
    # a two-dimensional bias is the first input too: the matrix is the second
    assert matmul_shape(None, "[[64,7168],[64,2048],[2048,7168]]", "aten::addmm") == (64, 2048)
    assert matmul_shape(None, "[[64,7168],[64,2048],[2048,7168]]", "aten::mm") == (64, 7168)
    assert matmul_shape(None, "[[16,559,1024],[1024,1024],[1024]]") == (8944, 1024)  # linear
    assert matmul_shape(None, "[[7168],[]]") is None
    assert matmul_shape("a,b", None) is None and matmul_shape(None, "not json") is None
    assert matmul_shape(None, None) is None


def test_kineto_input_dims_reach_the_gemm_kernels() -> None:
    path = real_file(
        "nvidia", "tracelens-h100-hf-qwen1.5-0.5b/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"
    )
    timeline = tracekit.load(path)
    # the typed decoder reads Input Dims: no fall-back to the slower lenient one
    assert not any("leniently" in w for w in timeline.meta["warnings"])
    analysis = tracekit.analyze(timeline, [])
    ops = analysis.rows.filter(pl.col("kind") == "op")
    linear = ops.filter(pl.col("name") == "aten::linear")["args"][0]
    assert json.loads(linear)["input_dims"] == [[16, 559, 1024], [1024, 1024], [1024]]
    gemms = analysis.work.filter(pl.col("category") == "gemm")
    found = launching_op_dims(analysis.rows, gemms.select("rank", "corr", "args"))
    assert gemms.height == 242 and found.height == 242
    by_op = found.drop_nulls().group_by("op").len().sort("op")
    # 73 GEMMs have no launch call in this TraceLens-trimmed trace: no shapes, not guessed
    assert dict(by_op.iter_rows()) == {"aten::addmm": 72, "aten::bmm": 1, "aten::mm": 96}
    mm = found.filter(pl.col("op") == "aten::mm")["input_dims"].unique().sort().to_list()
    # the 8,944-token prefill's projections: o_proj, MLP up/gate, down
    assert mm == [
        "[[8944,1024],[1024,1024]]",
        "[[8944,1024],[1024,2816]]",
        "[[8944,2816],[2816,1024]]",
    ]
    assert {matmul_shape(None, d) for d in mm} == {(8944, 1024), (8944, 2816)}


def test_external_ids_are_per_process() -> None:
    """Two processes of one rank both number an operator External id 1: each kernel gets
    the shapes of the operator its own process's launch call names, run after run."""

    def op(pid: int, dims: str) -> dict:
        args = f'{{"external_id":1,"input_dims":{dims},"input_types":["float","float"]}}'
        return {"kind": "op", "name": "aten::mm", "rank": 0, "pid": pid, "corr": None,
                "args": args}  # fmt: skip

    def call(pid: int, corr: int) -> dict:
        return {"kind": "api", "name": "cudaLaunchKernel", "rank": 0, "pid": pid, "corr": corr,
                "args": '{"external_id":1}'}  # fmt: skip

    schema = {"kind": pl.String, "name": pl.Categorical, "rank": pl.Int32, "pid": pl.Int64,
              "corr": pl.Int64, "args": pl.String}  # fmt: skip
    rows = pl.DataFrame(
        [op(1, "[[8192,4096],[4096,4096]]"), op(2, "[[16,4096],[4096,4096]]"),
         call(1, 7), call(2, 8)], schema=schema, orient="row",
    )  # fmt: skip
    kernels = pl.DataFrame(
        {"rank": [0, 0], "corr": [7, 8], "args": ["{}", "{}"]},
        schema={"rank": pl.Int32, "corr": pl.Int64, "args": pl.String},
    )
    for _ in range(5):
        found = launching_op_dims(rows, kernels)
        assert found["input_dims"].to_list() == [
            "[[8192,4096],[4096,4096]]",
            "[[16,4096],[4096,4096]]",
        ]
        assert found["op_key"].n_unique() == 2
