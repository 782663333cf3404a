"""`tracekit trend` on generated series with planted changes (fixtures.series): the moves it
finds, what it attributes them to and with what share, against the truth computed from the
scenario's own records; ordering, baseline, parallel runs, bad input and escaping."""

from __future__ import annotations

import copy
import json
import os
import pickle
from pathlib import Path
from typing import Any

import pytest

from fixtures.nsys_writer import DEFAULT_ORIGIN_NS, write_nsys_sqlite
from fixtures.scenario import build_scenario
from fixtures.series import FALLBACK, write_series
from tests.conftest import run_cli
from tracekit.errors import TraceError
from tracekit.names import kernel_key
from tracekit.reports.trend_markdown import render_trend_markdown
from tracekit.reports.trend_text import render_trend
from tracekit.trend import trend
from tracekit.trend.runs import vs_baseline
from tracekit.trend.series import natural_key, series

SIGNIFICANT = ("regression", "improvement")


def _keys(names: list[str]) -> set[str]:
    return {kernel_key(n) for n in names}


def _json(*args: str) -> dict[str, Any]:
    result = run_cli("trend", *args, "--format", "json", "--workers", "1")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[Path], dict, dict]:
    """The planted series, its truth and the CLI's JSON of it."""
    folder = tmp_path_factory.mktemp("planted")
    paths, truth = write_series(folder, "planted")
    return paths, truth, _json(str(folder))


@pytest.fixture(scope="module")
def vendor(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[Path], dict, dict]:
    """The vendor-switch series, its truth and its trend."""
    paths, truth = write_series(tmp_path_factory.mktemp("vendor"), "vendor")
    return paths, truth, trend(paths, workers=1).to_dict()


def test_planted_json_equals_the_truth(planted: tuple[list[Path], dict, dict]) -> None:
    paths, truth, data = planted
    assert data["kind"] == "trend" and data["ordered_by"] == "name" and data["baseline"] == 0
    assert [r["source"] for r in data["runs"]] == [str(p) for p in paths]
    for run, want in zip(data["runs"], truth["runs"], strict=True):
        assert run["label"] == want["label"] and run["vendor"] == "nvidia"
        assert (run["steps"], run["steps_by"], run["phase"]) == (12, "marker", "decode")
        assert run["step_ns"]["median"] == want["step_median_ns"]
        assert run["step_ns"]["lo"] < want["step_median_ns"] < run["step_ns"]["hi"]
        assert run["fallback_ns"] == pytest.approx(want["fallback_ns"])
        for category, ns in want["categories"].items():
            assert run["categories"][category] == pytest.approx(ns), category
        assert run["date"] == "2026-01-01T00:00:00Z"  # the nsys writer's session start
        base = truth["runs"][0]["step_median_ns"]
        assert run["vs_baseline"]["delta_ns"] == want["step_median_ns"] - base
    assert len(data["moves"]) == len(truth["moves"]) == 5
    for move, want in zip(data["moves"], truth["moves"], strict=True):
        assert (move["from"], move["to"]) == (want["from"], want["to"])
        assert move["significant"] == want["significant"], move["from"]
        assert move["delta_ns"] == pytest.approx(want["delta_ns"])
        if want["status"]:
            assert move["status"] == want["status"]
        else:  # no false move: inside the threshold
            assert move["status"] not in SIGNIFICANT and abs(move["rel"]) < 0.05


def test_fallback_chain_replaced_is_the_improvement(
    planted: tuple[list[Path], dict, dict],
) -> None:
    _, truth, data = planted
    move, want = data["moves"][1], truth["moves"][1]["changes"][0]
    assert move["status"] == "improvement" and move["rel"] < -0.08
    top = move["changes"][0]
    assert top["kind"] == "fallback" and top["matched_by"] not in (None, "name")
    assert _keys(want["base_names"]) == set(top["base_names"])
    assert _keys(want["head_names"]) == set(top["head_names"])
    assert top["delta_ns"] == pytest.approx(want["delta_ns"])
    assert abs(top["share"] - want["share"]) <= 0.10 * abs(want["share"])
    assert top["text"].startswith("fallback chain of 3 kernels (at::native::")
    assert "replaced by vllm::act_and_mul_kernel" in top["text"]
    assert f"{round(want['share'] * 100)} % of the move" in top["text"]
    assert move["explained_share"] == pytest.approx(sum(c["share"] for c in move["changes"]))


