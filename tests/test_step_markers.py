"""Step markers: every engine form decodes to the right phase and tokens, families are tried
in order, a marker on host and device is one step, and markers without numbers borrow them
from the engine markers inside them."""

from __future__ import annotations

import polars as pl
import pytest

from tracekit.steps import find_steps
from tracekit.steps.markers import MARKERS, borrow_phases, marker_ranges

COLS = ("ts", "dur", "kind", "name", "device", "stream", "rank", "corr")
TYPES = (pl.Int64, pl.Int64, pl.String, pl.String, pl.Int32, pl.Int64, pl.Int32, pl.Int64)

# (marker name as the engine writes it, family, phase, tokens); sources in tracekit/steps/engines.py
DECODED = [
    # vLLM detailed form, the real ROCm trace kineto_rocm_vllm_moe_prefilldecode_piecewise
    ("execute_8192_context_9(sq8155sk8430sqsq7475785sqsk7671310)_generation_37"
     "(sq37sk34489sqsq37sqsk34489)", "vllm-style", "mixed", 8192),
    # the same form from TraceLens' SGLang patch (kineto_mi300x_sglang_qwen3_8b_decode)
    ("execute_32_context_0(sq0sk0sqsq0sqsk0)_generation_32(sq32sk32785sqsq32sqsk32785)",
     "vllm-style", "decode", 32),
    ("execute_15360_context_15(sq15360sk15360sqsq15728640sqsk15728640)_generation_0"
     "(sq0sk0sqsq0sqsk0)", "vllm-style", "prefill", 15360),
    # vLLM >= 0.14 native form
    ("execute_context_2(14721)_generation_0(0)", "vllm", "prefill", 14721),
    ("execute_context_0(0)_generation_64(64)", "vllm", "decode", 64),
    ("execute_context_1(256)_generation_63(63)", "vllm", "mixed", 319),
    ("execute_context_0(0)_generation_16(64)", "vllm", "decode", 64),  # speculative tokens
    # vLLM 0.10.2 - 0.13: new requests are prefills; running ones say nothing
    ("execute_new_2_cached_0", "vllm", "prefill", None),
    ("execute_new_1_cached_30", "vllm", "mixed", None),
    ("execute_new_0_cached_32", "vllm", None, None),
    # SGLang build_step_span_name (real: step[DECODE bs=32], step[EXTEND bs=15 toks=15360])
    ("step[DECODE bs=32]", "sglang", "decode", 32),
    ("step[EXTEND bs=15 toks=15360]", "sglang", "prefill", 15360),
    ("step[MIXED bs=40]", "sglang", "mixed", None),
    ("step[MIXED bs=33 c=1 g=32 c_sq=256 c_sk=256 c_sqsq=65536 c_sqsk=65536 g_sq=32 g_sk=9000"
     " g_sqsq=32 g_sqsk=9000]", "sglang", "mixed", 288),
    ("step[TARGET_VERIFY bs=8]", "sglang", "decode", None),
    ("step[IDLE bs=0]", "sglang", None, None),
    ("step[DECODE bs=64 g_sq=64 g_sqsq=64 g_sqsk=70000 g_sk=70000]", "sglang", "decode", 64),
    ("step[EXTEND bs=2 toks=1024 c_sq=1024 c_sqsq=524288 c_sqsk=524288 c_sk=1024]",
     "sglang", "prefill", 1024),
    # ROCm ATOM ModelRunner.run_model
    ("prefill[bs=2 tok=14721 ctx=[7803, 6918]]", "atom", "prefill", 14721),
    ("decode[bs=64 tok=64 d=64]", "atom", "decode", 64),
    ("decode[bs=128 tok=130 p=2 d=126]", "atom", "mixed", 130),
    # TensorRT-LLM PyExecutor._forward_step (NVTX) and the C++ executeStep
    ("[Executor] _forward_step 12: 0 ctx reqs, 32 gen reqs", "trtllm", "decode", 32),
    ("[Executor] _forward_step 3: 2 ctx reqs, 30 gen reqs", "trtllm", "mixed", None),
    ("[Executor] _forward_step 3: 2 ctx reqs, 4096 ctx tokens, 30 gen reqs", "trtllm",
     "mixed", 4126),
    ("_forward_step: 1 ctx reqs, 0 gen reqs", "trtllm", "prefill", None),
    ("executeStep: 0 ctx reqs, 61 gen reqs", "trtllm", "decode", 61),
    ("executeStep: 3 ctx reqs, 61 gen reqs", "trtllm", "mixed", None),
    # markers that carry no batch
    ("scheduler.run_batch", "sglang", None, None),
    ("modelExec", "mindie", None, None),
    ("gpu_model_runner: forward", "vllm", None, None),
    ("vllm/v1/worker/gpu_model_runner.py(3380): execute_model", "python", None, None),
    ("execute_model", "vllm", None, None),
    ("gpu_model_runner: execute_model", "vllm", None, None),
    ("vllm_ascend/worker/model_runner_v1.py(1777): execute_model", "python", None, None),
    ("/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py(2911): run_batch",
     "python", None, None),
    ("ProfilerStep#7", "pytorch", None, None),
    ("decode_step_3", "generic", "decode", None),  # named a decode step: one
    ("Iteration 4", "msprof", None, None),
]  # fmt: skip
NOT_MARKERS = [
    "execute_model_inputs",
    "step",
    "stepper[DECODE]",
    "forward",
    "aten::mm",
    "run_batch",
    "vllm/v1/worker/gpu_model_runner.py(1983): _compute_cascade_attn_prefix_lens",
    "layer_3_computation",
    "ProfilerStep",
    "decode",
    "Iteration",
]


