"""What the trace is: LLM serving (decode, or with prefill), the user's own runs, training
iterations, a micro-benchmark, a single pass, or unknown — with the evidence and a confidence.

:func:`signals` reads what the rows show before the steps are found (training kernels and
operators, how few kernels repeat, graph launches, decode attention and sampling kernels);
the step finder lets it decide which methods may cut the trace. :func:`decide` names the
workload once the steps and their phases are known, and with it the unit of a step, which
every output shows. ``decode`` is claimed only with decode evidence: engine markers whose
batch says so, or decode attention kernels.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import polars as pl

from tracekit.steps.graphs import GRAPH_LAUNCHES
from tracekit.steps.model import WORK_KINDS, Steps, is_host, kind_is, named
from tracekit.steps.period import NOT_STEPS
from tracekit.steps.phase import one_token, phase_evidence

KINDS = ("decode", "serving", "runs", "training", "microbenchmark", "single", "unknown")
# The marker families of the serving engines (tracekit.steps.engines) and of a Python frame of
# their step function: a step of theirs is one engine iteration.
ENGINE_FAMILIES = ("vllm", "vllm-style", "sglang", "trtllm", "mindie", "atom", "python")
# how the evidence names a family whose name alone would mislead: the vLLM-style annotation
# (execute_N_context_M(...)_generation_...) is TraceLens' and wraps SGLang's steps too
MARKER_NAMES = {
    "vllm-style": "vLLM-style step annotations (TraceLens)",
    "python": "engine step functions in Python frames",
}

# an optimizer's kernels (case-sensitive: "lamb" is in every lambda of an ATen kernel name,
# "adam" in LoadAMatrix)
OPTIMIZER = r"multi_tensor_apply|[Aa]dam[WA-Z_<(]|ADAM|[Ss]gd|SGD|Lamb|LAMB|_lamb_|[Oo]ptimizer"
# backward kernels (PyTorch's *_backward_*, cuDNN / CUTLASS dgrad and wgrad, FlashAttention's
# bwd) and the optimizer's: a training step, not an inference step
TRAINING_KERNELS = (
    r"[Bb]ackward|_bwd|bwd_|Grad(Input|Weight|GammaBeta)|grad_(input|weight)|[dw]grad"
    f"|{OPTIMIZER}"
)
# Host rows of a training loop: an optimizer's step, the FSDP/DDP wrappers, DeepSpeed ...
TRAINING_LOOP = (
    r"^Optimizer\.step#|^torch/optim/|optimizer\.step|FullyShardedDataParallel|^FSDP::"
    r"|DistributedDataParallel\.forward|^\[?DeepSpeed"
)
# ... and the rest that only training runs (autograd's backward, zero_grad, named steps)
TRAINING_HOST = (
    r"^autograd::engine::evaluate_function|^Optimizer\.zero_grad#"
    r"|^(train|training)[ _-]?(step|iter)|backward_step|" + TRAINING_LOOP
)
MIN_TRAINING_ROWS = 3  # training kernels or operators needed to call the trace training
BENCH_MAX_NAMES = 4  # a micro-benchmark runs at most this many distinct kernels ...
BENCH_MIN_REPEATS = 50  # ... each of its main ones at least this often on a rank
BENCH_COVER = 0.9  # ... and they hold this share of the kernel launches
BENCH_FEW_NAMES = 2  # or: at most this many names, each run at least ...
BENCH_FEW_REPEATS = 3  # ... this often on a rank, and no other kernel


@dataclass
class Signals:
    """What the rows show before any step is found."""

    training: list[str] = field(default_factory=list)  # evidence sentences, empty: none
    optimizer: bool = False  # an optimizer step or FSDP/DDP wrapper among that evidence
    kernels: int = 0  # kernel launches (kind kernel)
    repetitions: list[dict[str, Any]] = field(default_factory=list)  # micro-benchmark only
    decode_kernels: int = 0  # rows of decode attention kernels
    sampling: int = 0  # rows of sampling kernels
    graph_launches: int = 0
    most_launches: int = 0  # launches of the most launched kernel name
    ranks: int = 1  # ranks with device work

    @property
    def is_training(self) -> bool:
        """Whether backward/optimizer kernels or autograd/optimizer operators were seen."""
        return bool(self.training)

    @property
    def is_benchmark(self) -> bool:
        """Whether a few kernels repeated many times make up the trace."""
        return bool(self.repetitions) and not self.training

    @property
    def llm_decode(self) -> bool:
        """Whether the kernels show an LLM generating tokens (decode attention or
        sampling kernels)."""
        return self.decode_kernels > 0 or self.sampling > 0


@dataclass
class Workload:
    """What the trace is and what one of its steps is.

    ``kind`` is one of :data:`KINDS`; ``unit`` what one step of the analysis is (``decode
    step``, ``step``, ``run``, ``iteration``, ``repetition``, ``burst`` or ``whole window``);
    ``evidence`` the sentences that decided it; ``repetitions`` a micro-benchmark's kernels
    (``name, count, median_ns, spread``: (p90 - p10) / median of their durations).
    """

    kind: str
    unit: str
    confidence: str
    evidence: list[str] = field(default_factory=list)
    repetitions: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return asdict(self)


# What each kind is called in the outputs
DESCRIPTIONS = {
    "decode": "LLM serving, decode",
    "serving": "LLM serving with prefill",
    "runs": "runs marked by the user's ranges",
    "training": "training",
    "microbenchmark": "micro-benchmark",
    "single": "a single pass",
    "unknown": "unknown",
}


def _training(df: pl.DataFrame, kernels: pl.DataFrame) -> list[str]:
    evidence = []
    if kernels.height:
        n = kernels.select(named(kernels, TRAINING_KERNELS).sum()).item()
        if n >= MIN_TRAINING_ROWS:
            evidence.append(f"{n:,} backward or optimizer kernels")
    # only the matching host rows are copied (a Kineto trace holds millions of operators)
    wanted = named(df, TRAINING_HOST) & is_host() & kind_is("op", "range", "api")
    hits = df.lazy().filter(wanted).select("name").collect()
    if hits.height >= MIN_TRAINING_ROWS:
        top = (
            hits.group_by("name")
            .len()
            .with_columns(pl.col("name").cast(pl.String))
            .sort("len", "name", descending=[True, False])
            .row(0)
        )
        evidence.append(
            f"{hits.height:,} autograd/optimizer/FSDP host rows such as {top[0][:60]!r}"
        )
    return evidence


def _optimizer(df: pl.DataFrame, kernels: pl.DataFrame) -> bool:
    """Whether an optimizer's step (its kernels or ``Optimizer.step#``) or an FSDP/DDP
    wrapper is in the trace: a training loop, not a layer's forward-backward benchmark."""
    if kernels.height and kernels.select(named(kernels, OPTIMIZER).any()).item():
        return True
    wanted = named(df, TRAINING_LOOP) & is_host() & kind_is("op", "range")
    return bool(df.select(wanted.any()).item())


