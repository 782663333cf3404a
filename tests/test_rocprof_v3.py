"""rocprofv3 CSV sets and JSON output: real samples against references read here with the
csv / json modules, agent mapping, quoting styles, old columns, and bad input.

The parsers are called directly (``Parser.parse`` / ``Parser.sniff``), not through the
registry.
"""

from __future__ import annotations

import csv
import gzip
import json
from collections import Counter
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pytest

from tests.conftest import one_line, real_file, real_files, sha256
from tracekit.errors import TraceError
from tracekit.parsers.kineto import KINETO
from tracekit.parsers.probe import Probe
from tracekit.parsers.rocprof import ROCPROFV3_CSV, ROCPROFV3_JSON

DOCS = "rocprofv3_docs_sample_outputs"
LLAMA = "rocprofv3_csv_gfx1151_llamacpp_TRIMMED"
AGENTS = "rocprofv3_agent_info_mi350x_flydsl/big_out_agent_info.csv"
JSON_SAMPLE = "rocprofv3_json_mi350x_fsdp_train_tracelens/908_results.json.gz"
_DOCS_SET = ["kernel_trace.csv", "hip_compile_trace.csv", "hip_runtime_trace.csv",
             "hip_trace.csv", "hsa_api_trace.csv", "hsa_core_api_trace.csv",
             "marker_api_trace.csv", "rccl_trace.csv", "rocdecode_api_trace.csv",
             "rocjpeg_api_trace.csv", "memory_copy_trace.csv", "memory_allocation_trace.csv",
             "scratch_memory_trace.csv"]  # fmt: skip
# input (relative to amd/) -> the files of the run it names
CSV_SETS = {
    DOCS: [f"{DOCS}/{f}" for f in _DOCS_SET],
    f"{DOCS}/marker_api_trace.csv": [f"{DOCS}/{f}" for f in _DOCS_SET],
    f"{DOCS}/rocpd-to-csv.csv": [f"{DOCS}/rocpd-to-csv.csv"],
    f"{DOCS}/python_bindings.csv": [f"{DOCS}/python_bindings.csv"],
    f"{DOCS}/kernel_trace_truncated.csv": [f"{DOCS}/kernel_trace_truncated.csv"],
    LLAMA: [f"{LLAMA}/prefill_kernel_trace.csv", f"{LLAMA}/prefill_hip_api_trace.csv"],
    f"{LLAMA}/decode_kernel_trace.csv": [
        f"{LLAMA}/decode_kernel_trace.csv",
        f"{LLAMA}/decode_hip_api_trace.csv",
    ],
    f"{LLAMA}/decode_hip_api_trace.csv": [
        f"{LLAMA}/decode_kernel_trace.csv",
        f"{LLAMA}/decode_hip_api_trace.csv",
    ],
}
MARKER_DOMAINS = {"MARKER_CORE_API", "MARKER_CORE_RANGE_API"}


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def _agent(label: str) -> int | None:
    return int(label.split()[-1]) if label else None


def _reference(files: list[Path]) -> Counter[tuple[Any, ...]]:
    """Every row of a run as (kind, name, start, dur, device, stream, pid, tid, corr)."""
    out: Counter[tuple[Any, ...]] = Counter()
    for path in files:
        for r in _rows(path):
            start, end = int(r["Start_Timestamp"]), int(r["End_Timestamp"])
            corr = int(r["Correlation_Id"]) if r.get("Correlation_Id") else None
            if "Kernel_Name" in r:
                row = ("kernel", r["Kernel_Name"], _agent(r["Agent_Id"]), int(r["Queue_Id"]),
                       None, None)  # fmt: skip
            elif "Direction" in r:
                h2d = r["Direction"].endswith("HOST_TO_DEVICE")
                dev = _agent(r["Destination_Agent_Id"] if h2d else r["Source_Agent_Id"])
                row = ("memcpy", r["Direction"], dev, None, None, None)
            elif "Domain" in r:
                marker = r["Domain"] in MARKER_DOMAINS and not r["Function"].startswith("roctx")
                kind = ("marker" if start == end else "range") if marker else "api"
                row = (kind, r["Function"], -1, None, int(r["Process_Id"]), int(r["Thread_Id"]))
            else:  # memory allocation / scratch memory
                tid = int(r["Thread_Id"]) if r.get("Thread_Id") else None
                row = ("api", r["Operation"], -1, None, None, tid)
            kind, name, device, stream, pid, tid = row
            out[(kind, name, start, max(end - start, 0), device, stream, pid, tid, corr)] += 1
    return out