def _df(rows: list[tuple]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=dict(zip(COLS, TYPES)), orient="row")


def _range(ts: int, dur: int, name: str, device: int = -1, kind: str = "range") -> tuple:
    return (ts, dur, kind, name, device, None if device < 0 else 7, 0, None)


def _kernel(ts: int, dur: int = 10, corr: int | None = None) -> tuple:
    return (ts, dur, "kernel", "k", 0, 7, 0, corr)


@pytest.mark.parametrize(
    ("name", "family", "phase", "tokens"), DECODED, ids=[d[0] for d in DECODED]
)
def test_engine_markers_decode_phase_and_tokens(
    name: str, family: str, phase: str | None, tokens: int | None
) -> None:
    df = _df([_range(0, 100, name), _range(200, 100, name), _kernel(10), _kernel(210)])
    steps = find_steps(df)
    assert (steps.method, len(steps)) == ("marker", 2)
    assert family in steps.detail
    assert steps.ranges["phase"].to_list() == [phase] * 2
    assert steps.ranges["tokens"].to_list() == [tokens] * 2


@pytest.mark.parametrize("name", NOT_MARKERS)
def test_other_names_are_not_step_markers(name: str) -> None:
    df = _df([_range(0, 100, name), _range(200, 100, name), _kernel(10), _kernel(210)])
    assert find_steps(df).method != "marker"


def test_engine_markers_come_before_profiler_steps() -> None:
    rows = [_range(0, 1000, "ProfilerStep#1"), _range(10, 300, "step[DECODE bs=8]"),
            _range(400, 300, "step[DECODE bs=8]"), _kernel(20), _kernel(450)]  # fmt: skip
    steps = find_steps(_df(rows))
    assert len(steps) == 2 and steps.ranges["phase"].to_list() == ["decode", "decode"]


def test_sglang_scheduler_iterations_hold_their_forward_spans() -> None:
    """With speculative decoding one scheduler.run_batch holds a verify and draft forwards:
    the iteration is the step, its phase comes from the spans inside it."""
    rows = [
        _range(0, 1000, "scheduler.run_batch"),
        _range(1000, 1000, "scheduler.run_batch"),
        _range(10, 300, "step[EXTEND bs=2 toks=700]"),
        _range(1010, 200, "step[TARGET_VERIFY bs=8]"),
        _range(1300, 100, "step[DECODE bs=8]"),
        _kernel(20),
        _kernel(1020),
    ]
    steps = find_steps(_df(rows))
    assert (len(steps), steps.phase_method) == (2, "marker")
    assert steps.ranges.select("label", "phase").rows() == [
        ("scheduler.run_batch", "prefill"),
        ("scheduler.run_batch", "decode"),
    ]


