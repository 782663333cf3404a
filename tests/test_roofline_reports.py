"""The roofline in the reports: the step table's roofline columns, the terminal and Markdown
"Roofline" section (devices, warnings, top operators by headroom) and the HTML chart's
payload; checked against hand-computed numbers on the shaped-operator fixture (one kernel of
15 µs per operator on an H200) and the TraceLens H100 trace, and absent without shapes."""

from __future__ import annotations

import io
import os
import re
from dataclasses import replace
from pathlib import Path

import polars as pl
import pytest
from rich.console import Console

import tracekit
from fixtures.ascend_text_writer import write_torch_npu
from fixtures.kineto_writer import write_kineto_json
from fixtures.shaped_ops import TORCH_NS, TORCH_OPS, TORCH_TRUTH, ascend_events, torch_events
from tracekit.demo import demo_paths
from tracekit.metrics.roofline.export import MAX_OPERATORS
from tracekit.reports.format import cut, fmt_ns, fmt_pct
from tracekit.reports.html import payload
from tracekit.reports.markdown import md_text, render_markdown
from tracekit.reports.roofline_text import OP_CHARS, SHAPES_CHARS
from tracekit.reports.steps_terminal import render_analysis

REAL = os.environ.get("TRACEKIT_REAL_TRACES")
H100 = "nvidia/tracelens-h100-hf-qwen1.5-0.5b/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"
KERNEL_NS = 15_000  # a fixture operator's one kernel, where TORCH_NS gives no other time
H200_HBM_GBPS, H200_BF16, H200_FP8, H200_VECTOR = 4800.0, 989.5, 1979.0, 67.0  # datasheet
PEAK = {"scaled_mm": H200_FP8, "rms_norm": H200_VECTOR, "silu_and_mul": H200_VECTOR}
OP_KEY = {op.name: key for key, (op, _) in TORCH_OPS.items()}


def terminal_text(data: dict, width: int = 200) -> str:
    console = Console(file=io.StringIO(), width=width, no_color=True)
    console.print(render_analysis(data, width), crop=False)
    return console.file.getvalue()  # type: ignore[attr-defined]


def table_row(text: str, first_cell: str) -> str:
    """The Markdown table row whose first cell is ``first_cell``."""
    rows = [line for line in text.splitlines() if line.startswith(f"| {first_cell} |")]
    assert len(rows) == 1, (first_cell, rows)
    return rows[0]


def hand_efficiency(key: str) -> float:
    """A fixture operator's roofline bound over its time, from the hand-computed work."""
    truth = TORCH_TRUTH[key]
    compute_ns = truth["flops"] / (PEAK.get(key, H200_BF16) * 1e3)
    memory_ns = truth["bytes"] / H200_HBM_GBPS
    return max(compute_ns, memory_ns) / kernel_ns(key)


def kernel_ns(key: str) -> int:
    """The time of a fixture operator's one kernel."""
    return TORCH_NS.get(key, KERNEL_NS)


@pytest.fixture(scope="module")
def shaped(tmp_path_factory: pytest.TempPathFactory) -> tracekit.Analysis:
    path = write_kineto_json(torch_events(), tmp_path_factory.mktemp("shaped") / "t.json")
    return tracekit.analyze(tracekit.load(path))


@pytest.fixture(scope="module")
def unnamed_npu(tmp_path_factory: pytest.TempPathFactory) -> tracekit.Analysis:
    """The torch_npu fixture: shapes, but no device name (no roofline bound)."""
    return tracekit.analyze(
        tracekit.load(write_torch_npu(ascend_events(), tmp_path_factory.mktemp("npu")))
    )


@pytest.fixture(scope="module")
def shapeless() -> tracekit.Analysis:
    return tracekit.analyze(tracekit.load(demo_paths()[0]))