def _timeline_rows(timeline: Any) -> Counter[tuple[Any, ...]]:
    offset = timeline.meta["clock"]["zero_ns"]
    cols = ("kind", "name", "ts", "dur", "device", "stream", "pid", "tid", "corr")
    return Counter(
        (r[0], r[1], r[2] + offset, *r[3:])
        for r in timeline.df.select(cols).iter_rows()  # type: ignore[misc]
    )


@pytest.mark.parametrize("rel", sorted(CSV_SETS))
def test_csv_rows_equal_csv_module(rel: str) -> None:
    path = real_file("amd", rel)
    files = [real_file("amd", f) for f in CSV_SETS[rel]]
    digests = [sha256(f) for f in files]
    assert ROCPROFV3_CSV.sniff(Probe(path))
    timeline = ROCPROFV3_CSV.parse(path)
    assert timeline.validate() == []
    assert _timeline_rows(timeline) == _reference(files)
    assert sorted(timeline.meta["files"]) == sorted(f.name for f in files)
    assert timeline.meta["origin_ns"] is None
    assert timeline.meta["clock"]["domain"] == "CLOCK_BOOTTIME"
    assert not any("dropped" in w for w in timeline.meta["warnings"])
    assert [sha256(f) for f in files] == digests


@pytest.mark.parametrize(
    "path", real_files("amd", "rocprofv3_*/*kernel_trace*.csv", "rocprofv3_*/*_kernel_trace.csv")
)
def test_kernel_counts_and_ns_per_name(path: Path) -> None:
    """Per kernel name: calls and total ns equal the stats file where the run has one,
    else a plain csv reading of the kernel trace."""
    stats = path.with_name(path.name.replace("kernel_trace", "kernel_stats"))
    if stats.exists() and stats != path:
        expected = {r["Name"]: (int(r["Calls"]), int(r["TotalDurationNs"])) for r in _rows(stats)}
    else:
        expected = {}
        for r in _rows(path):
            calls, total = expected.get(r["Kernel_Name"], (0, 0))
            dur = int(r["End_Timestamp"]) - int(r["Start_Timestamp"])
            expected[r["Kernel_Name"]] = (calls + 1, total + dur)
    df = ROCPROFV3_CSV.parse(path).df.filter(kind="kernel")
    got = df.group_by("name").agg(n=pl.len(), ns=pl.col("dur").sum())
    assert {r[0]: (r[1], r[2]) for r in got.iter_rows()} == expected


def test_markers_ranges_and_instants() -> None:
    df = ROCPROFV3_CSV.parse(real_file("amd", f"{DOCS}/marker_api_trace.csv")).df
    markers = df.filter(kind="marker")
    assert sorted(markers["name"].cast(str)) == ["after hipLaunchKernel", "before hipLaunchKernel"]
    assert set(markers["dur"]) == {0}
    ranges = df.filter(kind="range")
    assert sorted(ranges["name"].cast(str)) == [
        "hipLaunchKernel",
        "hipLaunchKernel range",
        "hipMemcpy",
    ]
    assert (ranges["dur"] > 0).all() and set(ranges["device"]) == {-1}


def test_folder_with_several_runs_loads_the_largest() -> None:
    timeline = ROCPROFV3_CSV.parse(real_file("amd", LLAMA))
    assert any("'prefill'" in w and "'decode'" in w for w in timeline.meta["warnings"])
    kernels = timeline.df.filter(kind="kernel")
    assert dict(kernels.group_by("stream").len().iter_rows()) == {2: 1123, 1: 5}


def test_agent_info_sample_alone_gives_devices() -> None:
    timeline = ROCPROFV3_CSV.parse(real_file("amd", AGENTS))
    assert len(timeline) == 0
    devices = timeline.meta["devices"]
    assert [d["index"] for d in devices] == list(range(8))
    assert {(d["name"], d["cores"], d["arch"], d["vendor"]) for d in devices} == {
        ("AMD Instinct MI350X", 256, "gfx950", "AMD")
    }
    assert [d["node_id"] for d in devices] == list(range(2, 10))
    assert any("only agent info" in w for w in timeline.meta["warnings"])