def test_open_ended_engine_markers_run_to_the_next_one() -> None:
    # vLLM's annotation covers execute_model; sampling launches after it belong to its step
    rows = [
        _range(0, 100, "execute_context_0(0)_generation_8(8)"),
        _range(500, 100, "execute_context_0(0)_generation_8(8)"),
        _kernel(10),
    ]
    assert find_steps(_df(rows)).ranges.select("start", "end").rows() == [(0, 500), (500, 600)]
    closed = [_range(0, 100, "ProfilerStep#1"), _range(500, 100, "ProfilerStep#2"), _kernel(10)]
    assert find_steps(_df(closed)).ranges.select("start", "end").rows() == [(0, 100), (500, 600)]


def test_a_marker_on_host_and_device_is_one_step() -> None:
    name = "execute_context_0(0)_generation_8(8)"
    host = [_range(0, 100, name), _range(200, 100, name)]
    device = [
        _range(15, 60, name, device=0),
        _range(16, 50, name, device=0),  # two streams
        _range(215, 60, name, device=0),
    ]
    steps = find_steps(_df([*host, *device, _kernel(20), _kernel(220)]))
    assert (len(steps), steps.by_device_time) == (2, False)
    only_device = find_steps(_df([*device, _kernel(20), _kernel(220)]))
    assert (len(only_device), only_device.by_device_time) == (2, True)
    assert only_device.ranges["start"].to_list() == [15, 215]


def test_device_copies_that_run_into_the_next_step_stay_steps() -> None:
    """gpu_user_annotation copies end with the step's last kernel, which may run a little into
    the next step; a copy on a second stream covers most of the first one: one step."""
    rows = [_range(i * 1_000, 1_100, f"ProfilerStep#{i}", device=0) for i in range(4)]
    rows += [_range(i * 1_000 + 50, 900, f"ProfilerStep#{i}", device=0) for i in range(4)]
    steps = find_steps(_df([*rows, *[_kernel(i * 1_000 + 100) for i in range(4)]]))
    assert steps.ranges.select("label", "start").rows() == [
        (f"ProfilerStep#{i}", i * 1_000) for i in range(4)
    ]


def test_markers_without_numbers_borrow_them_from_the_engine_markers_inside() -> None:
    # a family without numbers (Python frames, ProfilerStep#N) takes phase and tokens from the
    # engine markers nested in each of its ranges
    frame = "vllm/v1/worker/gpu_model_runner.py(3380): execute_model"
    rows = [
        _range(0, 100, frame, kind="op"),
        _range(200, 100, frame, kind="op"),
        _range(10, 50, "gpu_model_runner: forward"),
        _range(210, 50, "gpu_model_runner: forward"),
    ]
    ranges = marker_ranges(_df(rows), next(m for m in MARKERS if m.family == "python"), True)
    assert ranges.height == 2
    inner = [
        _range(10, 50, "step[EXTEND bs=2 toks=900]"),
        _range(210, 20, "step[DECODE bs=9]"),
        _range(240, 20, "step[DECODE bs=9]"),
    ]
    borrowed = borrow_phases(_df([*rows, *inner]), ranges, True)
    assert borrowed.select("phase", "tokens").rows() == [("prefill", 900), ("decode", None)]


def test_user_marker_matches_device_ranges_when_the_host_has_none() -> None:
    rows = [
        _range(5, 50, "my step", device=0),
        _range(105, 50, "my step", device=0),
        _kernel(10),
        _kernel(110),
    ]
    steps = find_steps(_df(rows), marker="^my step$")
    assert (len(steps), steps.by_device_time, steps.detail) == (
        2,
        True,
        "device ranges matching '^my step$'",
    )