def test_communication_regression_is_dispatch_and_combine(
    planted: tuple[list[Path], dict, dict],
) -> None:
    _, truth, data = planted
    move, wants = data["moves"][3], truth["moves"][3]["changes"]
    assert move["status"] == "regression" and move["rel"] > 0.08
    top = move["changes"][:2]
    assert {c["kind"] for c in top} == {"collective"}
    assert {c["category"] for c in top} == {"comm"}
    by_names = {frozenset(c["base_names"]): c for c in top}
    for want in wants:
        change = by_names[frozenset(_keys(want["base_names"]))]
        assert set(change["head_names"]) == _keys(want["head_names"])
        assert change["delta_ns"] == pytest.approx(want["delta_ns"])
    share, want_share = sum(c["share"] for c in top), sum(w["share"] for w in wants)
    assert abs(share - want_share) <= 0.10 * want_share
    # nothing else explains more than any planted change
    floor = data["min_impact"] * truth["runs"][3]["step_median_ns"]
    assert all(abs(c["delta_ns"]) >= floor for c in move["changes"])
    assert all(abs(c["delta_ns"]) < 0.3 * abs(top[1]["delta_ns"]) for c in move["changes"][2:])


def test_rename_is_matched_by_role_with_no_move(planted: tuple[list[Path], dict, dict]) -> None:
    _, truth, data = planted
    move, want = data["moves"][2], truth["moves"][2]["matched"][0]
    assert not move["significant"]
    base, head = _keys(want["base_names"]), _keys(want["head_names"])
    entry = next(m for m in move["matched"] if set(m["base_names"]) == base)
    assert set(entry["head_names"]) == head and entry["matched_by"] not in (None, "name")
    floor = data["min_impact"] * truth["runs"][2]["step_median_ns"]
    assert abs(entry["delta_ns"]) < floor
    listed = {n for c in move["changes"] for n in c["base_names"] + c["head_names"]}
    assert not (base | head) & listed
    # the moves without a planted name change match nothing across names
    assert [data["moves"][i]["matched"] for i in (0, 3, 4)] == [[], [], []]


def test_vendor_switch_is_matched_by_role_with_no_move(
    vendor: tuple[list[Path], dict, dict],
) -> None:
    _, truth, data = vendor
    assert [r["vendor"] for r in data["runs"]] == ["nvidia"] * 2 + ["amd"] * 4
    assert [r["step_ns"]["median"] for r in data["runs"]] == [
        r["step_median_ns"] for r in truth["runs"]
    ]
    assert [m["significant"] for m in data["moves"]] == [False] * 5
    assert all(abs(m["rel"]) < 0.05 for m in data["moves"])
    switch, want = data["moves"][1], truth["moves"][1]["matched"]
    assert {w["category"] for w in want} == {"gemm", "attention", "norm", "comm"}
    for role in want:
        base, head = _keys(role["base_names"]), _keys(role["head_names"])
        hits = [m for m in switch["matched"] if base <= set(m["base_names"])]
        assert hits, role["role"]
        # exactly the planted pair: no role swallows its neighbours
        assert set(hits[0]["base_names"]) == base, role["role"]
        assert set(hits[0]["head_names"]) == head, role["role"]
        assert hits[0]["matched_by"] not in (None, "name"), role["role"]
    for change in switch["changes"]:  # no kernel appears or disappears with material time
        assert change["kind"] != "finding", change["text"]
        assert change["base_names"] and change["head_names"], change["text"]
    assert any("several vendors (amd, nvidia)" in w for w in data["warnings"])


