"""Rule ``transfers``: planted copy-bound steps in NVIDIA, AMD and Ascend formats give one
finding per exposed copy pattern with the truth's unhidden time, bytes and bandwidth; hidden
copies give none; real traces with heavy copies rank them by their share."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import polars as pl
import pytest

import tracekit
from fixtures.ascend_text_writer import write_torch_npu
from fixtures.kineto_writer import write_kineto_json
from fixtures.msprof_prof_writer import write_prof
from fixtures.nsys_writer import write_nsys_sqlite
from fixtures.rocpd_writer import write_rocpd
from fixtures.transfers import MIB, Built, build
from tests.conftest import real_file
from tests.rules.scenarios import of_rule
from tracekit.errors import TraceError
from tracekit.intervals import covered, merge
from tracekit.rules.copies import attributes, device_links

WRITERS: dict[str, Callable[[Built, Path], Path]] = {
    "nsys": lambda b, tmp: write_nsys_sqlite(b.events, tmp / "t.sqlite"),
    "kineto": lambda b, tmp: write_kineto_json(b.events, tmp / "t.json"),
    "rocpd": lambda b, tmp: write_rocpd(b.events, tmp / "t.db"),
    "torch_npu": lambda b, tmp: write_torch_npu(b.events, tmp),
    "prof": lambda b, tmp: write_prof(b.events, tmp),
}
CASE = {"nsys": "copy_bound", "kineto": "copy_bound", "rocpd": "copy_bound"}
CASE |= {"torch_npu": "ascend_dma", "prof": "ascend_dma"}
API = {  # the launching call as each format names the fixture's cudaMemcpy / cudaMemcpyAsync
    "nsys": {"cudaMemcpy": "cudaMemcpy", "cudaMemcpyAsync": "cudaMemcpyAsync"},
    "kineto": {"cudaMemcpy": "aten::copy_ → cudaMemcpy",
               "cudaMemcpyAsync": "aten::copy_ → cudaMemcpyAsync"},
    "rocpd": {"cudaMemcpy": "hipMemcpy", "cudaMemcpyAsync": "hipMemcpyAsync"},
    "torch_npu": {"cudaMemcpy": "AscendCL@aclrtMemcpy"},
    "prof": {"cudaMemcpy": "AscendCL@aclrtMemcpy"},
}  # fmt: skip
H200_PCIE5 = 64.0  # the nsys / Kineto fixtures' H200 and the rocpd fixture's MI300X: PCIe 5.0


@pytest.fixture(scope="module")
def analysed(tmp_path_factory: pytest.TempPathFactory) -> Callable:
    """``analysed(fmt, case=None, options=None)``: the fixture's truth and its analysis."""
    made: dict[tuple, tuple[Built, tracekit.Analysis]] = {}

    def get(fmt: str, case: str | None = None, options: dict | None = None) -> tuple:
        key = (fmt, case or CASE[fmt], repr(options))
        if key not in made:
            built = build(key[1], kineto=fmt == "kineto", ascend=fmt in ("torch_npu", "prof"))
            path = WRITERS[fmt](built, tmp_path_factory.mktemp(f"{fmt}-{key[1]}"))
            made[key] = built, tracekit.analyze(tracekit.load(path), options=options)
        return made[key]

    return get


def _expected(fmt: str, built: Built) -> dict[str, dict]:
    """The findings the truth calls for: pattern -> its truth (exposed patterns only; the
    Ascend exports say no direction)."""
    ascend = fmt in ("torch_npu", "prof")
    return {
        f"{'unknown' if ascend else direction}: {API[fmt][api]}": truth
        for (direction, api), truth in built.truth["patterns"].items()
        if truth["exposed"]
    }


@pytest.mark.parametrize("fmt", ["nsys", "kineto", "rocpd"])
def test_one_finding_per_planted_copy_pattern(analysed: Callable, fmt: str) -> None:
    built, analysis = analysed(fmt)
    found = {f.pattern: f for f in of_rule(analysis, "transfers")}
    expected = _expected(fmt, built)
    assert sorted(found) == sorted(expected)  # h2d, d2h, d2d; the hidden h2d copy: none
    assert len(expected) == 3
    for pattern, truth in expected.items():
        f = found[pattern]
        assert f.impact_ns == truth["unhidden_ns"] == truth["copy_ns"]  # nothing beside them
        assert f.steps == truth["steps"] == [0, 1, 2, 3]
        per_step = truth["bytes"] // truth["copies"]
        assert f.metrics["bytes"] == per_step
        assert f.metrics["copies"] == 1
        assert f.metrics["gbps"] == pytest.approx(truth["bytes"] / truth["copy_ns"], rel=1e-12)
        direction = pattern.split(":")[0]
        if direction == "d2d":
            assert f.metrics["peak_gbps"] is None and f.metrics["link_share"] is None
            assert "no link peak" in f.detail
        else:
            assert f.metrics["peak_gbps"] == H200_PCIE5
            assert f.metrics["link_share"] == pytest.approx(f.metrics["gbps"] / H200_PCIE5)
            assert "PCIe 5.0 x16" in f.detail
        assert f.metrics["busy_share"] == pytest.approx(
            f.metrics["copy_ns"] / _metric(analysis, f, "busy_ns")
        )
        assert f.metrics["step_share"] == pytest.approx(
            f.metrics["copy_ns"] / _metric(analysis, f, "dur")
        )
    # the exact numbers of the planted schedule (seed 71)
    assert found[f"h2d: {API[fmt]['cudaMemcpy']}"].impact_ns == 2_795_197
    assert found[f"d2h: {API[fmt]['cudaMemcpy']}"].impact_ns == 687_835
    assert found[f"d2d: {API[fmt]['cudaMemcpyAsync']}"].impact_ns == 269_692
    h2d = found[f"h2d: {API[fmt]['cudaMemcpy']}"]
    assert h2d.metrics["gbps"] == pytest.approx(33_554_432 / 2_795_197, rel=1e-12)  # 12.00 GB/s
    assert h2d.severity == "error"
    assert any(word in h2d.advice.lower() for word in ("pin the", "page-locked"))