def test_both_quoting_styles_read_the_same(tmp_path: Path) -> None:
    src = real_file("amd", f"{LLAMA}/decode_kernel_trace.csv")  # every field quoted
    rows = _rows(src)
    plain = tmp_path / "x_kernel_trace.csv"
    with plain.open("w", newline="") as fh:  # rocprofv3's own style: text quoted only
        writer = csv.writer(fh, quoting=csv.QUOTE_NONNUMERIC)
        writer.writerow(list(rows[0]))
        for r in rows:
            writer.writerow([v if not v.isdigit() else int(v) for v in r.values()])
    assert plain.read_bytes() != src.read_bytes()
    a, b = ROCPROFV3_CSV.parse(src), ROCPROFV3_CSV.parse(plain)
    cols = ["dur", "kind", "name", "device", "stream", "corr", "args"]
    assert a.df.filter(kind="kernel").select(cols).equals(b.df.select(cols))
    start = [t.df.filter(kind="kernel")["ts"] + t.meta["clock"]["zero_ns"] for t in (a, b)]
    assert start[0].equals(start[1])


# ---------------------------------------------------------------- synthetic runs


KERNEL_HEADER = ["Kind", "Agent_Id", "Queue_Id", "Stream_Id", "Thread_Id", "Dispatch_Id",
                 "Kernel_Id", "Kernel_Name", "Correlation_Id", "Start_Timestamp", "End_Timestamp",
                 "LDS_Block_Size", "Scratch_Size", "VGPR_Count", "Accum_VGPR_Count", "SGPR_Count",
                 "Workgroup_Size_X", "Workgroup_Size_Y", "Workgroup_Size_Z", "Grid_Size_X",
                 "Grid_Size_Y", "Grid_Size_Z"]  # fmt: skip
API_HEADER = ["Domain", "Function", "Process_Id", "Thread_Id", "Correlation_Id",
              "Start_Timestamp", "End_Timestamp"]  # fmt: skip


def _write(path: Path, header: list[str], rows: list[list[Any]], quote_all: bool = False) -> Path:
    with path.open("w", newline="") as fh:
        writer = csv.writer(fh, quoting=csv.QUOTE_ALL if quote_all else csv.QUOTE_NONNUMERIC)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def _kernel(agent: Any, queue: int, name: str, corr: int, start: int, end: int) -> list[Any]:
    return ["KERNEL_DISPATCH", agent, queue, 7, 100, corr, 3, name, corr, start, end,
            512, 0, 24, 4, 16, 256, 1, 1, 4096, 2, 1]  # fmt: skip


def test_agent_labels_map_to_gpu_index(tmp_path: Path) -> None:
    (tmp_path / "r_agent_info.csv").write_bytes(real_file("amd", AGENTS).read_bytes())
    _write(tmp_path / "r_kernel_trace.csv", KERNEL_HEADER, [
        _kernel("Agent 2", 1, "gemm", 1, 1000, 1500), _kernel("Agent 5", 2, "gemm", 2, 1100, 1300),
        _kernel("Agent 9", 1, "norm", 3, 1200, 1200),
    ])  # fmt: skip
    _write(
        tmp_path / "r_memory_copy_trace.csv",
        [
            "Kind",
            "Direction",
            "Stream_Id",
            "Source_Agent_Id",
            "Destination_Agent_Id",
            "Correlation_Id",
            "Start_Timestamp",
            "End_Timestamp",
        ],
        [
            ["MEMORY_COPY", "MEMORY_COPY_HOST_TO_DEVICE", 0, "Agent 0", "Agent 3", 4, 900, 950],
            ["MEMORY_COPY", "MEMORY_COPY_DEVICE_TO_HOST", 0, "Agent 4", "Agent 1", 5, 960, 990],
        ],
    )
    _write(
        tmp_path / "r_memory_allocation_trace.csv",
        [
            "Kind",
            "Operation",
            "Agent_Id",
            "Allocation_Size",
            "Address",
            "Correlation_Id",
            "Start_Timestamp",
            "End_Timestamp",
        ],
        [
            [
                "MEMORY_ALLOCATION",
                "MEMORY_ALLOCATION_ALLOCATE",
                "Agent 2",
                1024,
                "0x00007f00",
                6,
                800,
                850,
            ],
            ["MEMORY_ALLOCATION", "MEMORY_ALLOCATION_FREE", "", 0, "0x00007f00", 7, 2000, 2100],
        ],
    )
    timeline = ROCPROFV3_CSV.parse(tmp_path / "r_kernel_trace.csv")
    df = timeline.df
    assert df.filter(kind="kernel")["device"].to_list() == [0, 3, 7]
    assert df.filter(kind="memcpy")["device"].to_list() == [1, 2]
    assert df.filter(kind="memcpy")["engine"].cast(str).to_list() == ["copy", "copy"]
    allocs = df.filter(name="MEMORY_ALLOCATION_ALLOCATE")
    assert json.loads(allocs["args"][0]) == {
        "agent": "Agent 2",
        "device": 0,
        "bytes": 1024,
        "address": "0x00007f00",
    }
    free = json.loads(df.filter(name="MEMORY_ALLOCATION_FREE")["args"][0])
    assert free["agent"] is None and free["device"] is None
    first = df.filter(kind="kernel").row(0, named=True)
    assert json.loads(first["args"]) == {"grid": [4096, 2, 1], "block": [256, 1, 1], "lds": 512,
                                         "scratch": 0, "vgpr": 24, "accum_vgpr": 4, "sgpr": 16,
                                         "hip_stream": 7}  # fmt: skip
    assert first["ts"] == 200 and timeline.meta["clock"]["zero_ns"] == 800
    assert len(timeline.meta["devices"]) == 8 and not timeline.meta["warnings"]