def test_processes_and_dask_equal_serial_and_frames(tmp_path: Path) -> None:
    paths = [
        write_nsys_sqlite(
            build_scenario(steps=6, layers=2, seed=s).events, tmp_path / f"r{s}.sqlite"
        )
        for s in range(3)
    ]
    serial = trend(paths, workers=1)
    parallel = trend(paths, workers=2)
    assert parallel.to_dict() == serial.to_dict()
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    ) as cluster:
        cluster.wait_for_workers(2)
        on_dask = trend(paths, scheduler=cluster.scheduler_address)
    assert on_dask.to_dict() == serial.to_dict()
    assert serial.runs_frame.height == 3 and serial.moves_frame.height == 2
    frame = serial.runs_frame
    assert frame["step_median_ns"].to_list() == [r["step_ns"]["median"] for r in serial.runs]
    assert "cat_gemm_ns" in frame.columns and frame["vs_baseline_ns"][0] == 0
    assert serial.changes_frame.height == sum(len(m["changes"]) for m in serial.moves)
    from tracekit.trend.run import Settings, analyse_run

    analysis = analyse_run(str(paths[0]), Settings())
    assert pickle.loads(pickle.dumps(analysis)).step_metrics.equals(analysis.step_metrics)


def test_order_by_name_label_and_given(tmp_path: Path) -> None:
    names = ["run-10.sqlite", "run-2.sqlite", "run-1.sqlite"]
    for name in names:
        (tmp_path / name).write_bytes(b"x")
    specs = [str(tmp_path / n) for n in names]
    by_name = series(specs)
    assert [r.path.name for r in by_name.runs] == ["run-1.sqlite", "run-2.sqlite", "run-10.sqlite"]
    assert [r.label for r in by_name.runs] == ["run-1", "run-2", "run-10"]
    given = series(specs, order="given")
    assert [r.path.name for r in given.runs] == names and given.ordered_by == "given"
    by_label = series(specs, ["run-2", "run-10", "run-1."])
    assert by_label.ordered_by == "label"
    assert [r.path.name for r in by_label.runs] == ["run-2.sqlite", "run-10.sqlite", "run-1.sqlite"]
    # "run-1" is part of two paths: labels are then given in name order
    assigned = series(specs, ["a", "run-1", "c"])
    assert assigned.ordered_by == "name"
    assert [(r.path.name, r.label) for r in assigned.runs] == [
        ("run-1.sqlite", "a"),
        ("run-2.sqlite", "run-1"),
        ("run-10.sqlite", "c"),
    ]
    with pytest.raises(TraceError, match="2 labels for 3 runs"):
        series(specs, ["a", "b"])
    assert natural_key("b-9") < natural_key("b-10")


def test_order_by_capture_date_and_baseline(tmp_path: Path) -> None:
    day = 86_400 * 10**9
    paths = []
    for i, origin in enumerate((DEFAULT_ORIGIN_NS + day, DEFAULT_ORIGIN_NS)):
        sc = build_scenario(steps=6, layers=2, seed=i)
        paths.append(write_nsys_sqlite(sc.events, tmp_path / f"n{i}.sqlite", origin_ns=origin))
    data = trend(paths, order="date", labels=["later?", "first?"], baseline=1, workers=1)
    result = data.to_dict()
    assert result["ordered_by"] == "date" and result["baseline"] == 1
    assert [r["source"] for r in result["runs"]] == [str(paths[1]), str(paths[0])]
    assert [r["date"] for r in result["runs"]] == ["2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z"]
    assert [r["label"] for r in result["runs"]] == ["later?", "first?"]  # assigned in order
    medians = [r["step_ns"]["median"] for r in result["runs"]]
    assert result["runs"][0]["vs_baseline"]["delta_ns"] == medians[0] - medians[1]
    assert result["runs"][1]["vs_baseline"] == {"delta_ns": 0, "rel": 0}
    runs = copy.deepcopy(result["runs"])
    vs_baseline(runs, 0)
    assert runs[1]["vs_baseline"]["rel"] == pytest.approx((medians[1] - medians[0]) / medians[0])


