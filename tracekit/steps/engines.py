"""Serving engines' own step markers and what their names encode (phase, tokens).

Each entry cites the source that writes the string. Decoders are polars expressions over the
marker's name, so a trace of 100k steps decodes without a Python loop. ``open_ended`` markers
cover only part of an engine step (the forward, not the sampling that follows it), so a
step runs from one marker to the next.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import polars as pl

from tracekit.engine_frames import STEP_FUNCTIONS

Decoder = Callable[[pl.Expr], tuple[pl.Expr, pl.Expr]]


@dataclass(frozen=True)
class EngineMarker:
    """One engine's step marker: a regex over range names and its decoder (or None)."""

    engine: str
    pattern: str
    decode: Decoder | None = None
    open_ended: bool = True


def _int(name: pl.Expr, regex: str) -> pl.Expr:
    return name.str.extract(regex).cast(pl.Int64, strict=False)


def phase_of(prefill: pl.Expr, decode: pl.Expr) -> pl.Expr:
    """``prefill`` / ``decode`` / ``mixed`` from two request counts (null: unknown)."""
    return (
        pl.when((prefill > 0) & (decode > 0))
        .then(pl.lit("mixed"))
        .when(prefill > 0)
        .then(pl.lit("prefill"))
        .when(decode > 0)
        .then(pl.lit("decode"))
        .otherwise(pl.lit(None, pl.String))
    )


def vllm_detailed(name: pl.Expr) -> tuple[pl.Expr, pl.Expr]:
    """``execute_{tokens}_context_{prefill reqs}(sq…)_generation_{decode reqs}(sq…)``."""
    context, generation = _int(name, r"_context_(\d+)"), _int(name, r"_generation_(\d+)")
    return phase_of(context, generation), _int(name, r"^execute_(\d+)_")


def vllm_native(name: pl.Expr) -> tuple[pl.Expr, pl.Expr]:
    """``execute_context_{reqs}({tokens})_generation_{reqs}({tokens})``."""
    context, generation = _int(name, r"_context_(\d+)\("), _int(name, r"_generation_(\d+)\(")
    tokens = _int(name, r"_context_\d+\((\d+)\)") + _int(name, r"_generation_\d+\((\d+)\)")
    return phase_of(context, generation), tokens


def vllm_new_cached(name: pl.Expr) -> tuple[pl.Expr, pl.Expr]:
    """``execute_new_{new reqs}_cached_{running reqs}``: requests seen for the first time are
    prefills; running ones may be decodes or prefill chunks, so alone they say nothing."""
    new, cached = _int(name, r"_new_(\d+)"), _int(name, r"_cached_(\d+)")
    phase = pl.when(new > 0).then(phase_of(new, cached)).otherwise(pl.lit(None, pl.String))
    return phase, pl.lit(None, pl.Int64)


def sglang_step(name: pl.Expr) -> tuple[pl.Expr, pl.Expr]:
    """``step[MODE bs=N toks=T …]``: ``bs`` counts requests, ``toks`` (EXTEND only) tokens."""
    mode = name.str.extract(r"^step\[([A-Z0-9_]+)")
    decoding = ["DECODE", "TARGET_VERIFY", "VERIFY", "DRAFT", "DRAFT_EXTEND", "DRAFT_EXTEND_V2"]
    phase = (
        pl.when(mode.is_in(decoding))
        .then(pl.lit("decode"))
        .when(mode.is_in(["EXTEND", "SPLIT_PREFILL", "DLLM_EXTEND"]))
        .then(pl.lit("prefill"))
        .when(mode == "MIXED")
        .then(pl.lit("mixed"))
        .otherwise(pl.lit(None, pl.String))
    )
    decode_tokens = pl.when(mode == "DECODE").then(
        pl.coalesce(_int(name, r"g_sq=(\d+)"), _int(name, r" bs=(\d+)"))
    )
    mixed_tokens = pl.when(mode == "MIXED").then(  # the detailed suffix counts both sides
        _int(name, r" c_sq=(\d+)") + _int(name, r" g_sq=(\d+)")
    )
    tokens = pl.coalesce(
        _int(name, r" toks=(\d+)"), mixed_tokens, _int(name, r" c_sq=(\d+)"), decode_tokens
    )
    return phase, tokens


