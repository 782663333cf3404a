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
    "FRACTAL_": None,  # a CANN tensor format (FRACTAL_NZ), no product
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
    analysis = tracekit.analyze(loaded[label])
    assert (
        analysis.stack.ids
        == detect(
            analysis.timeline.df, analysis.timeline.meta, vendor_of(analysis.timeline.meta)
        ).ids
    )
    _advice_names_only_the_stack(label, analysis)


def _advice_names_only_the_stack(label: str, analysis: tracekit.Analysis) -> None:
    """Every rule and kind's text for the analysis's vendor and stack, and every finding's
    advice, name only components of that stack or of the vendor's platform."""
    vendor = vendor_of(analysis.timeline.meta)
    stack = analysis.stack.ids
    allowed = stack | platform(vendor)
    for rule, kind, entry in entries():
        text = choose(entry, vendor, stack)
        assert named(text) <= allowed, (label, rule, kind, sorted(named(text) - allowed))
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
    stack = analysis.stack.ids
    assert present <= stack and "trtllm" not in stack, (label, analysis.stack.summary())
    assert analysis.findings or label == "mindie on ascend"
    _advice_names_only_the_stack(label, analysis)


# A vendor's APIs and platform words, which only that vendor's texts may name: a text under
# `default` or an `any+…` key names none of them, and a vendor's text none of another
# vendor's. `torch.cuda`, the 'cuda' device and "GPU" belong to NVIDIA and AMD alike (ROCm
# PyTorch keeps the torch.cuda interfaces).
VENDOR_WORDS: dict[str, re.Pattern[str]] = {
    "nvidia": re.compile(
        r"\bcu(?:da)?[A-Z]\w*|(?<![A-Za-z])CUDA(?![a-z])|\bNVLink\b|\bNVIDIA\b|\bnvidia-smi\b"
        r"|nccl-tests|\bNCCL\b|\bNVSHMEM\b|\bcuBLAS|\bcuDNN"
    ),
    "amd": re.compile(
        r"\bhip[A-Z]\w*|(?<![A-Za-z])HIP(?![a-z])|\bROCm\b|(?<![A-Za-z])ROCM(?![a-z])"
        r"|\bxGMI\b|Infinity Fabric|\bAMD\b|\bRCCL\b|rccl-tests|\broc[A-Z]\w*|\bMIOpen\b"
    ),
    "ascend": re.compile(
        r"\bacl\w*|\bACL\b|\bCANN\b|(?<![A-Za-z])NPUs?(?![a-z])|['\"]npu['\"]|\bHCCS\b"
        r"|\bHCCL\b|\bhcom\b|\bhccl_test\b|\btorch\.npu\b|\btorch_npu\.npu\w*|\bnpu_\w+"
        r"|\bAI (?:Core|CPU)\b|MC²|Notify_Wait|\bAscend\b|\bMindIE\b"
    ),
}
SHARED_WORDS: list[tuple[frozenset[str], re.Pattern[str]]] = [
    (frozenset({"nvidia", "amd"}), re.compile(r"\btorch\.cuda\b|['\"]cuda['\"]|\bGPUs?\b")),
    # PyTorch's async tensor parallelism runs on symmetric memory, which needs CUDA
    (frozenset({"nvidia"}), re.compile(r"(?i)async tensor[- ]parallel\w*|symmetric[- ]memory")),
]


def vendor_words(text: str) -> dict[str, frozenset[str]]:
    """The vendor-specific words of ``text``, each with the vendors whose texts may name it."""
    found: dict[str, frozenset[str]] = {}
    for vendor, pattern in VENDOR_WORDS.items():
        found |= {m.group(0): frozenset({vendor}) for m in pattern.finditer(text)}
    for owners, pattern in SHARED_WORDS:
        found |= {m.group(0): owners for m in pattern.finditer(text)}
    return found


def foreign_words(key: str, text: str) -> list[str]:
    """The words of ``text`` that its key's vendor (none for ``default`` / ``any+…``) may not
    name."""
    vendor = parse_key(key).vendor
    return sorted(w for w, owners in vendor_words(text).items() if vendor not in owners)