def test_fixture_markdown_shows_the_hand_computed_efficiencies(shaped: tracekit.Analysis) -> None:
    ops = shaped.roofline.operators
    assert ops.height == len(TORCH_OPS) == 9
    text = render_markdown(shaped.to_dict())
    section = text.split("### Roofline", 1)[1].split("### Checks", 1)[0]
    assert "- devices 0–7: NVIDIA H200 SXM 141GB: bf16 989.5 TFLOP/s, HBM 4,800 GB/s" in section
    shown = ops.head(8).to_dicts()
    for op in shown:
        key = OP_KEY[op["op"]]
        row = table_row(section, md_text(cut(op["op"], OP_CHARS)))
        want = fmt_pct(hand_efficiency(key))
        exact = TORCH_TRUTH[key]["exact"]
        assert f"| {want if exact else '≤ ' + want} |" in row, (key, row)
        assert f"| {fmt_ns(kernel_ns(key))} |" in row and row.endswith(f"| {op['limit']} |")
    left_out = ops.row(8, named=True)["op"]
    assert f"| {md_text(left_out)} |" not in section
    assert "1 more operator (--format json lists every one)" in section
    # the step table: roofline (the summed bounds), shaped share and bound
    step = shaped.step_metrics.row(0, named=True)
    bounds = sum(
        max(
            TORCH_TRUTH[k]["flops"] / (PEAK.get(k, H200_BF16) * 1e3), TORCH_TRUTH[k]["bytes"] / 4800
        )
        for k in TORCH_TRUTH
    )
    assert step["roofline_ns"] == pytest.approx(bounds, abs=1)
    head = table_row(text, "rank")
    assert head.endswith("| roofline | shaped | bound |")
    row = next(line for line in text.splitlines() if line.startswith("| 0 | 0 | 0 |"))
    assert row.endswith(f"| {fmt_ns(step['roofline_ns'])} | 100.0% | {step['bound']} |")


def test_fixture_terminal_lists_the_top_operators(shaped: tracekit.Analysis) -> None:
    text = terminal_text(shaped.to_dict())
    lines = text.splitlines()
    start = lines.index("roofline")
    assert (
        "devices 0–7: NVIDIA H200 SXM 141GB: bf16 989.5 TFLOP/s, HBM 4,800 GB/s" in lines[start + 1]
    )
    for op in shaped.roofline.operators.head(8).to_dicts():
        key = OP_KEY[op["op"]]
        want = fmt_pct(hand_efficiency(key))
        name = cut(op["op"], OP_CHARS)
        row = next(line for line in lines[start:] if line.startswith(f" {name} "))
        assert (want if TORCH_TRUTH[key]["exact"] else f"≤ {want}") in row, row
    header = next(line for line in lines[:start] if line.split()[:1] == ["step"])
    assert re.search(r" roofline +shaped +bound ", header), header
    # a narrow terminal keeps the numbers and cuts the names
    narrow = terminal_text(shaped.to_dict(), width=90)
    assert "GB/s" not in narrow.split("top operators by headroom", 1)[1].splitlines()[1]
    assert all(len(line) <= 90 for line in narrow.splitlines() if "…" in line)


def test_fixture_chart_payload_has_the_hand_computed_points(shaped: tracekit.Analysis) -> None:
    data = payload([shaped])
    roof = data["traces"][0]["roofline"]
    points = roof["points"]
    assert sorted(points["op"]) == sorted(op.name for op, _ in TORCH_OPS.values())
    for i, name in enumerate(points["op"]):
        truth = TORCH_TRUTH[OP_KEY[name]]
        assert points["intensity"][i] == pytest.approx(truth["flops"] / truth["bytes"])
        ns = kernel_ns(OP_KEY[name])
        assert points["tflops"][i] == pytest.approx(truth["flops"] / ns / 1e3)
        assert points["time_ns"][i] == ns and points["kernels"][i]
    [part] = roof["parts"]
    assert part["hbm_gbps"] == H200_HBM_GBPS and part["devices"] == [0]
    roofs = {r["tflops"]: (r["dtypes"], r["units"]) for r in part["roofs"]}
    assert roofs == {
        H200_FP8: (["fp8"], ["matrix"]),
        H200_BF16: (["bf16"], ["matrix"]),
        H200_VECTOR: (["bf16"], ["vector"]),
    }
    assert roof["warnings"] == [] and roof["not_drawn"] == 0 and roof["left_out"] == 0
    assert data["labels"]["roofline_ns"] == "roofline"
    steps = data["traces"][0]["steps"]
    assert steps["roofline_ns"] == shaped.step_metrics["roofline_ns"].to_list()
    assert (
        steps["shaped_share"] == [1.0] and steps["bound"] == shaped.step_metrics["bound"].to_list()
    )


def test_unknown_device_says_so_and_leaves_out_the_step_columns(
    unnamed_npu: tracekit.Analysis,
) -> None:
    data = unnamed_npu.to_dict()
    [warning] = data["roofline"]["warnings"]
    assert "matches no entry of devices.toml" in warning
    text = render_markdown(data)
    section = text.split("### Roofline", 1)[1].split("### Checks", 1)[0]
    assert f"- ⚠ {md_text(warning)}" in section
    assert "| roofline |" not in text  # no step has a bound: no roofline columns
    rows = [line for line in section.splitlines() if line.startswith("| ")][1:]
    assert len(rows) == 8
    for op, row in zip(unnamed_npu.roofline.operators.head(8).to_dicts(), rows):
        shapes = md_text(cut(op["shapes"], SHAPES_CHARS))
        assert row.startswith(f"| {md_text(op['op'])} | {shapes} |"), row
        assert row.endswith("| - | - | - |"), row  # efficiency, headroom, limit
    page = payload([unnamed_npu])
    assert "roofline_ns" not in page["traces"][0]["steps"]
    assert "roofline_ns" not in page["labels"]
    roof = page["traces"][0]["roofline"]
    assert roof["parts"] == [] and roof["warnings"] == [warning]
    assert len(roof["points"]["op"]) == 9  # drawn without roofs
    assert warning in terminal_text(data)