def test_old_output_bare_agent_ids_and_no_stream_columns(tmp_path: Path) -> None:
    header = [c for c in KERNEL_HEADER if c not in ("Stream_Id", "Thread_Id", "Dispatch_Id")]
    keep = [i for i, c in enumerate(KERNEL_HEADER) if c in header]
    rows = [
        [row[i] for i in keep]
        for row in (_kernel(1, 1, "k", 1, 10, 30), _kernel(1, 2, "k", 2, 20, 25))
    ]
    path = _write(tmp_path / "old_kernel_trace.csv", header, rows)
    timeline = ROCPROFV3_CSV.parse(path)
    df = timeline.df
    assert df["device"].to_list() == [1, 1] and df["stream"].to_list() == [1, 2]
    assert "hip_stream" not in json.loads(df["args"][0])
    assert any("agent numbers" in w for w in timeline.meta["warnings"])


def test_regenerated_csv_guid_column_and_quote_all(tmp_path: Path) -> None:
    rows = [
        ["0000-guid", "HIP_RUNTIME_API_EXT", "hipMalloc", 5, 6, 1, 100, 180],
        ["0000-guid", "MARKER_CORE_API", "step 1", 5, 6, 2, 150, 150],
    ]
    path = _write(tmp_path / "from_rocpd.csv", ["Guid", *API_HEADER], rows, quote_all=True)
    assert ROCPROFV3_CSV.sniff(Probe(path))
    df = ROCPROFV3_CSV.parse(path).df
    assert df.select("kind", "name", "ts", "dur", "pid", "tid", "corr").rows() == [
        ("api", "hipMalloc", 0, 80, 5, 6, 1),
        ("marker", "step 1", 50, 0, 5, 6, 2),
    ]


def test_negative_durations_clamped_and_counted(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "n_kernel_trace.csv",
        KERNEL_HEADER,
        [_kernel("Agent 1", 1, "k", 1, 100, 90), _kernel("Agent 1", 1, "k", 2, 95, 99)],
    )
    timeline = ROCPROFV3_CSV.parse(path)
    assert timeline.df["dur"].to_list() == [0, 4]
    assert any("1 kernel rows end before they start" in w for w in timeline.meta["warnings"])


# ---------------------------------------------------------------- bad CSV input


def test_missing_required_columns(tmp_path: Path) -> None:
    header = [c for c in KERNEL_HEADER if c not in ("Start_Timestamp", "Queue_Id")]
    path = _write(tmp_path / "m_kernel_trace.csv", header, [["KERNEL_DISPATCH", "Agent 1"]])
    before = sha256(path)
    assert ROCPROFV3_CSV.sniff(Probe(path))
    with pytest.raises(TraceError) as exc:
        ROCPROFV3_CSV.parse(path)
    one_line(exc, str(path), "Queue_Id", "Start_Timestamp", "kernel trace")
    assert sha256(path) == before


