"""`tracekit diff` on planted changes: exit codes, verdicts and numbers against the scenario's
own truth (step_truth and the generator's device records)."""

from __future__ import annotations

import json
import re
import statistics
from dataclasses import replace
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

import tracekit
from fixtures.kineto_writer import write_kineto_json
from fixtures.nsys_writer import write_nsys_sqlite
from fixtures.scenario import FALLBACK_CHAIN, KERNELS, Scenario, build_scenario
from fixtures.step_truth import step_truth
from tests.conftest import run_cli
from tracekit.cli import app
from tracekit.diff import compare
from tracekit.diff.findings import compare_findings
from tracekit.model import Finding
from tracekit.names import kernel_key
from tracekit.reports.diff_markdown import render_diff_markdown
from tracekit.reports.diff_terminal import render_diff
from tracekit.reports.markdown import md_text

SHAPE = {"steps": 16, "layers": 2}


def _mean(sc: Scenario, column: str) -> float:
    return statistics.fmean(row[column] for row in step_truth(sc))


def _diff(*args: str) -> tuple[int, dict]:
    result = CliRunner().invoke(app, ["diff", *args, "--format", "json"])
    assert result.exit_code in (0, 1), result.output
    return result.exit_code, json.loads(result.stdout)


def _nonzero(changes: list[dict]) -> list[str]:
    return [c["name"] for c in changes if c["estimate"]["delta"]]


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory) -> tuple[Scenario, Path]:
    sc = build_scenario(**SHAPE)
    return sc, write_nsys_sqlite(sc.events, tmp_path_factory.mktemp("clean") / "base.sqlite")


def _write(sc: Scenario, tmp: Path, name: str = "head.sqlite") -> Path:
    return write_nsys_sqlite(sc.events, tmp / name)


def test_trace_against_itself_passes_with_every_delta_zero(clean: tuple[Scenario, Path]) -> None:
    _, path = clean
    code, data = _diff(str(path), str(path))
    assert code == 0 and data["verdict"] == "no significant change"
    assert data["step"]["estimate"]["delta"] == 0 and data["step"]["status"] == "unchanged"
    assert data["step"]["p90"]["base"] == data["step"]["p90"]["head"]
    assert data["step"]["count"] == {"base": 16, "head": 16}
    for part in ("categories", "kernels", "metrics"):
        assert data[part] and _nonzero(data[part]) == [], part
    assert {k["detail"]["presence"] for k in data["kernels"]} == {"both"}
    assert all(f["status"] == "same" for f in data["findings"])


def test_gemm_ten_percent_slower_fails_naming_gemm(
    clean: tuple[Scenario, Path], tmp_path: Path
) -> None:
    base_sc, base = clean
    head_sc = build_scenario(**SHAPE, gemm_scale=1.1)
    head = _write(head_sc, tmp_path)
    code, data = _diff(str(base), str(head))
    assert code == 1 and data["verdict"] == "regression"
    gemm = next(c for c in data["categories"] if c["name"] == "gemm")
    want = _mean(head_sc, "cat_gemm_ns") - _mean(base_sc, "cat_gemm_ns")
    assert gemm["estimate"]["delta"] == pytest.approx(want, abs=1e-6)
    assert gemm["estimate"]["rel"] == pytest.approx(0.10, abs=5e-4)  # durations rounded to ns
    assert gemm["status"] == "regression" and gemm["estimate"]["rel_lo"] > 0
    assert data["categories"][0]["name"] == "gemm"  # the top mover
    # only GEMM kernels moved, each by 10 %
    moved = [k for k in data["kernels"] if k["estimate"]["delta"]]
    assert moved and {k["detail"]["category"] for k in moved} == {"gemm"}
    assert all(k["estimate"]["rel"] == pytest.approx(0.10, abs=5e-4) for k in moved)
    assert [g["name"] for g in data["categories"] if g["status"] == "regression"] == ["gemm"]
    # the Markdown verdict comes first and names gemm with its delta
    md = CliRunner().invoke(app, ["diff", str(base), str(head), "--format", "md"])
    assert md.exit_code == 1
    verdict = md.stdout.split("\n\n")[1]
    assert verdict.startswith("🔴 **Regression**: <code>gemm</code> time per step +10.0% (+")
    assert f"+{want / 1000:.2f} µs" in verdict
    # a 20 % threshold lets the same change pass, given either way
    for threshold in ("20%", "0.2"):
        result = CliRunner().invoke(app, ["diff", str(base), str(head), "--threshold", threshold])
        assert result.exit_code == 0, result.output