def _metric(analysis: tracekit.Analysis, f: tracekit.Finding, column: str) -> int:
    m = analysis.step_metrics.filter(
        (pl.col("rank") == f.rank) & (pl.col("device") == f.device) & (pl.col("step") == f.step)
    )
    return int(m[column].item())


@pytest.mark.parametrize("fmt", ["torch_npu", "prof"])
def test_ascend_dma_pattern_without_bytes(analysed: Callable, fmt: str) -> None:
    built, analysis = analysed(fmt)
    found = of_rule(analysis, "transfers")
    expected = _expected(fmt, built)
    assert [f.pattern for f in found] == list(expected) == ["unknown: AscendCL@aclrtMemcpy"]
    (f,) = found
    truth = expected[f.pattern]
    assert f.impact_ns == truth["unhidden_ns"] == 2_780_541
    assert f.metrics["bytes"] is None and f.metrics["gbps"] is None
    assert "bandwidth unknown" in f.detail
    assert f.impact_share == pytest.approx(f.impact_ns / analysis.step_metrics["dur"].sum())


@pytest.mark.parametrize("fmt", ["nsys", "torch_npu"])
def test_hidden_copies_raise_nothing(analysed: Callable, fmt: str) -> None:
    built, analysis = analysed(fmt, "hidden")
    ((_, truth),) = built.truth["patterns"].items()
    assert truth["copies"] == 4 and truth["unhidden_ns"] == 0 and not truth["exposed"]
    assert of_rule(analysis, "transfers") == []


def test_link_option(analysed: Callable) -> None:
    _, analysis = analysed("nsys", options={"transfers": {"link": "pcie4"}})
    (f,) = [f for f in analysis.findings if f.pattern == "h2d: cudaMemcpy"]
    assert f.metrics["peak_gbps"] == 32.0
    assert f.metrics["link_share"] == pytest.approx(33_554_432 / 2_795_197 / 32.0)
    with pytest.raises(TraceError, match="no known link; known: pcie3"):
        analysed("nsys", options={"transfers": {"link": "pcie9"}})


def test_small_copies_kind(analysed: Callable) -> None:
    """With ``small_count`` 1 and ``small_bytes`` 4 MiB the 2 MiB read-back per step is a
    pattern of small copies (its advice: batch them); the 8 MiB upload is not."""
    options = {"transfers": {"small_count": 1, "small_bytes": 4 * MIB}}
    _, analysis = analysed("nsys", options=options)
    advice = {f.pattern: f.advice for f in of_rule(analysis, "transfers")}
    assert "tiny copies" in advice["d2h: cudaMemcpy"]
    assert "tiny copies" not in advice["h2d: cudaMemcpy"]


def test_covered_by_compute_per_device() -> None:
    """Partly hidden copies: the compute of the same device only, each interval's own part."""
    copies = pl.DataFrame(
        {
            "rank": [0, 0, 0, 0],
            "device": [0, 0, 0, 1],
            "start": [0, 150, 400, 0],
            "end": [100, 300, 500, 100],
        }
    )
    compute = merge(
        pl.DataFrame({"rank": [0, 0], "device": [0, 0], "ts": [50, 260], "dur": [150, 20]}),
        ["rank", "device"],
    )
    assert covered(copies, compute, ["rank", "device"]).to_list() == [50, 70, 0, 0]


