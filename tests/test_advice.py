"""Advice fits the trace's software: no text names a product its key does not require, no
stack-specific text is reachable without its components, and every stack tracekit meets
(serving engines on each vendor, eager training, torch.compile, micro-benchmarks) gets, for
every rule and kind, advice that names only what is in it."""

from __future__ import annotations

import re
from itertools import product
from pathlib import Path

import pytest

import tracekit
from fixtures.mindie_writer import write_trace
from tests.conftest import real_root
from tests.rules.scenarios import analysed, ascend_analysed
from tracekit.rules.advice import ANY, DEFAULT, VENDORS, choose, parse_key, table
from tracekit.stack import detect, platform, specs
from tracekit.taxonomy import vendor_of

# Environment variables and options an advice text may name, by the component that owns them
# (None: a vendor's runtime task or API name, no product)
ENV_OWNERS: dict[str, str | None] = {
    "HOSTFUNC_": None,
    "EVENT_": None,
    "NOTIFY_": None,
    "STREAM_": None,
    "VLLM_": "vllm",
    "SGLANG_": "sglang",
    "SGL_": "sglang",
    "TRTLLM_": "trtllm",
    "TASK_QUEUE_ENABLE": "torch_npu",
    "PYTORCH_NPU_": "torch_npu",  # before PYTORCH_: the first prefix that fits owns a token
    "PYTORCH_": "pytorch",
    "NCCL_": "nccl",
    "RCCL_": "rccl",
    "HCCL_": "hccl",
}
_ENV = re.compile(r"\b[A-Z][A-Z0-9]*_[A-Z0-9_]+\b")


def named(text: str) -> set[str]:
    """The component ids a text names: its products (``says``) and the owners of its
    environment variables; an environment variable with no known owner names ``?``."""
    found = set()
    for token in _ENV.findall(text):
        owner = next((o for prefix, o in ENV_OWNERS.items() if token.startswith(prefix)), "?")
        if owner is not None:
            found.add(owner)
    bare = _ENV.sub(" ", text)
    found |= {s.id for s in specs() if s.says and re.search(s.says, bare)}
    return found - {None}


def entries() -> list[tuple[str, str, dict[str, str]]]:
    return [(rule, kind, entry) for rule, kinds in table().items() for kind, entry in kinds.items()]


def test_named_finds_products_and_their_options() -> None:
    assert named("set VLLM_ROCM_USE_AITER=1") == {"vllm"}  # an engine's switch, not AITER
    assert named("use AITER's fused all-reduce") == {"aiter"}
    assert named("compile it with torch.compile") == {"pytorch"}
    assert named("capture the step in CUDA graphs") == set()  # a platform feature
    assert named("DeepEP and SGLang") == {"deepep", "sglang"}
    assert named("FOO_BAR=1") == {"?"}
    assert named("torch_npu.npu_swiglu") == {"torch_npu"}


@pytest.mark.parametrize(("rule", "kind", "entry"), entries(), ids=lambda v: str(v)[:30])
def test_every_text_names_only_what_its_key_requires(
    rule: str, kind: str, entry: dict[str, str]
) -> None:
    assert entry.get(DEFAULT, "").strip(), f"[{rule}.{kind}] has no default"
    for key, text in entry.items():
        wanted = parse_key(key)
        allowed = wanted.needs | platform(wanted.vendor)
        extra = named(text) - allowed
        assert not extra, f"[{rule}.{kind}] {key!r} names {sorted(extra)} it does not require"
        assert 40 < len(text) < 700, (rule, kind, key)


@pytest.mark.parametrize(("rule", "kind", "entry"), entries(), ids=lambda v: str(v)[:30])
def test_no_stack_specific_text_without_its_components(
    rule: str, kind: str, entry: dict[str, str]
) -> None:
    every = frozenset(s.id for s in specs())
    for key, text in entry.items():
        wanted = parse_key(key)
        for missing, vendor in product(sorted(wanted.needs), (*VENDORS, None)):
            stack = every - {missing}  # everything else a trace could show
            assert choose(entry, vendor, stack) != text, (rule, kind, key, missing, vendor)
        if wanted.vendor is not None:  # and never on another vendor's trace
            others = [v for v in (*VENDORS, None) if v != wanted.vendor]
            assert all(choose(entry, v, every) != text for v in others), (rule, kind, key)