def _repetitions(kernels: pl.DataFrame) -> list[dict[str, Any]]:
    """A micro-benchmark's kernels, or [] when the kernels are too varied or too few."""
    if not kernels.height:
        return []
    ranks = max(kernels["rank"].n_unique(), 1) if "rank" in kernels.columns else 1
    per = (
        kernels.group_by("name")  # on the categorical: only the distinct names are spelled out
        .agg(
            count=pl.len() // ranks,
            median_ns=pl.col("dur").median(),
            p10=pl.col("dur").quantile(0.1),
            p90=pl.col("dur").quantile(0.9),
        )
        .with_columns(pl.col("name").cast(pl.String))
        .sort("count", "name", descending=[True, False])
    )
    # few names, each repeated a little, and nothing else (one kernel timed 3 times) ...
    alone = per.height <= BENCH_FEW_NAMES and int(per["count"].min()) >= BENCH_FEW_REPEATS
    # ... or a few names repeated many times that hold nearly every launch
    main = per.filter(pl.col("count") >= BENCH_MIN_REPEATS)
    held = int(main["count"].sum()) >= BENCH_COVER * kernels.height // ranks
    many = 0 < main.height <= BENCH_MAX_NAMES and per.height <= 4 * BENCH_MAX_NAMES and held
    if not (alone or many):
        return []
    spread = pl.when(pl.col("median_ns") > 0).then(
        (pl.col("p90") - pl.col("p10")) / pl.col("median_ns")
    )
    rows = per.head(BENCH_MAX_NAMES * 2).select(
        "name", "count", pl.col("median_ns").cast(pl.Int64), spread=spread.round(4)
    )
    return rows.to_dicts()