def atom_step(name: pl.Expr) -> tuple[pl.Expr, pl.Expr]:
    """ATOM ``prefill[bs=2 tok=14721 …]`` / ``decode[bs=64 tok=64 d=64]`` (``p=`` prefills)."""
    prefills = pl.coalesce(_int(name, r" p=(\d+)"), pl.lit(0, pl.Int64))
    decodes = pl.coalesce(_int(name, r" d=(\d+)"), pl.lit(0, pl.Int64))
    word = name.str.extract(r"^(prefill|decode)\[")
    phase = (
        pl.when((prefills > 0) & (decodes > 0))
        .then(pl.lit("mixed"))
        .when(word == "prefill")
        .then(pl.lit("prefill"))
        .otherwise(pl.lit("decode"))
    )
    return phase, _int(name, r" tok=(\d+)")


def trtllm_step(name: pl.Expr) -> tuple[pl.Expr, pl.Expr]:
    """``… {N} ctx reqs[, {T} ctx tokens], {M} gen reqs``: tokens when they are known (context
    tokens written, or a pure decode step of one token per request)."""
    context, generation = _int(name, r"(\d+) ctx reqs"), _int(name, r"(\d+) gen reqs")
    context_tokens = _int(name, r"(\d+) ctx tokens")
    tokens = pl.coalesce(context_tokens + generation, pl.when(context == 0).then(generation))
    return phase_of(context, generation), tokens


_MINDIE_TYPES = {"0": "prefill", "1": "decode", "2": "prefill", "3": "mixed"}  # plugin_trace.py


def mindie_batch(_name: pl.Expr) -> tuple[pl.Expr, pl.Expr]:
    """msServiceProfiler writes a batch in the span's args, not its name, so this reads the
    ``args`` of the same rows: ``batch_type`` (``Prefill``, ``Decode``, ``Prefill, Decode``,
    ``Mixed``, ``Extend``) or MindIE's ``batchType`` (0 prefill, 1 decode, 2 extend, 3
    mixed; text in early versions), else the requests' ``iter`` in ``res_list`` (0: the
    prefill); tokens from the requests' ``num_scheduled_tokens`` (vLLM hooks), else one per
    request of a decode batch (``batch_size``, or the requests listed)."""
    args = pl.concat_str(pl.col("^args$"), pl.lit(""), ignore_nulls=True)  # "" without args
    said = pl.coalesce(
        args.str.json_path_match("$.batch_type"), args.str.json_path_match("$.batchType")
    )
    text = said.str.to_lowercase()
    named = (
        pl.when(text.str.contains("prefill") & text.str.contains("decode"))
        .then(pl.lit("mixed"))
        .when(text.str.contains("mix"))
        .then(pl.lit("mixed"))
        .when(text.str.contains("prefill|extend"))
        .then(pl.lit("prefill"))
        .when(text.str.contains("decode"))
        .then(pl.lit("decode"))
        .otherwise(text.replace_strict(_MINDIE_TYPES, default=None, return_dtype=pl.String))
    )
    iters = args.str.extract_all(r'"iter"\s*:\s*\d+').list.eval(
        pl.element().str.extract(r"(\d+)$").cast(pl.Int64)
    )
    prefills = iters.list.eval((pl.element() == 0).sum()).list.first()
    decodes = iters.list.eval((pl.element() > 0).sum()).list.first()
    phase = pl.coalesce(named, phase_of(prefills, decodes))
    scheduled = args.str.extract_all(r'"num_scheduled_tokens=?"\s*:\s*"?\d+').list.eval(
        pl.element().str.extract(r"(\d+)$").cast(pl.Int64)
    )
    size = args.str.json_path_match("$.batch_size").cast(pl.Float64, strict=False)
    size = pl.coalesce(size, args.str.json_path_match("$.batchSize").cast(pl.Float64, strict=False))
    requests = pl.coalesce(
        size.cast(pl.Int64), pl.when(iters.list.len() > 0).then(iters.list.len())
    )
    tokens = pl.coalesce(
        pl.when(scheduled.list.len() > 0).then(scheduled.list.sum()),
        pl.when(phase == "decode").then(requests),
    )
    return phase, tokens