def test_the_most_specific_key_wins() -> None:
    entry = {
        "default": "generic",
        "amd": "amd",
        "any+pytorch": "pytorch",
        "amd+vllm": "amd vllm",
        "amd+vllm+aiter": "amd vllm aiter",
        "any+sglang": "sglang",
    }
    assert choose(entry, None, frozenset()) == "generic"
    assert choose(entry, "amd", frozenset()) == "amd"
    assert choose(entry, "amd", frozenset({"pytorch"})) == "pytorch"
    assert choose(entry, "nvidia", frozenset({"pytorch", "vllm"})) == "pytorch"
    assert choose(entry, "amd", frozenset({"pytorch", "vllm"})) == "amd vllm"
    assert choose(entry, "amd", frozenset({"pytorch", "vllm", "aiter"})) == "amd vllm aiter"
    # an engine's text beats a framework's even when the framework's names a vendor
    assert choose(entry, "amd", frozenset({"pytorch", "sglang"})) == "sglang"


def test_bad_keys_are_refused() -> None:
    for key in ("intel", "any", "nvidia+nosuch", "vllm"):
        with pytest.raises(ValueError):
            parse_key(key)
    assert parse_key("any+vllm").vendor is None and parse_key("ascend").vendor == "ascend"


# Real traces of each stack: (path under TRACEKIT_REAL_TRACES, components that must be found,
# components that must not)
STACKS = {
    "sglang on amd": (
        "amd/kineto_mi300x_sglang_qwen3_8b_decode/sglang_Qwen3-8B_decode.json.gz",
        {"sglang", "pytorch", "hip-graphs", "aiter"},
        {"vllm", "trtllm", "cuda-graphs", "llama.cpp", "flashinfer", "eager"},
    ),
    "vllm on amd, compiled": (
        "amd/kineto_rocm_vllm_moe_prefilldecode_piecewise/graph_execution.json.gz",
        {"vllm", "pytorch", "inductor", "hip-graphs", "triton"},
        {"sglang", "eager", "aiter", "llama.cpp"},
    ),
    "eager training on amd": (
        "amd/rocprofv3_json_mi350x_fsdp_train_tracelens/908_results.json.gz",
        {"pytorch", "rccl"},  # ATen kernels only (no host operators): eager is not claimed
        {"vllm", "sglang", "inductor", "nccl", "eager", "aiter", "flash-attn"},
    ),
    "eager training on nvidia": (
        "nvidia/kineto-tbplugin-resnet50-v100-legacy/worker0.1623143089861.pt.trace.json.gz",
        {"pytorch", "eager", "cudnn"},
        {"vllm", "sglang", "trtllm", "inductor", "flash-attn", "jax"},
    ),
    "torch.compile on nvidia": (
        "nvidia/hta-triton-a100/triton_example.json.gz",
        {"pytorch", "inductor", "triton"},
        {"eager", "vllm", "cublas", "flash-attn"},
    ),
    "micro-benchmark on amd": (
        "amd/rocprof_v1_hiptrace_hip_vecadd_small/results.db",
        set(),
        {"pytorch", "vllm", "eager"},
    ),
    "llama.cpp on amd": (
        "amd/rocprofv3_csv_gfx1151_llamacpp_TRIMMED/decode_kernel_trace.csv",
        {"llama.cpp", "hip-graphs"},
        {"pytorch", "vllm", "aiter"},
    ),
    "torch_npu on ascend": (
        "ascend/msinsight_torchnpu_910B_2rank/text/level1/rank0_ascend_pt",
        {"pytorch", "torch_npu", "hccl"},
        {"vllm", "vllm-ascend", "mindie", "jax", "mindspore"},
    ),
    "mindspore graph mode on ascend (msprof)": (
        "ascend/mindinsight_msprof_PROF_2dev/PROF_000001_20230818142704322_COJGGGCANRMICFBC",
        {"hccl", "mindspore", "acl-graph"},
        {"pytorch", "torch_npu", "aclnn", "eager"},
    ),
}