def test_empty_and_header_only_kernel_csv(tmp_path: Path) -> None:
    empty = tmp_path / "e_kernel_trace.csv"
    empty.write_bytes(b"")
    with pytest.raises(TraceError) as exc:
        ROCPROFV3_CSV.parse(empty)
    one_line(exc, "hold no rows", "e_kernel_trace.csv")
    header_only = _write(tmp_path / "h_kernel_trace.csv", KERNEL_HEADER, [])
    with pytest.raises(TraceError) as exc:
        ROCPROFV3_CSV.parse(header_only)
    one_line(exc, "hold no rows")
    _write(
        tmp_path / "h_hip_api_trace.csv",
        API_HEADER,
        [["HIP_RUNTIME_API_EXT", "hipLaunchKernel", 1, 1, 1, 10, 20]],
    )
    timeline = ROCPROFV3_CSV.parse(header_only)  # the run still has API rows
    assert len(timeline) == 1
    assert any("header only" in w for w in timeline.meta["warnings"])


def test_garbage_in_a_number_column(tmp_path: Path) -> None:
    row = _kernel("Agent 1", 1, "k", 1, 10, 20)
    row[9] = "soon"
    path = _write(tmp_path / "g_kernel_trace.csv", KERNEL_HEADER, [row])
    with pytest.raises(TraceError) as exc:
        ROCPROFV3_CSV.parse(path)
    one_line(exc, "cannot read as a rocprofv3 kernel trace")


def test_csv_sniff_claims_only_rocprofv3(tmp_path: Path) -> None:
    other = tmp_path / "results.csv"  # legacy rocprof kernel CSV
    other.write_text('"Index","KernelName","gpu-id","queue-id","BeginNs","EndNs"\n1,"k",0,0,1,2\n')
    stats = _write(tmp_path / "x_kernel_stats.csv", ["Name", "Calls", "TotalDurationNs"], [])
    counters = _write(
        tmp_path / "x_counter_collection.csv",
        ["Correlation_Id", "Kernel_Name", "Counter_Name", "Counter_Value"],
        [],
    )
    assert not any(ROCPROFV3_CSV.sniff(Probe(p)) for p in (other, stats, counters))
    renamed = _write(tmp_path / "anything.csv", KERNEL_HEADER, [_kernel(1, 1, "k", 1, 1, 2)])
    assert ROCPROFV3_CSV.sniff(Probe(renamed))
    assert not ROCPROFV3_CSV.sniff(Probe(tmp_path))  # a folder is grouped by rocprofv3 names
    _write(tmp_path / "r_hip_api_trace.csv", API_HEADER, [["HIP_API", "hipFree", 1, 1, 1, 1, 2]])
    assert ROCPROFV3_CSV.sniff(Probe(tmp_path))
    assert not ROCPROFV3_CSV.sniff(Probe(tmp_path / "nothing_here"))


# ---------------------------------------------------------------- JSON


def test_json_sample_equals_json_module() -> None:
    path = real_file("amd", JSON_SAMPLE)
    before = sha256(path)
    doc = json.loads(gzip.decompress(path.read_bytes()))["rocprofiler-sdk-tool"][0]
    symbols = {s["kernel_id"]: s["formatted_kernel_name"] for s in doc["kernel_symbols"]}
    gpu = {a["id"]["handle"]: a["gpu_index"] for a in doc["agents"] if a["type"] == 2}
    expected = Counter(
        (symbols[r["dispatch_info"]["kernel_id"]], r["start_timestamp"],
         r["end_timestamp"] - r["start_timestamp"], gpu[r["dispatch_info"]["agent_id"]["handle"]],
         r["dispatch_info"]["queue_id"]["handle"], doc["metadata"]["pid"], None,
         r["correlation_id"]["internal"])
        for r in doc["buffer_records"]["kernel_dispatch"]
    )  # fmt: skip
    assert ROCPROFV3_JSON.sniff(Probe(path)) and not ROCPROFV3_CSV.sniff(Probe(path))
    timeline = ROCPROFV3_JSON.parse(path)
    assert timeline.validate() == []
    got = _timeline_rows(timeline)
    assert Counter({k[1:]: v for k, v in got.items()}) == expected
    assert {k[0] for k in got} == {"kernel"}
    df = timeline.df
    assert len(df) == 43_915
    assert dict(df.group_by("stream").len().iter_rows()) == {
        18: 38_761,
        19: 3_034,
        20: 1_309,
        17: 500,
        16: 311,
    }
    assert {n.split("(")[0] for n in df.filter(stream=20)["name"].cast(str)} == {
        "ncclDevKernel_Generic_1"
    }
    assert set(df["device"]) == {0}
    devices = timeline.meta["devices"]
    assert [(d["index"], d["name"], d["cores"]) for d in devices] == [
        (i, "AMD Instinct MI350X", 256) for i in range(8)
    ]
    assert timeline.meta["processes"][0]["pid"] == 908
    assert sha256(path) == before


