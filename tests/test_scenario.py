"""The fixture scenario builder and its nsys SQLite writer."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import polars as pl
import pytest

from fixtures.nsys_writer import short_name, write_nsys_sqlite
from fixtures.scenario import (
    COMM_STREAM,
    COMPUTE_STREAM,
    EVENT_SCHEMA,
    GEMM_ROLES,
    KERNELS,
    STREAMS,
    build_scenario,
)

DEVICE_KINDS = ["kernel", "memcpy", "memset", "sync"]
WORK_KINDS = ["kernel", "memcpy", "memset"]
COMM_NAMES = {s.name for s in KERNELS.values() if s.comm}
ALL_FAULTS = {
    "fallback_kernel": True,
    "exposed_all_to_all": True,
    "idle_bubble_ns": 150_000,
    "unfused_collective": True,
}


def _intervals(df: pl.DataFrame) -> list[tuple[int, int]]:
    return list(df.select("ts", end=pl.col("ts") + pl.col("dur")).iter_rows())


def _union_ns(df: pl.DataFrame) -> int:
    """Length of the union of the rows' intervals (sort + running max, in polars)."""
    s = df.select("ts", end=pl.col("ts") + pl.col("dur")).sort("ts")
    s = s.with_columns(reach=pl.col("end").cum_max().shift(1).fill_null(0))
    s = s.with_columns(start=pl.max_horizontal("ts", "reach"))
    return int(s.select((pl.col("end") - pl.col("start")).clip(lower_bound=0).sum()).item())


