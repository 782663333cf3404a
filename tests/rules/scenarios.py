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
from fixtures.scenario import Scenario, build_scenario


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