def _tool(records: dict[str, list[dict]], messages: list[dict] | None = None) -> dict:
    kinds = [
        ("NONE", []),
        ("HIP_RUNTIME_API_EXT", ["hipMalloc", "hipLaunchKernel"]),
        ("MARKER_CORE_API", ["roctxMarkA", "roctxRangePushA", "roctxRangePop"]),
        ("MEMORY_COPY", ["MEMORY_COPY_NONE", "MEMORY_COPY_HOST_TO_DEVICE"]),
        ("KERNEL_DISPATCH", ["KERNEL_DISPATCH_NONE", "KERNEL_DISPATCH_COMPLETE"]),
        ("MEMORY_ALLOCATION", ["MEMORY_ALLOCATION_NONE", "MEMORY_ALLOCATION_ALLOCATE"]),
        ("SCRATCH_MEMORY", ["SCRATCH_MEMORY_NONE", "SCRATCH_MEMORY_ALLOC"]),
        ("RCCL_API", ["ncclAllReduce"]),
    ]
    return {"rocprofiler-sdk-tool": [{
        "metadata": {"pid": 42, "init_time": 1, "fini_time": 2, "command": ["python", "x.py"],
                     "node": {"hostname": "h"}, "config": {"kernel_rename": False}},
        "agents": [{"id": {"handle": 11}, "type": 1, "node_id": 0, "name": "cpu"},
                   {"id": {"handle": 12}, "type": 2, "node_id": 1, "gpu_index": 0,
                    "name": "gfx942", "product_name": "AMD Instinct MI300X", "cu_count": 304,
                    "mem_banks": [{"size_in_bytes": 206158430208}]}],
        "strings": {"buffer_records": [{"kind": k, "operations": o} for k, o in kinds],
                    "marker_api": messages or []},
        "kernel_symbols": [{"kernel_id": 5, "kernel_name": "_Z4gemmv.kd",
                            "formatted_kernel_name": "gemm()", "sgpr_count": 16,
                            "arch_vgpr_count": 32, "accum_vgpr_count": 0}],
        "buffer_records": records,
    }]}  # fmt: skip


def _api(kind: int, op: int, corr: int, start: int, end: int) -> dict:
    return {"size": 1, "kind": kind, "operation": op, "thread_id": 43,
            "correlation_id": {"internal": corr, "external": 0},
            "start_timestamp": start, "end_timestamp": end}  # fmt: skip