@pytest.fixture(scope="module")
def loaded() -> dict[str, tracekit.Timeline]:
    root = real_root()
    if root is None:
        pytest.skip("TRACEKIT_REAL_TRACES is not set")
    return {label: tracekit.load(root / path) for label, (path, _, _) in STACKS.items()}


@pytest.mark.parametrize("label", list(STACKS))
def test_stack_of_real_traces(loaded: dict[str, tracekit.Timeline], label: str) -> None:
    timeline = loaded[label]
    stack = detect(timeline.df, timeline.meta, vendor_of(timeline.meta))
    _, present, absent = STACKS[label]
    assert present <= stack.ids, (label, stack.summary())
    assert not absent & stack.ids, (label, stack.summary())
    assert all(c.evidence for c in stack.components)


@pytest.mark.parametrize("label", list(STACKS))
def test_every_rule_and_kind_names_only_what_the_trace_shows(
    loaded: dict[str, tracekit.Timeline], label: str
) -> None:
    timeline = loaded[label]
    vendor = vendor_of(timeline.meta)
    stack = detect(timeline.df, timeline.meta, vendor).ids
    allowed = stack | platform(vendor)
    for rule, kind, entry in entries():
        text = choose(entry, vendor, stack)
        assert named(text) <= allowed, (label, rule, kind, sorted(named(text) - allowed))
    analysis = tracekit.analyze(timeline)
    for finding in analysis.findings:
        assert named(finding.advice) <= allowed, (label, finding.rule, finding.advice)


def test_rules_without_a_table_take_any_default() -> None:
    assert ANY in table() and choose(table()[ANY][DEFAULT], "amd", frozenset()) != ""


def _scenario(fmt: str, tmp: Path) -> tracekit.Analysis:
    knobs = {"fallback_kernel": True, "idle_bubble_ns": 150_000, "unfused_collective": True}
    return analysed(fmt, knobs, tmp)[1]


# Generated traces of the serving stacks no real sample here has: (how to make it, the
# components it must show)
FIXTURE_STACKS = {
    "vllm on nvidia (nsys)": (lambda tmp: _scenario("nsys", tmp), {"vllm", "deepep"}),
    "vllm on nvidia (kineto)": (lambda tmp: _scenario("kineto", tmp), {"vllm", "pytorch"}),
    "vllm on amd (rocpd)": (lambda tmp: _scenario("rocpd", tmp), {"vllm", "aiter"}),
    "torch_npu on ascend": (
        lambda tmp: ascend_analysed("torch_npu", tmp, fallback_kernel=True),
        {"torch_npu", "aclnn"},
    ),
    "mindie on ascend": (
        lambda tmp: tracekit.analyze(tracekit.load(write_trace(tmp / "chrome_tracing.json"))),
        {"mindie"},
    ),
}


@pytest.mark.parametrize("label", list(FIXTURE_STACKS))
def test_generated_serving_stacks_get_advice_naming_only_what_they_show(
    tmp_path: Path, label: str
) -> None:
    make, present = FIXTURE_STACKS[label]
    analysis = make(tmp_path)
    vendor = vendor_of(analysis.timeline.meta)
    stack = analysis.stack.ids
    assert present <= stack and "trtllm" not in stack, (label, analysis.stack.summary())
    allowed = stack | platform(vendor)
    for rule, kind, entry in entries():
        text = choose(entry, vendor, stack)
        assert named(text) <= allowed, (label, rule, kind, sorted(named(text) - allowed))
    assert analysis.findings or label == "mindie on ascend"
    for finding in analysis.findings:
        assert named(finding.advice) <= allowed, (label, finding.rule, finding.advice)