def test_trace_names_are_escaped(shaped: tracekit.Analysis) -> None:
    hostile = "<b>x</b>|[bold]y[/bold]_*"
    ops = shaped.roofline.operators.with_columns(op=pl.lit(hostile))
    data = replace(shaped, roofline=replace(shaped.roofline, operators=ops)).to_dict()
    text = render_markdown(data)
    section = text.split("### Roofline", 1)[1].split("### Checks", 1)[0]
    assert "<b>" not in section
    assert "| &lt;b&gt;x&lt;/b&gt;\\|\\[bold\\]y\\[/bold\\]\\_\\* |" in section
    assert " <b>x</b>|[bold]y[/bold]_* " in terminal_text(data)  # rich markup printed as text


def test_operators_are_capped_with_the_count_left_out(shaped: tracekit.Analysis) -> None:
    ops = shaped.roofline.operators
    many = pl.concat(
        [ops.with_columns(shapes=pl.col("shapes") + f" #{i}") for i in range(30)]
    )  # 270 operators
    record = replace(shaped.roofline, operators=many).to_dict()
    assert len(record["operators"]) == MAX_OPERATORS == 200
    assert record["operators_total"] == 270 and record["operators_left_out"] == 70
    gemm = next(f for f in record["families"] if f["family"] == "gemm")
    gemm_ops = many.filter(pl.col("family") == "gemm")
    assert gemm["rows"] == gemm_ops.height and gemm["time_ns"] == gemm_ops["time_ns"].sum()
    assert gemm["efficiency"] == pytest.approx(gemm_ops["bound_ns"].sum() / gemm["time_ns"])
    text = render_markdown({**shaped.to_dict(), "roofline": record})
    assert "262 more operators (--format json lists every one)" in text


def test_no_shapes_no_roofline(shapeless: tracekit.Analysis) -> None:
    data = shapeless.to_dict()
    assert data["roofline"] == {"devices": {}, "warnings": [], "operators": []}
    text = render_markdown(data)
    assert "Roofline" not in text and "| roofline |" not in text
    terminal = terminal_text(data)
    assert "roofline" not in terminal and "shaped" not in terminal
    page = payload([shapeless])
    assert "roofline" not in page["traces"][0]
    assert not {"roofline_ns", "shaped_share", "bound"} & set(page["traces"][0]["steps"])
    assert not {"roofline_ns", "shaped_share", "bound"} & set(page["labels"])


@pytest.mark.skipif(not REAL, reason="TRACEKIT_REAL_TRACES")
def test_h100_trace_shows_its_top_operator() -> None:
    analysis = tracekit.analyze(tracekit.load(Path(str(REAL)) / H100))
    ops = analysis.roofline.operators
    # the GEMMs' bounds from the H100 SXM datasheet: 989.5 bf16 TFLOP/s, 3,350 GB/s HBM3
    mm = ops.filter(pl.col("op") == "aten::mm")
    assert mm.height > 0
    for row in mm.to_dicts():
        bound = max(row["flops"] / 989.5e3, row["bytes"] / 3350)
        assert row["efficiency"] == pytest.approx(bound / row["time_ns"])
    top = ops.row(0, named=True)
    data = analysis.to_dict()
    text = render_markdown(data)
    section = text.split("### Roofline", 1)[1].split("### Checks", 1)[0]
    assert "- device 0: NVIDIA H100 SXM5 80GB: bf16 989.5 TFLOP/s, HBM 3,350 GB/s" in section
    row = table_row(section, md_text(top["op"]))
    assert f"| {fmt_pct(top['efficiency'])} | {fmt_ns(top['headroom_ns'])} |" in row
    assert f"{ops.height - 8} more operators" in section
    terminal = terminal_text(data)
    line = next(x for x in terminal.splitlines() if x.startswith(f" {top['op']} "))
    assert fmt_pct(top["efficiency"]) in line and fmt_ns(top["headroom_ns"]) in line
    step = analysis.step_metrics.row(0, named=True)
    step_row = next(x for x in text.splitlines() if x.startswith("| 0 | 0 | 0 |"))
    cells = f"| {fmt_ns(step['roofline_ns'])} | {fmt_pct(step['shaped_share'])} | {step['bound']} |"
    assert step_row.endswith(cells)