def test_json_records_of_every_kind(tmp_path: Path) -> None:
    kernel = {**_api(4, 1, 2, 1100, 1400), "stream_id": {"handle": 3},
              "dispatch_info": {"agent_id": {"handle": 12}, "queue_id": {"handle": 9},
                                "kernel_id": 5, "dispatch_id": 1, "private_segment_size": 0,
                                "group_segment_size": 1024, "workgroup_size": {"x": 64, "y": 1,
                                "z": 1}, "grid_size": {"x": 128, "y": 1, "z": 1}}}  # fmt: skip
    records = {
        "kernel_dispatch": [kernel],
        "hip_api": [_api(1, 1, 2, 1000, 1050), _api(1, 0, 1, 900, 950)],
        "marker_api": [_api(2, 0, 3, 1200, 1200), _api(2, 1, 4, 1000, 1500),
                       _api(2, 2, 5, 1500, 1501)],
        "rccl_api": [_api(7, 0, 6, 1600, 1700)],
        "memory_copy": [{**_api(3, 1, 7, 800, 880), "src_agent_id": {"handle": 11},
                         "dst_agent_id": {"handle": 12}, "bytes": 4096}],
        "memory_allocation": [{**_api(5, 1, 8, 700, 720), "agent_id": {"handle": 12},
                               "address": "0x0000000000001000", "allocation_size": 64}],
        "scratch_memory": [{**_api(6, 1, 9, 1150, 1160), "agent_id": {"handle": 12},
                            "queue_id": {"handle": 9}, "flags": 0}],
    }  # fmt: skip
    messages = [{"key": 3, "value": "token 1"}, {"key": 4, "value": "decode step"}]
    path = tmp_path / "42_results.json.gz"
    path.write_bytes(gzip.compress(json.dumps(_tool(records, messages)).encode()))
    assert ROCPROFV3_JSON.sniff(Probe(path)) and not KINETO.sniff(Probe(path))
    timeline = ROCPROFV3_JSON.parse(path)
    assert timeline.validate() == []
    rows = {
        r[1]: r
        for r in timeline.df.select(
            "kind", "name", "ts", "dur", "device", "stream", "pid", "tid", "corr"
        ).rows()
    }
    assert rows["gemm()"] == ("kernel", "gemm()", 400, 300, 0, 9, 42, None, 2)
    assert rows["hipLaunchKernel"] == ("api", "hipLaunchKernel", 300, 50, -1, None, 42, 43, 2)
    assert rows["token 1"][:4] == ("marker", "token 1", 500, 0)
    assert rows["decode step"][:4] == ("range", "decode step", 300, 500)
    assert rows["roctxRangePop"][0] == "api" and rows["ncclAllReduce"][0] == "api"
    assert rows["MEMORY_COPY_HOST_TO_DEVICE"][:5] == ("memcpy", "MEMORY_COPY_HOST_TO_DEVICE",
                                                      100, 80, 0)  # fmt: skip
    assert rows["MEMORY_ALLOCATION_ALLOCATE"][0] == "api"
    assert rows["SCRATCH_MEMORY_ALLOC"][4] == -1
    args = dict(timeline.df.select("name", "args").rows())
    assert json.loads(args["gemm()"]) == {"grid": [128, 1, 1], "block": [64, 1, 1], "lds": 1024,
                                          "scratch": 0, "vgpr": 32, "accum_vgpr": 0, "sgpr": 16,
                                          "hip_stream": 3}  # fmt: skip
    assert json.loads(args["MEMORY_COPY_HOST_TO_DEVICE"])["bytes"] == 4096
    assert json.loads(args["MEMORY_ALLOCATION_ALLOCATE"])["address"] == "0x0000000000001000"
    assert json.loads(args["hipLaunchKernel"]) == {"domain": "HIP_RUNTIME_API_EXT"}
    device = timeline.meta["devices"][0]
    assert (device["name"], device["cores"], device["memory"]) == (
        "AMD Instinct MI300X",
        304,
        206158430208,
    )