def test_direction_and_bytes_from_each_format() -> None:
    rows = [  # name, args, call site -> direction, bytes
        ("Memcpy HtoD (Pageable -> Device)", '{"bytes":92928}', None, "h2d", 92928),
        ("Memcpy PtoP (Device -> Device)", '{"bytes":8,"copy_kind":"PtoP"}', None, "peer", 8),
        ("Memcpy DtoD (Device -> Device)", None, None, "d2d", None),
        ("CopyDeviceToHost", '{"copy_kind":"Default","bytes":4}', None, "d2h", 4),
        ("MEMORY_COPY_DEVICE_TO_DEVICE", '{"src_agent":"Agent 4","dst_agent":"Agent 5"}', None,
         "peer", None),
        ("MEMORY_COPY_DEVICE_TO_DEVICE", '{"src":"GPU 0","dst":"GPU 0"}', None, "d2d", None),
        ("MEMORY_COPY_HOST_TO_DEVICE", '{"bytes":64}', None, "h2d", 64),
        ("MEMCPY_ASYNC", '{"task_type":"PCIE_DMA_SQE"}',
         "acl_memcpy_host_to_device → AscendCL@aclrtMemcpyAsync", "h2d", None),
        ("MEMCPY_ASYNC", '{"task_type":"MEMCPY_ASYNC"}', "AscendCL@aclrtMemcpyAsync", "unknown",
         None),
    ]  # fmt: skip
    frame = pl.DataFrame(
        [r[:3] for r in rows], schema=["name", "args", "site"], orient="row"
    ).with_columns(pl.col("name").cast(pl.Categorical))
    out = attributes(frame)
    assert out["direction"].to_list() == [r[3] for r in rows]
    assert out["bytes"].to_list() == [r[4] for r in rows]
    assert out["pageable"].to_list() == [True] + [False] * (len(rows) - 1)


def test_links_by_device_name() -> None:
    names = ["NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB", "AMD Instinct MI300X VF",
             "Ascend910B", "Ascend910", "NVIDIA GeForce RTX 4060 Ti", None]  # fmt: skip
    meta = {"devices": [{"index": i, "name": n} for i, n in enumerate(names)]}
    links = device_links(meta)
    assert links["host_gbps"].to_list() == [64.0, 32.0, 64.0, 64.0, 32.0, None, None]
    assert links["peer_gbps"].to_list() == [450.0, 300.0, 64.0, 56.0, None, None, None]
    given = device_links(meta, "pcie6", "nvlink5")
    assert given["host_gbps"].to_list() == [128.0] * 7
    assert given["peer_gbps"].to_list() == [900.0] * 7


# -- real traces -------------------------------------------------------------------------------
def _rank(analysis: tracekit.Analysis, finding: tracekit.Finding) -> int:
    """The finding's 1-based place among all rules' findings, checked to be where its impact
    share puts it: after every finding that costs more, before every one that costs less."""
    place = analysis.findings.index(finding) + 1
    larger = sum(f.impact_ns > finding.impact_ns for f in analysis.findings)
    equal = sum(f.impact_ns == finding.impact_ns for f in analysis.findings)
    assert larger < place <= larger + equal
    total = analysis.step_metrics["dur"].sum()
    assert finding.impact_share == finding.impact_ns / total
    return place


def test_real_alexnet_copies_rank_by_their_share() -> None:
    """HTA's AlexNet benchmark on an A100: 16 pageable host -> device copies are 84 % of the
    device's busy time (55.5 ms) in a 12.9 s window the host mostly idles."""
    path = real_file("nvidia", "hta-alexnet-a100/benchmark_result_2869224_1695835535_trace.json.gz")
    analysis = tracekit.analyze(tracekit.load(path))
    (f,) = of_rule(analysis, "transfers")
    assert f.pattern == "h2d: aten::copy_ → cudaMemcpyAsync"
    assert f.impact_ns == 55_503_000 and f.metrics["copies"] == 16
    assert f.metrics["bytes"] == 244_403_360
    assert f.metrics["gbps"] == pytest.approx(244_403_360 / 55_503_000)  # 4.40 GB/s
    assert f.metrics["peak_gbps"] == 32.0  # A100 (PG509): PCIe 4.0 x16
    assert f.metrics["busy_share"] == pytest.approx(0.8392, abs=1e-4)
    assert f.impact_share == pytest.approx(0.004296, abs=1e-6)
    assert "16 from pageable host memory" in f.detail
    # idle host gaps cost more: 10.0, 1.06, 0.83 s in allocation calls and 0.82 s in setup:
    # the copies come fifth, every finding above them costs more and every one below less
    rank = _rank(analysis, f)
    assert rank == 5
    assert all(g.impact_ns > f.impact_ns for g in analysis.findings[: rank - 1])
    assert all(g.impact_ns < f.impact_ns for g in analysis.findings[rank:])


def test_real_rocprof_copies_lead_the_findings() -> None:
    """rocprof v1 HIP trace of a vector add on an MI300A: a 886 ms device -> host and two
    host -> device copies hold 99.7 % of the device time; the trace has no byte counts."""
    path = real_file("amd", "rocprof_v1_hiptrace_hip_vecadd_small/results.db")
    analysis = tracekit.analyze(tracekit.load(path))
    found = {f.pattern: f for f in of_rule(analysis, "transfers")}
    assert sorted(found) == ["d2h: hipMemcpy", "h2d: hipMemcpy"]
    d2h, h2d = found["d2h: hipMemcpy"], found["h2d: hipMemcpy"]
    assert (d2h.impact_ns, h2d.impact_ns) == (885_689_740, 180_717_650)
    assert d2h.metrics["gbps"] is None and "bandwidth unknown" in d2h.detail
    assert _rank(analysis, d2h) == 1 and _rank(analysis, h2d) == 2
    assert d2h.impact_share == pytest.approx(0.8047, abs=1e-4)