def test_five_jittered_runs_per_side_pass(tmp_path: Path) -> None:
    for side, seeds in (("base", range(5)), ("head", range(5, 10))):
        (tmp_path / side).mkdir()
        for seed in seeds:
            sc = build_scenario(steps=8, layers=2, seed=seed, jitter=0.03)
            _write(sc, tmp_path / side, f"run{seed}.sqlite")
    # base as a folder of runs, head as a glob
    code, data = _diff(str(tmp_path / "base"), str(tmp_path / "head" / "run*.sqlite"))
    assert code == 0 and data["verdict"] == "no significant change"
    assert len(data["base"]["runs"]) == len(data["head"]["runs"]) == 5
    assert data["step"]["count"] == {"base": 40, "head": 40}
    for gate in [data["step"], *data["categories"]]:
        assert gate["status"] not in ("regression", "improvement"), gate["name"]
    assert abs(data["step"]["estimate"]["rel"]) < 0.05


def test_new_fallback_chain_is_matched_with_the_native_kernel_it_replaced(
    clean: tuple[Scenario, Path], tmp_path: Path
) -> None:
    head_sc = build_scenario(**SHAPE, fallback_kernel=True)
    code, data = _diff(str(clean[1]), str(_write(head_sc, tmp_path)))
    chain = {kernel_key(KERNELS[role].name) for role in FALLBACK_CHAIN}
    act = kernel_key(KERNELS["act"].name)  # SiLU-and-mul (the shared expert's too)
    (role,) = [k for k in data["kernels"] if chain & set(k["detail"]["head_names"])]
    detail = role["detail"]
    assert (detail["presence"], detail["matched_by"], detail["fallback"]) == ("role", "order", True)
    assert detail["base_names"] == [act] and set(detail["head_names"]) == chain | {act}

    def per_step(sc: Scenario, roles: set[str]) -> float:
        return sum(e - s for s, e, _, _, r, _ in sc.truth["work"] if r in roles) / SHAPE["steps"]

    native = {"act", "shared_act"}
    assert role["estimate"]["base"] == pytest.approx(per_step(clean[0], native))
    assert role["estimate"]["head"] == pytest.approx(
        per_step(head_sc, native | set(FALLBACK_CHAIN))
    )
    members = {(m["side"], m["name"]): m for m in detail["members"]}
    for name in chain:  # one launch per step each, in the layer where the chain replaced act
        assert members[("head", name)]["count"] == 1
    assert members[("base", act)]["count"] - members[("head", act)]["count"] == 1
    assert [
        k for k in data["kernels"] if k["detail"]["presence"] in ("appeared", "disappeared")
    ] == []
    fallback = next(m for m in data["metrics"] if m["name"] == "fallback_ns")
    assert fallback["status"] == "worse"
    assert fallback["estimate"]["head"] == pytest.approx(_mean(head_sc, "fallback_ns"))
    # the fallback pattern is new, with the head's impact (findings compared by pattern)
    new = [f for f in data["findings"] if f["status"] == "appeared"]
    assert {f["rule"] for f in new} == {"fallback"}
    assert all((f["base_runs"], f["head_runs"], f["base_ns"]) == (0, 1, 0) for f in new)
    head_found = tracekit.analyze(tracekit.load(tmp_path / "head.sqlite")).findings
    want_ns = sum(f.impact_ns for f in head_found if f.rule == "fallback")
    assert sum(f["head_ns"] for f in new) == want_ns
    assert code == data["exit_code"]