def test_json_truncated_and_garbage(tmp_path: Path) -> None:
    text = json.dumps(_tool({"hip_api": [_api(1, 1, 1, 10, 20)] * 50})).encode()
    cut = tmp_path / "cut_results.json"
    cut.write_bytes(text[: len(text) // 2])
    assert ROCPROFV3_JSON.sniff(Probe(cut))
    with pytest.raises(TraceError) as exc:
        ROCPROFV3_JSON.parse(cut)
    one_line(exc, "not valid JSON", "truncated")
    gz = tmp_path / "cut_results.json.gz"
    blob = gzip.compress(text)
    gz.write_bytes(blob[: len(blob) // 2])
    with pytest.raises(TraceError) as exc:
        ROCPROFV3_JSON.parse(gz)
    one_line(exc, "truncated or corrupt")
    garbage = tmp_path / "g_results.json"
    garbage.write_bytes(b'{"rocprofiler-sdk-tool": [{"agents": "many"}]}')
    with pytest.raises(TraceError) as exc:
        ROCPROFV3_JSON.parse(garbage)
    one_line(exc, "not rocprofv3 output")


def test_json_sniff_rejects_other_json(tmp_path: Path) -> None:
    kineto = tmp_path / "k.json"
    kineto.write_text(
        json.dumps({"schemaVersion": 1, "rocprofiler-sdk_version": "1.0", "traceEvents": []})
    )
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"model": "x", "note": "rocprofiler-sdk-tool"}))
    assert not ROCPROFV3_JSON.sniff(Probe(kineto)) and not ROCPROFV3_JSON.sniff(Probe(config))
    with pytest.raises(TraceError) as exc:
        ROCPROFV3_JSON.parse(config)
    one_line(exc, "not rocprofv3 JSON output")


@pytest.mark.parametrize("path", real_files("amd", "kineto_*/*.json.gz", "kineto_*/*.json"))
def test_json_sniff_leaves_kineto_samples_alone(path: Path) -> None:
    assert not ROCPROFV3_JSON.sniff(Probe(path))
    assert not ROCPROFV3_CSV.sniff(Probe(path))


def test_args_written_per_pattern_equal_every_row(monkeypatch: pytest.MonkeyPatch) -> None:
    from tracekit.parsers.rocprof import args as amd_args
    from tracekit.parsers.rocprof.args import INT, STR, Field, json_args

    n = 60_000
    frame = pl.DataFrame(
        {
            "x": [i % 7 for i in range(n)],
            "y": [None if i % 11 == 0 else 1 for i in range(n)],
            "s": [i % 3 for i in range(n)],
            "t": [f'q"{i % 5}é' for i in range(n)],
            "o": [i if i % 13 == 0 else None for i in range(n)],
        }
    )
    fields = [
        Field("grid", ("x", "y"), INT, True),
        Field("stream", "s", INT, True),
        Field("text", "t", STR, True),
        Field("opt", "o"),
    ]

    def every_row(df: pl.DataFrame, *fs: Field, split: int | None = None) -> pa.Array:
        with monkeypatch.context() as m:
            m.setattr(amd_args, "_PATTERN_MIN_ROWS", n + 1)
            return json_args(df, *fs, split=split)

    direct = every_row(frame, *fields)
    assert json_args(frame, *fields).equals(direct)
    assert json.loads(direct[0].as_py()) == {
        "grid": [0, None],
        "stream": 0,
        "text": 'q"0é',
        "opt": 0,
    }
    assert json.loads(direct[1].as_py()) == {"grid": [1, 1], "stream": 1, "text": 'q"1é'}
    # one piece repeats, the other is distinct per row: written in two pieces
    wide = frame.with_columns(d=pl.int_range(n))
    for split_fields in (
        [*fields[:3], Field("id", "d", INT, True)],
        [Field("id", "d", INT, True), *fields[:3]],
    ):
        for split in (1, 2):
            want = every_row(wide, *split_fields, split=split)
            assert json_args(wide, *split_fields, split=split).equals(want)
    # one required column: written once per distinct value
    one = json_args(frame, Field("text", "t", STR, True))
    assert one.to_pylist()[:2] == ['{"text":"q\\"0é"}', '{"text":"q\\"1é"}']
    # only optional fields: rows without any are null
    assert json_args(frame.head(2), Field("opt", "o")).to_pylist() == ['{"opt":0}', None]
    # every row hashed alike (a collision): the check notices and every row is written
    monkeypatch.setattr(amd_args, "_hashes", lambda v: pl.Series("h", [1] * v.height))
    assert json_args(frame, *fields).equals(direct)


def test_json_kernel_without_symbol_keeps_row(tmp_path: Path) -> None:
    info = {"agent_id": {"handle": 12}, "queue_id": {"handle": 1}, "kernel_id": 99}
    records = {
        "kernel_dispatch": [
            {**_api(4, 1, 1, 10, 20), "dispatch_info": info},
            {**_api(4, 1, 2, 30, 45), "dispatch_info": {**info, "kernel_id": 5}},
        ]
    }
    path = tmp_path / "1_results.json"
    path.write_text(json.dumps(_tool(records)))
    timeline = ROCPROFV3_JSON.parse(path)
    df = timeline.df
    assert df["name"].cast(str).to_list() == [None, "gemm()"]
    assert [json.loads(a)["vgpr"] for a in df["args"]] == [None, 32]
    assert any("1 kernels with an id missing" in w for w in timeline.meta["warnings"])


def test_json_one_object_per_process(tmp_path: Path) -> None:
    first = _tool({"hip_api": [_api(1, 1, 1, 100, 150)]})
    second = _tool({"hip_api": [_api(1, 0, 1, 90, 95)]})["rocprofiler-sdk-tool"][0]
    second["metadata"] = {**second["metadata"], "pid": 77}
    first["rocprofiler-sdk-tool"].append(second)
    path = tmp_path / "multi_results.json"
    path.write_text(json.dumps(first))
    timeline = ROCPROFV3_JSON.parse(path)
    assert timeline.df.select("name", "ts", "pid").rows() == [
        ("hipLaunchKernel", 10, 42),
        ("hipMalloc", 0, 77),
    ]
    assert [p["pid"] for p in timeline.meta["processes"]] == [42, 77]