def test_bad_input_is_one_line_exit_2(
    planted: tuple[list[Path], dict, dict], tmp_path: Path
) -> None:
    paths = [str(p) for p in planted[0][:2]]
    broken = tmp_path / "broken.sqlite"
    broken.write_bytes(b"SQLite format 3\x00" + b"\x00" * 50)
    cases = [
        ([str(tmp_path / "missing.sqlite"), paths[0]], "no such file"),
        ([paths[0]], "give two or more"),
        ([*paths, "--label", "a,b,c"], "3 labels for 2 runs"),
        ([*paths, "--baseline", "7"], "--baseline 7"),
        ([*paths, "--order", "size"], "--order 'size'"),
        ([*paths, "--threshold", "150%"], "--threshold"),
        ([paths[0], str(broken)], "broken.sqlite"),
    ]
    for args, words in cases:
        result = run_cli("trend", *args, "--workers", "1")
        assert result.returncode == 2, (args, result.stderr)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and words in lines[0], (args, result.stderr)
        assert "Traceback" not in result.stderr


def test_markdown_and_terminal_escape_hostile_names(tmp_path: Path) -> None:
    evil = 'at::native::evil&amp;kernel|*_"quoted"'
    shape = {"steps": 6, "layers": 2}
    runs = [
        build_scenario(**shape, seed=1, **FALLBACK, kernel_names={"fallback_silu": evil}),
        build_scenario(**shape, seed=2),
    ]
    paths = [write_nsys_sqlite(sc.events, tmp_path / f"{i}.sqlite") for i, sc in enumerate(runs)]
    label = "<img src=x onerror=alert(2)>"
    result = run_cli(
        "trend", *map(str, paths), "--label", f"{label},b", "-f", "md", "--workers", "1"
    )
    assert result.returncode == 0, result.stderr
    md = result.stdout
    assert "fallback chain of" in md and "evil" in md  # the evil name reached the page
    assert "<img" not in md and "&lt;img src=x onerror=alert(2)&gt;" in md
    # the kernel name: entities, table and emphasis characters and quotes escaped
    assert "evil&amp;amp;kernel\\|\\*\\_&quot;quoted&quot;" in md
    assert "|*_" not in md
    data = trend(paths, labels=[label, "b"], workers=1).to_dict()
    assert render_trend_markdown(data) == md
    text = render_trend(data, 5, 200)
    assert text is not None


def test_json_and_markdown_to_a_file(
    planted: tuple[list[Path], dict, dict], tmp_path: Path
) -> None:
    paths = [str(p) for p in planted[0][:2]]
    out = tmp_path / "t.json"
    result = run_cli("trend", *paths, "-f", "json", "-o", str(out), "--workers", "1")
    assert result.returncode == 0 and result.stdout == ""
    data = json.loads(out.read_text())
    assert [r["step_ns"] for r in data["runs"]] == [r["step_ns"] for r in planted[2]["runs"][:2]]
    assert data["moves"][0] == planted[2]["moves"][0]


def test_html_page(planted: tuple[list[Path], dict, dict], tmp_path: Path) -> None:
    pytest.importorskip("tracekit.reports.trend_html")
    out = tmp_path / "trend.html"
    paths = [str(p) for p in planted[0][1:3]]
    result = run_cli("trend", *paths, "-f", "html", "-o", str(out), "--workers", "1")
    assert result.returncode == 0, result.stderr
    page = out.read_text()
    assert page.lstrip().lower().startswith("<!doctype html") and "run-02" in page
    assert os.path.getsize(out) > 0