def test_exposed_all_to_all_overlapped_is_an_improvement(
    clean: tuple[Scenario, Path], tmp_path: Path
) -> None:
    base_sc = build_scenario(**SHAPE, exposed_all_to_all=True)
    base = _write(base_sc, tmp_path, "exposed.sqlite")
    code, data = _diff(str(base), str(clean[1]))
    assert code == 0
    resolved = [f for f in data["findings"] if f["status"] == "disappeared"]
    assert [(f["rule"], f["base_runs"], f["head_runs"]) for f in resolved] == [("overlap", 1, 0)]
    exposed = next(m for m in data["metrics"] if m["name"] == "exposed_comm_ns")
    want = _mean(clean[0], "exposed_comm_ns") - _mean(base_sc, "exposed_comm_ns")
    assert want < 0 and exposed["estimate"]["delta"] == pytest.approx(want)
    assert exposed["status"] == "better"
    md = CliRunner().invoke(app, ["diff", str(base), str(clean[1]), "--format", "md"]).stdout
    assert f"Findings: 1 resolved ([overlap] {md_text(resolved[0]['title'])})" in md
    assert "#### Findings by pattern" in md and "| ✅ resolved | overlap |" in md
    assert "| exposed communication |" in md


def _renamed(events: pl.DataFrame, names: dict[str, str]) -> pl.DataFrame:
    return events.with_columns(pl.col("name").replace(names))


def test_kernel_renamed_by_hash_or_counter_is_matched(
    clean: tuple[Scenario, Path], tmp_path: Path
) -> None:
    sc = clean[0]
    act, router, topk = (KERNELS[r].name for r in ("act", "router", "topk"))
    sides = [
        {act: "triton_poi_fused_silu_mul_3", router: "router_gemm_0x1a2b3c", topk: "Conv2D1"},
        {act: "triton_poi_fused_silu_mul_7", router: "router_gemm_0x4d5e6f", topk: "Conv2D5"},
    ]
    paths = [
        write_nsys_sqlite(_renamed(sc.events, names), tmp_path / f"{i}.sqlite")
        for i, names in enumerate(sides)
    ]
    code, data = _diff(*map(str, paths))
    assert code == 0
    kernels = {k["name"]: k for k in data["kernels"]}
    for key in ("triton_poi_fused_silu_mul", "router_gemm"):  # same key on both sides
        assert kernels[key]["detail"]["presence"] == "both"
        assert kernels[key]["estimate"]["delta"] == 0
        assert kernels[key]["detail"]["count_base"] == kernels[key]["detail"]["count_head"] > 0
    # a graph counter that no rule strips: paired as the one leftover of its family
    assert kernels["Conv2D1"]["detail"]["presence"] == "renamed"
    assert kernels["Conv2D1"]["detail"]["head_name"] == "Conv2D5"
    assert kernels["Conv2D1"]["estimate"]["delta"] == 0
    presence = {k["detail"]["presence"] for k in data["kernels"]}
    assert "appeared" not in presence and "disappeared" not in presence


def test_nsys_against_kineto_compares_steps_and_categories(
    clean: tuple[Scenario, Path], tmp_path: Path
) -> None:
    sc, nsys = clean
    kineto = write_kineto_json(sc.events, tmp_path / "t.json")
    code, data = _diff(str(nsys), str(kineto))
    assert code == 0
    assert [data["base"]["runs"][0]["format"], data["head"]["runs"][0]["format"]] == [
        "nsys-sqlite",
        "kineto",
    ]
    assert data["step"]["count"] == {"base": 16, "head": 16}
    assert data["step"]["estimate"]["delta"] == 0
    assert data["step"]["estimate"]["base"] == statistics.median(r["dur"] for r in step_truth(sc))
    assert {c["name"] for c in data["categories"]} >= {"gemm", "moe", "comm", "attention"}
    assert _nonzero(data["categories"]) == [] and _nonzero(data["kernels"]) == []
    assert {k["detail"]["presence"] for k in data["kernels"]} == {"both"}