def test_vendor_words_are_found_in_sentences() -> None:
    assert foreign_words("default", "call torch.cuda.synchronize() less often") == ["torch.cuda"]
    assert foreign_words("any+pytorch", "use cudaMemcpyAsync over NVLink") == [
        "NVLink",
        "cudaMemcpyAsync",
    ]
    assert foreign_words("any+pytorch", "set PYTORCH_CUDA_ALLOC_CONF") == ["CUDA"]
    assert foreign_words("default", "hipMalloc on ROCm over xGMI") == ["ROCm", "hipMalloc", "xGMI"]
    assert foreign_words("default", "aclrtMemcpy in CANN on the NPU over HCCS") == [
        "CANN",
        "HCCS",
        "NPU",
        "aclrtMemcpy",
    ]
    assert foreign_words("any+pytorch", "torch.npu.Stream() or torch_npu.npu_swiglu") == [
        "torch.npu",
        "torch_npu.npu_swiglu",
    ]
    assert foreign_words("ascend", "torch.npu.synchronize() on the NPU") == []
    assert foreign_words("ascend", "torch.cuda.synchronize() on the GPU") == ["GPU", "torch.cuda"]
    assert foreign_words("amd+pytorch", "a torch.cuda.Stream on the GPU, a HIP stream") == []
    assert foreign_words("nvidia", "cudaFree, not hipFree") == ["hipFree"]
    assert foreign_words("amd+pytorch", "PyTorch's async tensor parallelism") == [
        "async tensor parallelism"
    ]
    # words that only look vendor-specific: option names, everyday English
    plain = "set cudagraph_mode or --cuda-graph-max-bs; access control; the npu-smi-less hip"
    assert foreign_words("any+sglang", plain) == []
    assert named("torch.npu.empty_cache()") == {"torch_npu"}


@pytest.mark.parametrize(("rule", "kind", "entry"), entries(), ids=lambda v: str(v)[:30])
def test_no_text_names_another_vendors_api(rule: str, kind: str, entry: dict[str, str]) -> None:
    for key, text in entry.items():
        foreign = foreign_words(key, text)
        assert not foreign, f"[{rule}.{kind}] {key!r} names {foreign}"


# Typical stacks of the three vendors' PyTorch traces and a serving engine's
NVIDIA_PYTORCH = frozenset({"pytorch", "eager", "cudnn", "nccl"})
ASCEND_TORCH_NPU = frozenset({"pytorch", "torch_npu", "eager", "hccl", "aclnn"})
NVIDIA_SGLANG = frozenset({"sglang", "pytorch", "cuda-graphs", "flashinfer", "nccl", "triton"})


def test_a_framework_text_beats_a_plain_vendor_text_but_not_the_vendors_framework_text() -> None:
    entry = {
        "default": "generic",
        "ascend": "ascend",
        "nvidia": "nvidia",
        "any+pytorch": "pytorch",
        "nvidia+pytorch": "nvidia pytorch",
        "ascend+torch_npu": "torch_npu",
        "any+sglang": "sglang",
    }
    assert choose(entry, "nvidia", NVIDIA_PYTORCH) == "nvidia pytorch"
    assert choose(entry, "ascend", ASCEND_TORCH_NPU) == "torch_npu"
    assert choose(entry, "nvidia", NVIDIA_SGLANG) == "sglang"
    assert choose(entry, "amd", frozenset({"pytorch"})) == "pytorch"
    del entry["ascend+torch_npu"]  # why Ascend needs its own text wherever PyTorch has one
    assert choose(entry, "ascend", ASCEND_TORCH_NPU) == "pytorch"


@pytest.mark.parametrize(("rule", "kind", "entry"), entries(), ids=lambda v: str(v)[:30])
def test_ascend_pytorch_traces_keep_the_mc2_advice(
    rule: str, kind: str, entry: dict[str, str]
) -> None:
    """Where the Ascend text names an MC² operator, a torch_npu trace's text names it too
    (and not a PyTorch text written for GPUs)."""
    operators = set(re.findall(r"MC² operators? (\w+)", entry.get("ascend", "")))
    chosen = choose(entry, "ascend", ASCEND_TORCH_NPU)
    assert all(op in chosen for op in operators), (rule, kind, sorted(operators), chosen)
    assert not foreign_words("ascend", chosen), (rule, kind, chosen)