def signals(df: pl.DataFrame) -> Signals:
    """What the classified rows show about the workload, before any step is found (the
    device rows are read through the few columns needed, not copied whole)."""
    columns = [c for c in ("kind", "name", "dur", "rank", "category") if c in df.columns]
    work = df.lazy().filter(kind_is(*WORK_KINDS)).select(columns).collect()
    kernels = work.filter(kind_is("kernel"))
    out = Signals(training=_training(df, kernels), kernels=kernels.height)
    out.optimizer = bool(out.training) and _optimizer(df, kernels)
    out.repetitions = _repetitions(kernels)
    out.ranks = max(work["rank"].n_unique(), 1) if work.height else 1
    if work.height:
        names = work.group_by("name").len().with_columns(pl.col("name").cast(pl.String))
        launched = kernels.group_by("name").len()
        out.most_launches = int(launched["len"].max() or 0) if launched.height else 0
        evidence = phase_evidence(names["name"])
        counted = evidence.join(names, on="name")
        prefill = int(counted.filter(pl.col("prefill") | pl.col("mixed"))["len"].sum() or 0)
        # GEMV and split-KV combine kernels count as decode only without prefill evidence
        decode = pl.col("decode") | (pl.col("weak_decode") & (prefill == 0))
        out.decode_kernels = int(counted.filter(decode)["len"].sum() or 0)
        out.decode_kernels += one_token(df).height  # picks the kernels by name first
        if "category" in work.columns:
            out.sampling = work.select((pl.col("category") == "sampling").sum()).item()
    out.graph_launches = df.select((kind_is("api") & named(df, GRAPH_LAUNCHES)).sum()).item()
    return out


def _phases(steps: Steps) -> set[str]:
    real = steps.ranges.filter(~pl.col("label").is_in(NOT_STEPS))
    return set(real["phase"].drop_nulls().unique().to_list())


def _per_rank(steps: Steps) -> int:
    return int(steps.ranges.group_by("rank").len()["len"].max() or 0) if len(steps) else 0


def _benchmark(found: Signals) -> Workload:
    top = found.repetitions[0]
    evidence = [
        f"{len(found.repetitions)} kernel name(s) make up the launches;"
        f" {top['name'][:60]!r} runs {top['count']:,} times"
    ]
    return Workload("microbenchmark", "repetition", "high", evidence, found.repetitions)