def test_markdown_escapes_trace_names(clean: tuple[Scenario, Path], tmp_path: Path) -> None:
    label = 'evil|`x`*b*_kernel"q"&'  # what the report shows: the name up to its template
    events = _renamed(clean[0].events, {KERNELS["act"].name: label + "<script>alert(1)</script>"})
    head = write_nsys_sqlite(events, tmp_path / "evil.sqlite")
    md = CliRunner().invoke(app, ["diff", str(clean[1]), str(head), "--format", "md"]).stdout
    assert "<script" not in md and label not in md
    # the renamed kernel keeps its place in every step: matched by role, its new name escaped
    assert (
        f"matched by order: <code>{md_text('vllm::act_and_mul_kernel → ' + label)}</code> "
        "(activation): 18.41 µs → 18.41 µs per step" in md
    )
    movers = md.split("#### Top movers")[1].split("####")[0]
    rows = [line for line in movers.splitlines() if line.startswith("|")]
    assert len(rows) > 3 and {len(re.split(r"(?<!\\)\|", row)) for row in rows} == {9}


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["{missing}", "{base}"], "no such file, folder or pattern"),
        (["{empty}", "{base}"], "folder holds no trace"),
        (["{base}", "{empty}/*.sqlite"], "matches no file"),
        (["{base}", "{garbage}"], "not a recognised trace"),
        (["{base}", "{base}", "--threshold", "5"], "--threshold '5'"),
        (["{base}", "{base}", "--threshold", "abc"], "--threshold 'abc'"),
        (["{base}", "{base}", "--format", "html"], "--format 'html'"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    clean: tuple[Scenario, Path], tmp_path: Path, args: list[str], needle: str
) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "garbage.bin").write_bytes(b"\x00not a trace\n" * 10)
    paths = {
        "missing": tmp_path / "nope.sqlite",
        "empty": tmp_path / "empty",
        "base": clean[1],
        "garbage": tmp_path / "garbage.bin",
    }
    done = run_cli("diff", *(a.format(**paths) for a in args))
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert needle in " ".join(done.stderr.split())


def test_exit_code_one_from_the_shell(clean: tuple[Scenario, Path], tmp_path: Path) -> None:
    head = _write(build_scenario(**SHAPE, gemm_scale=1.1), tmp_path)
    done = run_cli("diff", str(clean[1]), str(head), "--format", "md")
    assert done.returncode == 1 and done.stdout.startswith("### tracekit diff\n\n🔴 **Regression**")


def test_steps_found_differently_are_flagged(clean: tuple[Scenario, Path], tmp_path: Path) -> None:
    unmarked = clean[0].events.filter(pl.col("kind") != "range")  # no decode_step ranges
    head = write_nsys_sqlite(unmarked, tmp_path / "unmarked.sqlite")
    _, data = _diff(str(clean[1]), str(head))
    assert data["base"]["runs"][0]["steps_by"] == "marker"
    assert data["head"]["runs"][0]["steps_by"] != "marker"
    assert len(data["warnings"]) == 1 and "steps were found differently" in data["warnings"][0]
    md = CliRunner().invoke(app, ["diff", str(clean[1]), str(head), "--format", "md"]).stdout
    assert "⚠️ steps were found differently (base: marker; head: " in md


def _pattern(pattern: str, impact: int, rule: str = "bubbles", title: str = "") -> Finding:
    return Finding(
        rule,
        "warning",
        title or f"title {pattern}",
        "detail",
        step=3,
        pattern=pattern,
        steps=[3],
        impact_ns=impact,
        advice="advice",
    )


