"""The decode scenario written in every vendor format, with each planted fault, and analysed:
what the rule tests (and tests/test_analysis_scenario.py, tests/test_analysis_ascend.py) run
the rules on."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import polars as pl

import tracekit
from fixtures.ascend_scenario import build_ascend_scenario
from fixtures.ascend_text_writer import write_torch_npu
from fixtures.kineto_writer import write_kineto_json
from fixtures.msprof_prof_writer import write_prof
from fixtures.nsys_writer import write_nsys_sqlite
from fixtures.rocpd_writer import write_rocpd
from fixtures.rocprof_csv_writer import write_rocprofv3_csv
from fixtures.scenario import KERNELS, Scenario, build_scenario
from tracekit.model import FOLDED, ranked


def _csv(sc: Scenario, tmp: Path) -> Path:
    write_rocprofv3_csv(sc.events, tmp / "csv")
    return tmp / "csv"


WRITERS: dict[str, Callable[[Scenario, Path], Path]] = {
    "nsys": lambda sc, tmp: write_nsys_sqlite(sc.events, tmp / "t.sqlite"),
    "kineto": lambda sc, tmp: write_kineto_json(sc.events, tmp / "t.json"),
    "rocpd": lambda sc, tmp: write_rocpd(sc.events, tmp / "t.db"),
    "rocprofv3-csv": _csv,
}
# rocprofiler records hipMemsetAsync as a fill kernel: compute in those renderings
KERNEL_ROLES = {"rocpd": ("memset",), "rocprofv3-csv": ("memset",)}
FAULTS = {
    "clean": {},
    "fallback": {"fallback_kernel": True},
    "exposed": {"exposed_all_to_all": True},
    "bubble": {"idle_bubble_ns": 150_000},
    "unfused": {"unfused_collective": True},
}
# The faults planted in some steps only (``fault_steps``), in two vendors' renderings.
SOME_STEPS = (1, 3)
PARTIAL = {f"{fault}@some": {**knobs, "fault_steps": SOME_STEPS} for fault, knobs in FAULTS.items()}
PARTIAL_FORMATS = ("nsys", "rocpd")
ASCEND_WRITERS: dict[str, Callable[[pl.DataFrame, Path], Path]] = {
    "torch_npu": lambda events, tmp: write_torch_npu(events, tmp),
    "prof": lambda events, tmp: write_prof(events, tmp),
}
ASCEND_CLEAN = {"fallback_kernel": False, "hccl_all_to_all_layers": 0}


Analysed = Callable[[str, str], tuple[Scenario, tracekit.Analysis]]  # the rule tests' fixture


def analysed(fmt: str, knobs: dict, tmp: Path) -> tuple[Scenario, tracekit.Analysis]:
    """The scenario (4 steps of 4 layers, ``knobs`` planted) in format ``fmt``, analysed."""
    sc = build_scenario(steps=4, layers=4, **knobs)
    return sc, tracekit.analyze(tracekit.load(WRITERS[fmt](sc, tmp)))


def ascend_analysed(writer: str, tmp: Path, **knobs: object) -> tracekit.Analysis:
    """The Ascend rendering of the scenario (clean unless ``knobs`` plant a fault) written by
    ``writer``, analysed."""
    sc = build_ascend_scenario(steps=4, layers=4, **{**ASCEND_CLEAN, **knobs})
    return tracekit.analyze(tracekit.load(ASCEND_WRITERS[writer](sc.events, tmp)))


def truth(**knobs: object) -> dict:
    """The ground truth of the scenario with ``knobs`` (the Ascend rendering keeps its times)."""
    return build_scenario(steps=4, layers=4, **knobs).truth


def role_ns(sc: Scenario, role: str, steps: tuple[int, ...] | None = None) -> int:
    """The summed time of the scenario's device rows of ``role`` (in ``steps``, or all)."""
    return sum(
        end - start
        for start, end, _, _, r, step in sc.truth["work"]
        if r == role and (steps is None or step in steps)
    )


def exposed_role_ns(sc: Scenario, role: str) -> int:
    """The summed time in which the scenario's device rows of ``role`` ran with no compute
    kernel (a kernel that does not communicate) beside them: plain interval arithmetic."""
    work = sc.truth["work"]
    compute = sorted(
        (start, end)
        for start, end, _, kind, r, _ in work
        if kind == "kernel" and r in KERNELS and not KERNELS[r].comm
    )
    union: list[list[int]] = []
    for start, end in compute:
        if union and start <= union[-1][1]:
            union[-1][1] = max(union[-1][1], end)
        else:
            union.append([start, end])
    total = 0
    for start, end, _, _, r, _ in work:
        if r == role:
            covered = sum(max(0, min(end, e) - max(start, s)) for s, e in union)
            total += end - start - covered
    return total


def of_rule(analysis: tracekit.Analysis, rule: str) -> list[tracekit.Finding]:
    """The findings of ``rule``, checked for what every finding must have: ranked by impact
    with the others (warm-up ones after the steady state's, folded ones last), a pattern,
    steps, advice, and its share of the summed step time."""
    found = analysis.findings
    assert found == ranked(found)
    for warm in (False, True):  # the steady state's by impact, then the warm-up ones
        listed = [f.impact_ns for f in found if f.pattern != FOLDED and f.warm_up is warm]
        assert listed == sorted(listed, reverse=True)
    kinds = [f.warm_up for f in found if f.pattern != FOLDED]
    assert kinds == sorted(kinds)
    total = analysis.step_metrics["dur"].sum()
    for f in found:
        assert f.pattern and f.steps and f.ranks and f.advice.strip(), f
        assert f.impact_share == f.impact_ns / total
    return [f for f in found if f.rule == rule]
