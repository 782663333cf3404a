"""rocprof v1 ``results.csv`` in every shape rocprof (or a re-save) gives it, and the
profilers' own ``*stats.csv`` files kept as vendor summaries and checked against our rows."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import polars as pl
import pytest

from fixtures.rocprof_csv_writer import write_rocprofv3_csv
from fixtures.rocprof_v1_csv_writer import (
    kernel_table,
    stats_rows,
    write_results_csv,
    write_stats_csv,
)
from fixtures.scenario import build_scenario
from tests.conftest import real_files, sha256
from tracekit import analyze, load
from tracekit.parsers import registry
from tracekit.parsers.probe import Probe
from tracekit.timeline import Timeline

ROW_COLUMNS = ["ts", "dur", "kind", "name", "device", "stream", "pid", "corr", "engine"]
HEADERS = {  # the header as each writer prints it (from ROCm/rocprofiler's tblextr/sqlitedb)
    "plain": "Index,KernelName,gpu-id,queue-id,queue-index,pid,tid,grd,wgr,lds,scr,arch_vgpr,"
    "accum_vgpr,sgpr,wave_size,sig,obj,SQ_WAVES,GRBM_GUI_ACTIVE,DispatchNs,BeginNs,EndNs,"
    "CompleteNs",
    "stats": '"Index","KernelName","gpu-id","queue-id","queue-index","pid","tid","grd","wgr",'
    '"lds","scr","arch_vgpr","accum_vgpr","sgpr","wave_size","sig","obj","SQ_WAVES",'
    '"GRBM_GUI_ACTIVE","DispatchNs","BeginNs","EndNs","CompleteNs","DurationNs"',
    "stats_old": '"Index","KernelName","gpu-id","queue-id","queue-index","pid","tid","grd",'
    '"wgr","lds","scr","vgpr","sgpr","fbar","sig","obj","SQ_WAVES","GRBM_GUI_ACTIVE",'
    '"DispatchNs","BeginNs","EndNs","CompleteNs","DurationNs"',
}
VARIANTS = {
    "plain": {"style": "plain"},
    "quoted": {"style": "stats"},
    "quoted_pre_5_3": {"style": "stats_old"},
    "bom": {"style": "stats", "bom": True},
    "crlf": {"style": "plain", "crlf": True},
    "bom_crlf_quoted": {"style": "stats", "bom": True, "crlf": True},
    "reversed": {"style": "stats", "order": list(range(23, -1, -1))},
    "shuffled_plain": {
        "style": "plain",
        "order": [5, 1, 20, 0, 3, 2, 4, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 21, 22],
    },
    "no_counters": {"style": "stats", "counters": False},
}


@pytest.fixture(scope="module")
def events() -> pl.DataFrame:
    return build_scenario(steps=3, layers=2, fallback_kernel=True).events


def _rows(tl: Timeline) -> pl.DataFrame:
    rows = tl.df.with_columns(pl.col("kind", "name", "engine").cast(pl.String))
    return rows.with_columns(ts=pl.col("ts") + tl.meta["clock"]["zero_ns"])


def _per_name(rows: pl.DataFrame) -> dict[str, tuple[int, int]]:
    raw = pl.coalesce(pl.col("args").str.json_path_match("$.mangled_name"), pl.col("name"))
    agg = rows.group_by(raw.alias("key")).agg(pl.len(), pl.col("dur").sum())
    return {k: (n, t) for k, n, t in agg.rows()}


def _stats_file(path: Path) -> dict[str, tuple[int, int]]:
    with path.open(newline="", encoding="utf-8-sig") as fh:
        return {r["Name"]: (int(r["Calls"]), int(r["TotalDurationNs"])) for r in csv.DictReader(fh)}


@pytest.mark.parametrize("style", sorted(HEADERS))
def test_headers_as_rocprof_writes_them(events: pl.DataFrame, style: str, tmp_path: Path) -> None:
    path = write_results_csv(events, tmp_path / "results.csv", style=style)
    lines = path.read_bytes().split(b"\n")
    assert lines[0].decode() == HEADERS[style]
    first = next(csv.reader([lines[1].decode()]))
    assert first[1] == "__amd_rocclr_fillBufferAligned" and first[0] == "0"
    quoted_sig = b'"0x0"' in lines[1]
    assert quoted_sig == (style == "stats")  # text values quoted by SQLite's dump since 5.3


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_every_variant_loads_the_same_rows(
    events: pl.DataFrame, variant: str, tmp_path: Path
) -> None:
    base = load(write_results_csv(events, tmp_path / "base.csv", style="stats"))
    path = write_results_csv(events, tmp_path / "results.csv", **VARIANTS[variant])
    before = sha256(path)
    assert [p.name for p in registry() if p.sniff(Probe(path))] == ["rocprof-v1-csv"]
    tl = load(path)
    assert tl.validate() == [] and tl.meta["warnings"] == []
    assert tl.meta["format"] == "rocprof-v1-csv"
    got, want = _rows(tl), _rows(base)
    assert got.select(ROW_COLUMNS).equals(want.select(ROW_COLUMNS))
    if variant != "quoted_pre_5_3":  # its register columns differ (vgpr, no accum/wave size)
        assert got["args"].equals(want["args"])
    truth = kernel_table(events)
    assert got.height == truth.height
    assert got["dur"].sum() == (truth["end"] - truth["begin"]).sum()
    assert sha256(path) == before


def test_without_duration_column_times_come_from_begin_end(
    events: pl.DataFrame, tmp_path: Path
) -> None:
    """``DurationNs`` is optional (plain runs have none); a wrong one is not trusted."""
    path = write_results_csv(events, tmp_path / "results.csv", style="stats")
    frame = pl.read_csv(path, infer_schema=False)
    frame.with_columns(DurationNs=pl.lit("1")).write_csv(tmp_path / "edited.csv")
    a, b = _rows(load(path)), _rows(load(tmp_path / "edited.csv"))
    assert a["dur"].equals(b["dur"])


def test_stats_summary_equals_our_totals(events: pl.DataFrame, tmp_path: Path) -> None:
    path = write_results_csv(events, tmp_path / "results.csv", style="stats")
    stats = write_stats_csv(events, tmp_path / "results.stats.csv")
    lines = stats.read_text().splitlines()
    assert lines[0] == '"Name","Calls","TotalDurationNs","AverageNs","Percentage"'
    tl = load(path)
    (summary,) = tl.meta["summaries"]
    assert {k: summary[k] for k in ("kind", "source", "key", "name_column", "rank")} == {
        "kind": "kernels",
        "source": "results.stats.csv",
        "key": "name",
        "name_column": "raw",
        "rank": None,
    }
    want = {r["Name"]: (r["Calls"], r["TotalDurationNs"]) for r in stats_rows(events).to_dicts()}
    assert {r["key"]: (r["calls"], r["total_ns"]) for r in summary["rows"]} == want
    assert _per_name(_rows(tl)) == want == _stats_file(stats)
    checks = {c.name: c for c in analyze(tl).checks}
    assert checks["vendor.kernels:results.stats.csv"].status == "pass"


def test_barrier_packets_left_out_of_the_kernel_summary(tmp_path: Path) -> None:
    path = tmp_path / "results.stats.csv"
    path.write_text(
        '"Name","Calls","TotalDurationNs","AverageNs","Percentage"\n'
        '"k(int)",2,300,150,75.0\n"<barrier packet>",4,100,25,25.0\n'
    )
    from tracekit.parsers.rocprof.stats import read_stats

    summary = read_stats(path, "kernels")
    assert summary is not None and summary["excluded"] == ["<barrier packet>"]
    assert summary["rows"] == [{"key": "k(int)", "calls": 2, "total_ns": 300}]


def test_rocprofv3_stats_files_become_summaries(events: pl.DataFrame, tmp_path: Path) -> None:
    files = write_rocprofv3_csv(events, tmp_path, "4242")
    tl = load(files["kernel_trace"])
    kinds = {s["source"]: s["kind"] for s in tl.meta["summaries"]}
    assert kinds == {
        "4242_kernel_stats.csv": "kernels",
        "4242_hip_api_stats.csv": "api",
        "4242_memory_copy_stats.csv": "copies",
    }
    rows = _rows(tl)
    by_kind = {"kernels": ["kernel"], "api": ["api"], "copies": ["memcpy"]}
    for summary in tl.meta["summaries"]:
        ours = _per_name(rows.filter(pl.col("kind").is_in(by_kind[summary["kind"]])))
        theirs = {r["key"]: (r["calls"], r["total_ns"]) for r in summary["rows"]}
        assert theirs == ours == _stats_file(tmp_path / summary["source"])
    assert load(tmp_path).meta["summaries"] == tl.meta["summaries"]  # the folder too
    checks = {c.name: c.status for c in analyze(tl).checks}
    assert checks["vendor.kernels:4242_kernel_stats.csv"] == "pass"


# -- real samples (rocprof --hip-trace output with its stats files) --------------------------

FOLDERS = real_files("amd", "rocprof_v1_*")


@pytest.mark.parametrize("reader", ["results.db", "results.json", ""])
@pytest.mark.parametrize("folder", FOLDERS)
def test_real_stats_files_are_summaries_and_agree(folder: Path, reader: str) -> None:
    tl = load(folder / reader if reader else folder)
    summaries = {s["source"]: s for s in tl.meta["summaries"]}
    assert set(summaries) == {
        "results.stats.csv",
        "results.hip_stats.csv",
        "results.copy_stats.csv",
    }
    rows = _rows(tl)
    for source, kinds in (
        ("results.stats.csv", ["kernel"]),
        ("results.hip_stats.csv", ["api"]),
        ("results.copy_stats.csv", ["memcpy", "memset"]),
    ):
        theirs = {r["key"]: (r["calls"], r["total_ns"]) for r in summaries[source]["rows"]}
        assert theirs == _per_name(rows.filter(pl.col("kind").is_in(kinds)))
        assert theirs == _stats_file(folder / source)
    checks = {c.name: c for c in analyze(tl).checks}
    assert checks["vendor.kernels:results.stats.csv"].status == "pass"


@pytest.mark.parametrize("folder", FOLDERS)
def test_results_csv_next_to_real_stats(folder: Path, tmp_path: Path, events: pl.DataFrame) -> None:
    """A results.csv gets the stats files beside it, whatever the other files are."""
    write_results_csv(events, tmp_path / "results.csv", style="stats")
    shutil.copyfile(folder / "results.hip_stats.csv", tmp_path / "results.hip_stats.csv")
    tl = load(tmp_path / "results.csv")
    assert [s["source"] for s in tl.meta["summaries"]] == ["results.hip_stats.csv"]


# -- every column set rocprof v1 had (tool.cpp's results.txt fields per release) -------------

COLUMN_SETS = {  # release -> fixed columns after Index,KernelName (research: ROCm/rocprofiler tags)
    "roc-2.0": "gpu-id,queue-id,queue-index",
    "roc-2.6": "gpu-id,queue-id,queue-index,tid,grd,wgr,lds,scr,vgpr,sgpr,fbar,sig",
    "rocm-3.5": "gpu-id,queue-id,queue-index,pid,tid,grd,wgr,lds,scr,vgpr,sgpr,fbar,sig",
    "rocm-4.0": "gpu-id,queue-id,queue-index,pid,tid,grd,wgr,lds,scr,vgpr,sgpr,fbar,sig,obj",
    "rocm-5.3": "gpu-id,queue-id,queue-index,pid,tid,grd,wgr,lds,scr,arch_vgpr,accum_vgpr,sgpr,"
    "wave_size,sig,obj",
}
VALUES = {"gpu-id": "1", "queue-id": "3", "queue-index": "0", "pid": "77", "tid": "78",
          "grd": "4096", "wgr": "256", "lds": "512", "scr": "0", "vgpr": "24", "arch_vgpr": "24",
          "accum_vgpr": "4", "sgpr": "16", "fbar": "0", "wave_size": "64", "sig": "0x0",
          "obj": "0x7f00"}  # fmt: skip


@pytest.mark.parametrize("quoted", [False, True], ids=["bare", "quoted"])
@pytest.mark.parametrize("release", sorted(COLUMN_SETS))
def test_column_sets_of_every_release(release: str, quoted: bool, tmp_path: Path) -> None:
    fixed = COLUMN_SETS[release].split(",")
    names = ["Index", "KernelName", *fixed, "WRITE_SIZE", "DispatchNs", "BeginNs", "EndNs",
             "CompleteNs"]  # fmt: skip
    rows = []
    for i in range(4):
        begin = 5_323_868_593_552_306 + 10_000 * i
        values = [str(i), '"k(float*, int) [clone .kd]"', *(VALUES[c] for c in fixed),
                  "0.2500000000", str(begin - 100), str(begin), str(begin + 1_920 + i),
                  str(begin + 2_000)]  # fmt: skip
        rows.append(",".join(values))
    head = ",".join(f'"{n}"' for n in names) if quoted else ",".join(names)
    path = tmp_path / "results.csv"
    path.write_text("\n".join([head, *rows]) + "\n")
    assert [p.name for p in registry() if p.sniff(Probe(path))] == ["rocprof-v1-csv"]
    got = _rows(load(path))
    assert got["name"].to_list() == ["k(float*, int) [clone .kd]"] * 4
    assert got["dur"].to_list() == [1_920, 1_921, 1_922, 1_923]
    assert set(got["device"]) == {1} and set(got["stream"]) == {3}
    assert set(got["pid"]) == ({77} if "pid" in fixed else {None})


def test_rocprofv2_file_plugin_v1_layout(tmp_path: Path) -> None:
    """rocprofv2's ``file_v1`` plugin: bare header, a blank line after it, no sig/obj,
    DispatchNs and CompleteNs written as 0."""
    head = (
        "Index,KernelName,gpu-id,queue-id,queue-index,pid,tid,grd,wgr,lds,scr,arch_vgpr,"
        "accum_vgpr,sgpr,wave_size,DispatchNs,BeginNs,EndNs,CompleteNs"
    )
    rows = [
        f"{i},k{i % 2},0,0,{i},5,6,64,64,0,0,8,0,16,64,0,{1000 * i},{1000 * i + 300},0"
        for i in range(1, 5)
    ]
    path = tmp_path / "results_5.csv"
    path.write_text("\n".join([head, "", *rows]) + "\n")
    got = _rows(load(path))
    assert got.height == 4 and got["dur"].to_list() == [300] * 4
    assert sorted(got["name"].unique()) == ["k0", "k1"]