@pytest.fixture(scope="module")
def quiet(clean: tuple[Scenario, Path]) -> tracekit.Analysis:
    """The clean trace analysed without rules (16 steps): the tests give it findings."""
    return tracekit.analyze(tracekit.load(clean[1]), [])


def test_findings_compare_by_pattern_not_by_step(quiet: tracekit.Analysis) -> None:
    def run(*found: Finding) -> tracekit.Analysis:
        return replace(quiet, findings=list(found))

    base = [run(_pattern("a", 1_600), _pattern("b", 160_000), _pattern("gone", 8_000))]
    head = [
        run(
            replace(_pattern("a", 1_600), step=9, steps=[9]),  # same pattern, other step
            _pattern("b", 480_000),
            _pattern("c", 400_000),
            _pattern("new", 16_000, rule="fallback"),
            _pattern("c", 3_200, rule="fallback"),  # another rule's pattern c
        )
    ]
    changes = compare_findings(base, head, floor=2_000, step_median=100_000)
    got = {(c.rule, c.pattern): c for c in changes}
    assert [(c.rule, c.pattern, c.status) for c in changes] == [
        ("bubbles", "c", "appeared"),
        ("bubbles", "b", "grew"),
        ("fallback", "new", "appeared"),
        ("bubbles", "gone", "disappeared"),
        ("fallback", "c", "appeared"),
        ("bubbles", "a", "same"),
    ]
    b = got[("bubbles", "b")]
    assert (b.base_ns, b.head_ns) == (160_000, 480_000)
    assert (b.base_per_step_ns, b.head_per_step_ns) == (10_000, 30_000)  # 16 steps a side
    assert b.delta_per_step_ns == 20_000 and b.step_share == pytest.approx(0.2)
    # below the floor (2 µs per step): the same, however it moved
    small = compare_findings(
        base, [run(_pattern("b", 160_000 + 16 * 1_999))], floor=2_000, step_median=100_000
    )
    assert {(c.pattern, c.status) for c in small} == {
        ("b", "same"),
        ("a", "disappeared"),
        ("gone", "disappeared"),
    }
    shrank = compare_findings(base, [run(_pattern("b", 16_000))], 2_000, 100_000)
    assert next(c for c in shrank if c.pattern == "b").status == "shrank"
    # several runs a side: impact per run is the mean, per step over all the side's steps
    two = compare_findings(base, [run(_pattern("b", 480_000)), run()], 2_000, 100_000)
    b2 = next(c for c in two if c.pattern == "b")
    assert (b2.head_ns, b2.head_per_step_ns, b2.head_runs) == (240_000, 15_000, 1)


def test_findings_do_not_gate_and_are_shown(quiet: tracekit.Analysis) -> None:
    evil = "exposed <script>alert(1)</script> | `x`"
    base = [replace(quiet, findings=[_pattern("b", 160_000)])]
    head = [replace(quiet, findings=[_pattern("b", 480_000), _pattern("e", 10**9, title=evil)])]
    diff = compare(base, head)
    assert diff.verdict == "no significant change" and diff.exit_code == 0
    data = diff.to_dict()
    assert [(f["pattern"], f["status"]) for f in data["findings"]] == [
        ("e", "appeared"),
        ("b", "grew"),
    ]
    md = render_diff_markdown(data)
    table = md.split("#### Findings by pattern")[1].split("<sub>")[0]
    assert "| 🔺 grew | bubbles | title b | 160.00 µs | 480.00 µs | +20.00 µs |" in table
    assert f"| 🆕 new | bubbles | {md_text(evil)} | - | 1.000 s |" in table
    assert "<script" not in md and "Findings: 1 new ([bubbles] exposed &lt;script&gt;" in md
    text = "".join(str(t) for t in render_diff(data, width=200).renderables)
    assert (
        "grew: [bubbles] title b: impact 160.00 µs → 480.00 µs per run, +20.00 µs per step" in text
    )