ENGINE_MARKERS: tuple[EngineMarker, ...] = (
    # vLLM >= 0.26 --profiler-config.detailed_trace_annotation (TraceLens patches v0.14-0.25,
    # and TraceLens' patch of SGLang 0.5.9-0.5.12 Scheduler.run_batch): Worker.annotate_profile,
    # vllm/v1/worker/gpu_worker.py; record_function, or NVTX with the cuda profiler
    EngineMarker(
        "vllm-style", r"^execute_\d+_context_\d+\(sq\d+.*_generation_\d+\(sq\d+", vllm_detailed
    ),
    # vLLM >= 0.14 (PR #31193): the same method, compute_iteration_details in vllm/v1/utils.py
    EngineMarker("vllm", r"^execute_context_\d+\(\d+\)_generation_\d+\(\d+\)$", vllm_native),
    # vLLM 0.10.2-0.13 (PR #22496): f"execute_new_{num_new}_cached_{num_cached}"
    EngineMarker("vllm", r"^execute_new_\d+_cached_\d+$", vllm_new_cached),
    # older builds and forks: a range named after the model runner's step function
    EngineMarker("vllm", r"^(gpu_model_runner: )?execute_model$"),
    # SGLang main: the scheduler iteration, scheduler.run_batch (nvtx_utils.profile_method);
    # it holds the step[...] spans of one iteration (several with speculative decoding), whose
    # phase it borrows
    EngineMarker("sglang", r"^scheduler\.run_batch$"),
    # the engines' step functions in Python stacks (Kineto python_function rows, torch_npu
    # Python ops; tracekit.engine_frames cites their sources): one per scheduler iteration,
    # before the per-forward spans below
    EngineMarker("python", STEP_FUNCTIONS),
    # SGLang >= 0.5.13 (PR #23419): build_step_span_name, python/sglang/srt/model_executor/
    # step_span_utils.py (earlier model_runner.py / utils/profile_utils.py), one per forward
    EngineMarker("sglang", r"^step\[[A-Z][A-Z0-9_]* bs=\d+[^\]]*\]$", sglang_step),
    # ROCm ATOM: ModelRunner.run_model, atom/model_engine/model_runner.py
    EngineMarker("atom", r"^(prefill|decode)\[bs=\d+ tok=\d+.*\]$", atom_step),
    # TensorRT-LLM PyTorch backend: PyExecutor._forward_step, tensorrt_llm/_torch/pyexecutor/
    # py_executor.py (NVTX): "[Executor] _forward_step {iter}: {N} ctx reqs, {M} gen reqs"
    EngineMarker(
        "trtllm",
        r"_forward_step( \d+)?: \d+ ctx reqs,( \d+ ctx tokens,)? \d+ gen reqs",
        trtllm_step,
    ),
    # TensorRT-LLM C++ executor: TrtGptModelInflightBatching::executeStep (NVTX),
    # cpp/tensorrt_llm/batch_manager/trtGptModelInflightBatching.cpp
    EngineMarker("trtllm", r"^executeStep: \d+ ctx reqs, \d+ gen reqs$", trtllm_step),
    # MindIE / vllm-ascend through msServiceProfiler: the span written once per executed
    # batch (MindIE's modelExec; msserviceprofiler vllm_profiler/vllm_v1/model_hookers.py
    # execute_model), its batch in the args (exporters/exporter_trace.py _process_row_to_args)
    EngineMarker("mindie", r"^modelExec$", mindie_batch),
    # vLLM V1 custom scopes (VLLM_CUSTOM_SCOPES_FOR_PROFILING / VLLM_NVTX_SCOPES_FOR_PROFILING):
    # one "gpu_model_runner: forward" per step, gpu_model_runner.py
    EngineMarker("vllm", r"^gpu_model_runner: forward$"),
)