def _overlap_ns(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> int:
    """Total pairwise overlap (exact for two sets of disjoint intervals)."""
    return sum(max(0, min(e1, e2) - max(s1, s2)) for s1, e1 in a for s2, e2 in b)


def _names(df: pl.DataFrame) -> set[str]:
    return set(df["name"].to_list())


# -- the builder ------------------------------------------------------------------------------
def test_same_seed_same_scenario_and_other_seed_differs() -> None:
    a, b = build_scenario(seed=3, **ALL_FAULTS), build_scenario(seed=3, **ALL_FAULTS)
    assert a.events.equals(b.events)
    assert a.truth == b.truth
    c = build_scenario(seed=4, **ALL_FAULTS)
    assert not a.events.equals(c.events)
    assert a.knobs["seed"] == 3 and a.knobs["idle_bubble_ns"] == 150_000


def test_columns_types_and_row_conventions() -> None:
    ev = build_scenario(steps=2, layers=2).events
    assert dict(ev.schema) == EVENT_SCHEMA
    assert ev["ts"].is_sorted()
    assert ev["dur"].min() >= 0
    host = ev.filter(pl.col("kind").is_in(["api", "range"]))
    dev = ev.filter(pl.col("kind").is_in(DEVICE_KINDS))
    assert host.height + dev.height == ev.height
    assert host["device"].unique().to_list() == [-1]
    assert host["stream"].null_count() == host.height
    assert host["tid"].null_count() == 0
    assert dev["tid"].null_count() == dev.height
    assert dev["pid"].unique().to_list() == [4242]
    assert set(dev["stream"].unique().to_list()) == set(STREAMS)
    ranges = ev.filter(pl.col("kind") == "range")
    assert ranges["name"].to_list() == ["decode_step_0", "decode_step_1"]
    assert ranges["corr"].null_count() == 2 and ranges["args"].null_count() == 2
    engines = dict(dev.select("kind", "engine").unique().iter_rows())
    assert engines == {"kernel": "sm", "memcpy": "copy", "memset": None, "sync": None}
    kernel_args = ev.filter(pl.col("kind") == "kernel")["args"][0]
    assert kernel_args.startswith('{"grid":[') and '"registers":' in kernel_args
    assert " " not in kernel_args
    assert _names(ev.filter(pl.col("kind") == "memcpy")) == {
        "Memcpy HtoD (Pinned -> Device)",
        "Memcpy DtoH (Device -> Pinned)",
    }


def test_every_device_row_has_an_earlier_api_row_with_its_corr() -> None:
    ev = build_scenario(steps=3, layers=3, **ALL_FAULTS).events
    api = ev.filter(pl.col("kind") == "api")
    assert api["corr"].n_unique() == api.height
    dev = ev.filter(pl.col("kind").is_in(DEVICE_KINDS))
    joined = dev.join(api, on="corr", how="left", suffix="_api")
    assert joined["ts_api"].null_count() == 0
    assert (joined["ts_api"] < joined["ts"]).all()
    launch = {
        "kernel": "cudaLaunchKernel",
        "memcpy": "cudaMemcpyAsync",
        "memset": "cudaMemsetAsync",
        "sync": "cudaStreamSynchronize",
    }
    pairs = set(joined.select("kind", "name_api").unique().iter_rows())
    assert pairs == set(launch.items())


def test_fallback_kernel_only_when_asked() -> None:
    plain = build_scenario(steps=2, layers=3)
    assert not any("at::native" in n for n in _names(plain.events))
    assert plain.truth["fallback_count"] == 0
    faulty = build_scenario(steps=2, layers=3, fallback_kernel=True)
    fallback = faulty.events.filter(pl.col("name").str.contains("at::native", literal=True))
    assert fallback.height == 2 * 3 == faulty.truth["fallback_count"]
    assert fallback["dur"].sum() == faulty.truth["fallback_ns"]
    assert sorted(_names(fallback)) == faulty.truth["fallback_names"]
    # the chain replaces the routed experts' fused activation in one layer per step
    routed_act = (pl.col("name") == KERNELS["act"].name) & (pl.col("stream") == COMPUTE_STREAM)
    assert faulty.events.filter(routed_act).height == 2 * 2
    assert plain.events.filter(routed_act).height == 2 * 3


def test_bubble_is_idle_on_every_stream() -> None:
    sc = build_scenario(steps=3, layers=4, idle_bubble_ns=150_000)
    [(start, end)] = sc.truth["bubbles"]
    assert end - start == 150_000
    dev = sc.events.filter(pl.col("kind").is_in(DEVICE_KINDS))
    inside = dev.filter((pl.col("ts") < end) & (pl.col("ts") + pl.col("dur") > start))
    assert inside.height == 0
    work = dev.filter(pl.col("kind").is_in(WORK_KINDS))
    assert (work["ts"] + work["dur"]).filter(work["ts"] < start).max() == start
    assert work["ts"].filter(work["ts"] >= end).min() == end
    window = sc.truth["step_windows"][1]  # steps // 2
    assert window[0] < start < end < window[1]
    assert build_scenario(steps=3, layers=4).truth["bubbles"] == []


def test_exposed_all_to_all_has_no_concurrent_compute() -> None:
    sc = build_scenario(steps=2, layers=2, exposed_all_to_all=True)
    [(start, end)] = sc.truth["exposed_dispatch"]
    kernels = sc.events.filter(pl.col("kind") == "kernel")
    dispatch = kernels.filter(pl.col("ts") == start)
    assert dispatch["name"].to_list() == [KERNELS["dispatch"].name]
    assert dispatch["stream"].to_list() == [COMM_STREAM]
    compute = kernels.filter(~pl.col("name").is_in(list(COMM_NAMES)))
    assert _overlap_ns([(start, end)], _intervals(compute)) == 0
    assert sc.truth["exposed_dispatch_overlap_ns"] == 0
    # without the knob the same dispatch (step 1, layer 1: the fourth) overlaps the shared expert
    plain = build_scenario(steps=2, layers=2).events.filter(pl.col("kind") == "kernel")
    dispatches = plain.filter(pl.col("name") == KERNELS["dispatch"].name)
    other = plain.filter(~pl.col("name").is_in(list(COMM_NAMES)))
    assert _overlap_ns(_intervals(dispatches[3]), _intervals(other)) > 0


def test_unfused_collective_follows_each_o_proj() -> None:
    nccl = KERNELS["nccl_allreduce"].name
    assert nccl not in _names(build_scenario(steps=2, layers=3).events)
    sc = build_scenario(steps=2, layers=3, unfused_collective=True)
    compute = sc.events.filter(
        (pl.col("kind") == "kernel") & (pl.col("stream") == COMPUTE_STREAM)
    ).with_columns(next_name=pl.col("name").shift(-1))
    after = compute.filter(pl.col("name") == KERNELS["o_proj"].name)["next_name"]
    assert after.to_list() == [nccl] * 6
    assert sc.truth["unfused_collective_count"] == 6
    assert KERNELS["ar_fused"].name not in _names(sc.events)


def test_tiny_scenario_truth_literals() -> None:
    sc = build_scenario(steps=1, layers=1)
    t = sc.truth
    assert t["counts"] == {"api": 35, "memcpy": 2, "memset": 1, "kernel": 20, "sync": 1, "range": 1}
    assert t["api_counts"]["cudaLaunchKernel"] == 20
    assert t["kernels_by_stream"] == {7: 15, 13: 3, 21: 2}
    assert t["kernel_ns"] == 453_735
    assert t["memcpy_ns"] == 3_533 and t["memset_ns"] == 1_414
    assert t["stream_busy_ns"] == {7: 344_584, 13: 43_753, 21: 70_345}
    assert t["device_busy_ns"] == 416_130
    assert t["device_span"] == (1_005_437, 1_451_703)
    assert t["device_idle_ns"] == 30_136
    assert t["pair_overlap_ns"] == {"7-13": 6_315, "7-21": 0, "13-21": 36_237}
    assert t["comm_count"] == 3 and t["comm_ns"] == 83_349
    assert t["comm_overlap_ns"] == 36_237 and t["exposed_comm_ns"] == 47_112
    assert t["compute_busy_ns"] == 364_071
    assert t["step_ranges"] == [(1_000_000, 1_454_941)]
    assert t["step_windows"] == [(1_005_437, 1_451_703)]  # work rows: the sync row is not work
    assert t["corr_range"] == (1_001, 1_035)

    # The same numbers, recomputed from the rows with other code.
    ev = sc.events
    kernels = ev.filter(pl.col("kind") == "kernel")
    work = ev.filter(pl.col("kind").is_in(WORK_KINDS))
    assert kernels["dur"].sum() == 453_735
    busy = {s: work.filter(pl.col("stream") == s) for s in STREAMS}
    for stream, rows in busy.items():  # each stream is serial: its busy time is a plain sum
        assert _union_ns(rows) == rows["dur"].sum() == t["stream_busy_ns"][stream]
    assert _union_ns(work) == 416_130
    assert _overlap_ns(_intervals(busy[7]), _intervals(busy[13])) == 6_315
    assert _overlap_ns(_intervals(busy[13]), _intervals(busy[21])) == 36_237
    comm = kernels.filter(pl.col("name").is_in(list(COMM_NAMES)))
    compute = kernels.filter(~pl.col("name").is_in(list(COMM_NAMES)))
    both = _union_ns(comm) + _union_ns(compute) - _union_ns(pl.concat([comm, compute]))
    assert (comm["dur"].sum(), both, _union_ns(compute)) == (83_349, 36_237, 364_071)
    step = ev.filter(pl.col("kind") == "range").row(0, named=True)
    assert (step["ts"], step["ts"] + step["dur"]) == (1_000_000, 1_454_941)
    device = ev.filter(pl.col("kind").is_in(DEVICE_KINDS))
    assert (device["ts"].min(), (device["ts"] + device["dur"]).max()) == (1_005_437, 1_453_375)


def test_bad_knobs_are_refused() -> None:
    with pytest.raises(ValueError):
        build_scenario(steps=0)
    with pytest.raises(ValueError):
        build_scenario(idle_bubble_ns=-1)
    for knobs in ({"gemm_scale": 0}, {"jitter": 1.0}, {"jitter": -0.1}):
        with pytest.raises(ValueError):
            build_scenario(**knobs)


def _durations(**knobs: float) -> dict[str, list[int]]:
    """Device durations per role, in launch order."""
    out: dict[str, list[int]] = {}
    for start, end, _, _, role, _ in build_scenario(steps=2, layers=2, **knobs).truth["work"]:
        out.setdefault(role, []).append(end - start)
    return out


def test_gemm_scale_stretches_the_dense_gemms_only() -> None:
    plain, slow = _durations(), _durations(gemm_scale=1.1)
    assert set(plain) == set(slow) and set(GEMM_ROLES) <= set(plain)
    for role, durations in plain.items():
        want = [round(d * 1.1) for d in durations] if role in GEMM_ROLES else durations
        assert slow[role] == want, role


def test_jitter_scales_rows_by_a_run_and_a_row_factor() -> None:
    plain, noisy = _durations(), _durations(jitter=0.03)
    ratios = [n / p for role in plain for p, n in zip(plain[role], noisy[role])]
    assert all(0.97**2 - 1e-3 <= r <= 1.03**2 + 1e-3 for r in ratios)
    assert len({round(r, 4) for r in ratios}) > len(ratios) // 2  # a fresh factor per row
    assert _durations(jitter=0.03) == noisy  # deterministic for a seed


# -- the nsys SQLite writer -------------------------------------------------------------------
def test_writer_tables_rows_and_ids(tmp_path: Path) -> None:
    sc = build_scenario(steps=2, layers=1, device=3, pid=77_777, tid=77_781, **ALL_FAULTS)
    path = write_nsys_sqlite(sc.events, tmp_path / "t.sqlite")
    counts = sc.truth["counts"]
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:

        def one(sql: str) -> object:
            return db.execute(sql).fetchone()[0]

        expected = {
            "CUPTI_ACTIVITY_KIND_KERNEL": counts["kernel"],
            "CUPTI_ACTIVITY_KIND_RUNTIME": counts["api"],
            "CUPTI_ACTIVITY_KIND_MEMCPY": counts["memcpy"],
            "CUPTI_ACTIVITY_KIND_MEMSET": counts["memset"],
            "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION": counts["sync"],
            "NVTX_EVENTS": counts["range"],
            "TARGET_INFO_GPU": 1,
            "TARGET_INFO_CUDA_STREAM": 3,
            "TARGET_INFO_CUDA_CONTEXT_INFO": 1,
            "PROCESSES": 1,
            "ThreadNames": 1,
            "TARGET_INFO_SESSION_START_TIME": 1,
        }
        for table, n in expected.items():
            assert one(f'SELECT count(*) FROM "{table}"') == n, table
        assert one("SELECT value FROM META_DATA_EXPORT WHERE name='EXPORT_SCHEMA_VERSION'") == (
            "3.16.1"
        )
        assert one("SELECT count(*) FROM sqlite_master WHERE name LIKE 'ENUM_%'") >= 6
        assert one("SELECT id FROM TARGET_INFO_GPU") == 3
        ids = db.execute(
            "SELECT DISTINCT globalTid >> 48, (globalTid >> 24) & 16777215, globalTid & 16777215"
            " FROM CUPTI_ACTIVITY_KIND_RUNTIME"
        ).fetchall()
        assert ids == [(1, 77_777, 77_781)]
        pids = db.execute(
            "SELECT DISTINCT (globalPid >> 24) & 16777215, globalPid & 16777215, deviceId"
            " FROM CUPTI_ACTIVITY_KIND_KERNEL"
        ).fetchall()
        assert pids == [(77_777, 0, 3)]
        unmatched = one(
            "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k LEFT JOIN"
            " CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = k.correlationId"
            " AND r.globalTid >> 24 = k.globalPid >> 24 WHERE r.start IS NULL OR r.start >= k.start"
        )
        assert unmatched == 0
        apis = dict(
            db.execute(
                "SELECT s.value, count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME r"
                " JOIN StringIds s ON s.id = r.nameId GROUP BY 1"
            ).fetchall()
        )
        assert apis["cudaLaunchKernel_v7000"] == counts["kernel"]
        assert apis["cudaStreamSynchronize_v3020"] == counts["sync"]
        kernel_names = db.execute(
            "SELECT d.value, s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds d"
            " ON d.id = k.demangledName JOIN StringIds s ON s.id = k.shortName ORDER BY k.start"
        ).fetchall()
        rows = sc.events.filter(pl.col("kind") == "kernel")["name"].to_list()
        assert [d for d, _ in kernel_names] == rows
        assert all(s == short_name(d) and "(" not in s for d, s in kernel_names)
        copies = db.execute(
            "SELECT copyKind, srcKind, dstKind, bytes FROM CUPTI_ACTIVITY_KIND_MEMCPY"
            " ORDER BY start"
        ).fetchall()
        assert copies[:2] == [(1, 1, 2, 512), (2, 2, 1, 512)]
        assert db.execute(
            "SELECT DISTINCT syncType, eventId, streamId FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"
        ).fetchall() == [(3, 4294967295, 7)]
        assert db.execute("SELECT DISTINCT eventType FROM NVTX_EVENTS").fetchall() == [(59,)]


def test_writer_is_deterministic_and_does_not_overwrite(tmp_path: Path) -> None:
    events = build_scenario(steps=1, layers=1).events
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a = write_nsys_sqlite(events, tmp_path / "a" / "x.sqlite")
    b = write_nsys_sqlite(events, tmp_path / "b" / "x.sqlite")
    assert a.read_bytes() == b.read_bytes()
    with pytest.raises(FileExistsError):
        write_nsys_sqlite(events, a)
    write_nsys_sqlite(events, a, overwrite=True)
    assert [p.name for p in (tmp_path / "a").iterdir()] == ["x.sqlite"]


def test_writer_refuses_kinds_nsys_cannot_hold(tmp_path: Path) -> None:
    events = build_scenario(steps=1, layers=1).events.with_columns(kind=pl.lit("op"))
    with pytest.raises(ValueError, match="op"):
        write_nsys_sqlite(events, tmp_path / "x.sqlite")
    assert not (tmp_path / "x.sqlite").exists()