def decide(found: Signals, steps: Steps) -> Workload:
    """The workload of a trace whose steps (with their phases) are ``steps``. Only ``decode``
    and ``serving`` keep a step's phase ``decode`` (:func:`settle` clears it elsewhere)."""
    phases = _phases(steps)
    family = steps.family
    n = _per_rank(steps)
    counted = f"{n} {'step' if n == 1 else 'steps'} by {steps.method}"
    if family in ENGINE_FAMILIES:
        how = "high" if steps.phase_method and "marker" in steps.phase_method else "medium"
        evidence = [f"{MARKER_NAMES.get(family, family + ' engine step markers')}: {counted}"]
        if phases == {"decode"}:
            return Workload("decode", "decode step", how, evidence)
        if phases:
            listed = ", ".join(sorted(phases))
            return Workload("serving", "step", how, [*evidence, f"phases {listed}"])
        return Workload("serving", "step", "medium", [*evidence, "the batches say no phase"])
    if found.is_training:
        unit = "whole window" if steps.method == "whole" else "iteration"
        # backward kernels alone may be a layer's forward-backward benchmark: less sure
        sure = "high" if found.optimizer else "medium"
        return Workload("training", unit, sure, [*found.training, counted])
    if steps.method == "whole" and found.is_benchmark:
        return _benchmark(found)
    by_marker = bool(steps.phase_method and "marker" in steps.phase_method)
    sampled = bool(steps.phase_method and "sampling" in steps.phase_method)
    if phases == {"decode"} and sampled and not found.decode_kernels:
        evidence = [f"one sampling pass a step (a token per sequence per step) in {counted}"]
        return Workload("decode", "decode step", "medium", evidence)
    if phases == {"decode"} and (found.decode_kernels or by_marker):
        # steps the trace marks itself, each a decode by its name or kernels: as sure as them
        sure = by_marker or (steps.method == "marker" and steps.confidence == "high")
        evidence = [
            f"markers named decode steps: {counted}"
            if by_marker
            else "decode kernels (decode attention, GEMV, one query token per sequence)"
            f" in {counted}"
        ]
        return Workload("decode", "decode step", "high" if sure else "medium", evidence)
    if "mixed" in phases or {"prefill", "decode"} <= phases:
        listed = ", ".join(sorted(phases))
        return Workload("serving", "step", "medium", [f"attention kernels say {listed}"])
    if steps.method == "ranges":
        evidence = [steps.detail]
        if phases:
            evidence.append(f"attention kernels say {', '.join(sorted(phases))}")
        return Workload("runs", "run", steps.confidence, evidence)
    if found.is_benchmark:
        return _benchmark(found)
    if phases == {"prefill"}:
        return Workload("runs", "run", "medium", [f"prefill attention kernels in {counted}"])
    if steps.method in ("graph", "whole") and n == 1 and found.graph_launches == found.ranks:
        return Workload("single", "whole window", "medium", ["one graph launch replays the work"])
    if steps.method == "whole" and found.most_launches == 1:
        evidence = [f"{found.kernels} kernel(s), each launched once"]
        return Workload("single", "whole window", "medium", evidence)
    if steps.method == "whole":
        return Workload("unknown", "whole window", "none", [steps.detail])
    unit = "burst" if steps.method == "gaps" else "step"
    return Workload("unknown", unit, "low", [counted, "nothing says what a step is"])


def settle(steps: Steps, workload: Workload) -> None:
    """Make the steps agree with the workload: a whole window is the right answer for a
    micro-benchmark or a single pass (its confidence is the workload's, not "none") and all
    that a training window without iteration markers gives (medium), and a
    workload that is no LLM serving keeps no step of phase ``decode`` (a training loop's
    attention kernels may look like decode ones), with a warning."""
    if steps.method == "whole" and workload.kind in ("microbenchmark", "single"):
        steps.confidence = workload.confidence
    elif steps.method == "whole" and workload.kind == "training":
        steps.confidence = "medium"  # one window is all a training window without markers is
    if workload.kind in ("decode", "serving"):
        return
    stray = steps.ranges["phase"] == "decode"
    if stray.any():
        steps.ranges = steps.ranges.with_columns(
            phase=pl.when(pl.col("phase") == "decode").then(None).otherwise(pl.col("phase"))
        )
        steps.warnings.append(
            f"{int(stray.sum())} step(s) ran decode-like attention kernels in a {workload.kind}"
            " workload: their phase is left unknown"
        )
