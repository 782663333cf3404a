"""The device table (tracekit/data/devices.toml) and how a trace's devices are matched to it:
every entry cited and consistent, the names real traces write matched to the right part,
overrides, and the dtype fallbacks of peak_tflops."""

from __future__ import annotations

import re
import sys
from importlib import resources

import pytest

import tracekit
from tests.conftest import one_line, real_file
from tracekit.errors import TraceError
from tracekit.metrics.roofline.devices import ANY, Device, devices_for, known_devices

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

DTYPES = {"fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "fp6", "fp4", "int8", "int4"}
GIB = 2**30
BY_ID = {d.id: d for d in known_devices()}

# What every real sample's trace writes in meta["devices"] (collected with tracekit.load, one
# sample at a time) and the entry each must match; None: no entry, the trace gets a warning
# naming the device; "doubt": matched, with a warning saying what else it could be.
REAL = [
    ("nvidia", "hta-a100-80gb-world16-multistream/rank0.json.gz",
     "NVIDIA A100-SXM4-80GB", 8, "a100-sxm-80gb", None),
    ("nvidia", "hta-alexnet-a100/benchmark_result_2869224_1695835535_trace.json.gz",
     "NVIDIA A100-PG509-200", 8, "a100-sxm-40gb", None),
    ("nvidia", "hta-cupti-profiler-range/benchmark_result_924719_1679055439_trace.json.gz",
     "NVIDIA A100-PG509-200", 8, "a100-sxm-40gb", None),
    ("nvidia", "hta-event-sync-multistream/event_sync_trace.json.gz",
     "NVIDIA A100-PG509-200", 8, "a100-sxm-40gb", None),
    ("nvidia", "hta-nccl-parser-a100-2rank/nccl_data.json.gz",
     "NVIDIA A100-PG509-200", 8, "a100-sxm-40gb", None),
    ("nvidia", "hta-trace-diff-a100-world8/control.json.gz",
     "NVIDIA A100-PG509-200", 8, "a100-sxm-40gb", None),
    ("nvidia", "hta-triton-a100/triton_example.json.gz",
     "NVIDIA A100-PG509-200", 8, "a100-sxm-40gb", None),
    ("nvidia", "pipit-saxpy-mpi-cuda-nsys/saxpy-mpi-cuda_nsys_perlmutter0.sqlite",
     "NVIDIA A100-SXM4-40GB", 1, "a100-sxm-40gb", None),
    ("nvidia", "hta-v100-ddp-allreduce/df_index_resolver.json.gz",
     "Tesla V100-SXM2-32GB", 2, "v100-sxm2", None),
    ("nvidia", "hta-v100-ns-resolution/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
     "Tesla V100-SXM2-32GB", 8, "v100-sxm2", None),
    ("nvidia", "kineto-tbplugin-resnet50-v100-legacy/worker0.1623143089861.pt.trace.json.gz",
     "Tesla V100-DGXS-32GB", 4, "v100-sxm2", None),
    ("nvidia", "nvfuser-nsys-sqlite-h100-eos/report1.sqlite",
     "NVIDIA H100 80GB HBM3", 8, "h100-sxm", None),
    ("nvidia", "tracelens-h100-hf-qwen1.5-0.5b/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz",
     "NVIDIA H100 80GB HBM3", 1, "h100-sxm", None),
    ("nvidia", "nvfuser-nsys-sqlite-h200/report1.sqlite", "NVIDIA H200", 1, "h200-sxm", None),
    ("nvidia", "hta-gp100-gpu-user-annotation/step_based_trace_2543932.json.gz",
     "Quadro GP100", 2, None, None),
    ("nvidia", "llama3-inference-nsys-sqlite-rtx4060ti/demo.sqlite",
     "NVIDIA GeForce RTX 4060 Ti", 1, None, None),
    ("nvidia", "llama3-inference-nsys-sqlite-rtx4060ti/real_inference_simulation.sqlite",
     "NVIDIA GeForce RTX 4060 Ti", 1, None, None),
    ("amd", "kineto_mi300x_hf_qwen1.5_0.5b_eager/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz",
     "AMD Instinct MI300X VF", 1, "mi300x", None),
    ("amd", "kineto_mi300x_sglang_qwen3_8b_decode/sglang_Qwen3-8B_decode.json.gz",
     "AMD Instinct MI300X", 1, "mi300x", None),
    ("amd", "kineto_mi300x_sglang_qwen3_8b_prefill/sglang_Qwen3-8B_prefilldecode.json.gz",
     "AMD Instinct MI300X", 1, "mi300x", None),
    ("amd", "rocpd_db_mi300x_ck_batched_gemm_hiptrace/28_results.db",
     "AMD Instinct MI300X", 8, "mi300x", None),
    # blank name: gfx94x (compute capability 9.4), 304 CUs, 192 GiB -> MI300X, not MI325X
    ("amd", "kineto_rocm_vllm_moe_prefilldecode_piecewise/graph_execution.json.gz",
     None, 8, "mi300x", None),
    ("amd", "rocprof_v1_hiptrace_hip_vecadd_small/results.db",
     "AMD Instinct MI300A", 4, "mi300a", None),
    ("amd", "rocprof_v1_hiptrace_hip_vecadd_small/results.json",
     "AMD Instinct MI300A", 4, "mi300a", None),
    ("amd", "rocprof_v1_hiptrace_rocmblogs_pytorch_vecadd/results.db",
     "AMD Instinct MI210", 8, "mi210", None),
    ("amd", "rocprof_v1_hiptrace_rocmblogs_pytorch_vecadd/results.json",
     "AMD Instinct MI210", 8, "mi210", None),
    ("amd", "kineto_mi350x_rocprofsdk_backend_aorta/"
     "smci350-zts-gtu-c6-25_200691.1758927066581847260.pt.trace.json",
     "AMD Instinct MI350X", 8, "mi350x", None),
    ("amd", "rocprofv3_agent_info_mi350x_flydsl/big_out_agent_info.csv",
     "AMD Instinct MI350X", 8, "mi350x", None),
    ("amd", "rocprofv3_json_mi350x_fsdp_train_tracelens/908_results.json.gz",
     "AMD Instinct MI350X", 8, "mi350x", None),
    # generic ROCm name, gfx90a with 104 CUs and 64 GiB: an MI250 GCD or an MI210
    ("amd", "kineto_mi250_hta_minitoy/mi250_minitoy_train_ROCm6_2_kineto.json.gz",
     "AMD Radeon Graphics", 4, "mi250", "could be any of mi250, mi210"),
    # gfx1151 (Radeon 8060S) with neither name nor CU count: nothing to match
    ("amd", "rocprofv3_csv_gfx1151_llamacpp_TRIMMED/decode_kernel_trace.csv",
     None, 1, None, None),
    ("ascend", "msinsight_torchnpu_910B_2rank/db/level1",
     "Ascend910B", 2, "910b2", "names no variant"),
    ("ascend", "msinsight_server_testdata/full_db/msprof_0.db",
     "Ascend910B", 1, "910b2", "names no variant"),
    ("ascend", "vllm_ascend_tmp_msprof_groupedmatmul_910B",
     "Ascend910B", 1, "910b2", "names no variant"),
    ("ascend", "mindinsight_msprof_PROF_2dev", "Ascend910", 1, "910", None),
    # the text export of the same torch_npu run names no chip
    ("ascend", "msinsight_torchnpu_910B_2rank/text/level1", None, 2, None, None),
]  # fmt: skip

# Names as nvidia-smi / rocm-smi / npu-smi (and so the profilers) write them, for the parts
# no real sample here has.
SMI = [
    ({"name": "NVIDIA A100 80GB PCIe", "memory": 80 * GIB}, "a100-pcie-80gb"),
    ({"name": "NVIDIA A100-PCIE-40GB", "memory": 40 * GIB}, "a100-pcie-40gb"),
    ({"name": "NVIDIA H100 PCIe", "cores": 114}, "h100-pcie"),
    ({"name": "NVIDIA H100 NVL"}, "h100-nvl"),
    ({"name": "NVIDIA H800"}, "h800-sxm"),
    ({"name": "NVIDIA H200 NVL"}, "h200-nvl"),
    ({"name": "NVIDIA H20", "cores": 78}, "h20"),
    ({"name": "NVIDIA GH200 480GB", "memory": 95 * GIB}, "gh200"),
    ({"name": "NVIDIA GH200 144G HBM3e", "memory": 143 * GIB}, "gh200-144gb"),
    ({"name": "NVIDIA B200"}, "b200"),
    ({"name": "NVIDIA GB200"}, "gb200"),
    ({"name": "NVIDIA B300 SXM6 AC"}, "b300"),
    ({"name": "NVIDIA GB300"}, "gb300"),
    ({"name": "NVIDIA L40S"}, "l40s"),
    ({"name": "NVIDIA L4"}, "l4"),
    ({"name": "Tesla V100-PCIE-16GB"}, "v100-pcie"),
    ({"name": "AMD Instinct MI325X"}, "mi325x"),
    ({"name": "AMD Instinct MI355X"}, "mi355x"),
    ({"name": "AMD Instinct MI250X / MI250", "cores": 110}, "mi250x"),
    ({"name": "AMD Instinct MI250X / MI250", "cores": 104}, "mi250"),
    ({"name": "Ascend910B1"}, "910b1"),
    ({"name": "Ascend910B2C"}, "910b2"),
    ({"name": "Ascend910B3"}, "910b3"),
    ({"name": "Ascend910B4-1"}, "910b4"),
    ({"name": "Ascend910_9391"}, "910c"),
    ({"name": "Ascend910A"}, "910"),
    # blank names: arch (from the compute capability) + cores, then memory
    ({"vendor": "AMD", "cores": 304, "memory": 256 * GIB, "compute_capability": "9.4"},
     "mi325x"),
    ({"vendor": "AMD", "cores": 228, "compute_capability": "9.4"}, "mi300a"),
    ({"vendor": "AMD", "cores": 110, "arch": "gfx90a"}, "mi250x"),
    # a family name with the cores and memory that single out a variant
    ({"name": "Ascend910B", "cores": 20, "memory": 32 * GIB}, "910b4"),
]  # fmt: skip


def _links() -> dict[str, dict]:
    text = resources.files("tracekit.data").joinpath("links.toml").read_text("utf-8")
    return tomllib.loads(text)["links"]


def _raw_entries() -> list[dict]:
    text = resources.files("tracekit.data").joinpath("devices.toml").read_text("utf-8")
    return tomllib.loads(text)["devices"]


def _meta(*devices: dict) -> dict:
    return {"devices": [{"index": i, **d} for i, d in enumerate(devices)]}


# -- the table --------------------------------------------------------------------------------


def test_every_entry_is_cited_and_complete() -> None:
    assert len(BY_ID) == len(known_devices()) >= 30  # ids are unique
    for d in known_devices():
        urls = d.source.split()
        assert urls and all(u.startswith("https://") for u in urls), d.id
        assert d.vendor in ("nvidia", "amd", "ascend"), d.id
        assert d.hbm_gbps > 0 and d.vector_tflops > 0, d.id
        assert set(d.tflops) <= DTYPES and set(d.sparse_tflops) <= DTYPES, d.id
        assert "fp16" in d.tflops, d.id  # every part has a half-precision matrix peak
        assert re.compile(d.match), d.id


def test_dense_is_at_most_sparse_and_bf16_equals_fp16() -> None:
    for d in known_devices():
        assert set(d.sparse_tflops) <= set(d.tflops), d.id  # a sparse figure has its dense one
        for dtype, sparse in d.sparse_tflops.items():
            # 2:4 sparsity at most doubles a peak (NVIDIA's own rounding: L40S 362.05 | 733)
            assert d.tflops[dtype] <= sparse <= 2.0 * 1.02 * d.tflops[dtype], (d.id, dtype)
        if "bf16" in d.tflops:  # every vendor here gives BF16 and FP16 the same rate
            assert d.tflops["bf16"] == d.tflops["fp16"], d.id
        # the vector FP32 peak never exceeds the half-precision matrix peak
        assert d.vector_tflops < d.tflops["fp16"], d.id


def test_key_figures() -> None:
    """Spot checks against the datasheets (dense; sparse where the vendor gives it)."""
    assert BY_ID["h100-sxm"].tflops["bf16"] == 989.5  # 1979 'with sparsity' / 2
    assert BY_ID["h100-sxm"].sparse_tflops["fp8"] == 3958
    assert BY_ID["h100-sxm"].hbm_gbps == 3350
    assert BY_ID["h200-sxm"].hbm_gbps == 4800
    assert BY_ID["a100-sxm-80gb"].hbm_gbps == 2039 and BY_ID["a100-sxm-40gb"].hbm_gbps == 1555
    assert BY_ID["mi300x"].tflops["fp8"] == 2614.9 and BY_ID["mi300x"].hbm_gbps == 5300
    assert BY_ID["mi355x"].tflops["fp4"] == 10066.3
    assert BY_ID["b200"].tflops["fp4"] == 9000 and BY_ID["b200"].sparse_tflops["fp4"] == 18000
    assert BY_ID["gb300"].tflops["fp4"] == 15000
    assert BY_ID["910b3"].tflops["fp16"] == 313
    assert BY_ID["mi250x"].tflops["bf16"] == 383 / 2  # one GCD of the OAM module


def test_links_reuse_links_toml() -> None:
    links = _links()
    for entry in _raw_entries():
        if "link" in entry:
            link = links[entry["link"]]
            assert entry["link_gbps"] == pytest.approx(link["gbps"] * entry["link_count"])
        else:
            assert "link_count" not in entry, entry["id"]
            if "link_gbps" in entry:  # a link links.toml lacks: the note says where from
                assert "GB/s" in entry["note"] or "UB" in entry["note"], entry["id"]
    assert BY_ID["h100-sxm"].link_gbps == 450 and BY_ID["mi300x"].link_gbps == 448
    assert BY_ID["910b2"].link_gbps == 392 and BY_ID["l40s"].link_gbps is None


# -- matching -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("vendor", "rel", "name", "count", "want", "doubt"),
    REAL,
    ids=[f"{v}/{r}" for v, r, *_ in REAL],
)
def test_real_samples_match_their_device(
    vendor: str, rel: str, name: str | None, count: int, want: str | None, doubt: str | None
) -> None:
    meta = tracekit.load(real_file(vendor, rel)).meta
    devices = meta["devices"]
    assert len(devices) == count
    assert {d.get("name") for d in devices} == {name}
    found, warnings = devices_for(meta)
    indices = [d["index"] for d in devices]
    if want is None:
        assert found == {}
        assert len(warnings) == 1 and "matches no entry" in warnings[0]
        assert (name or "unnamed") in warnings[0]
        assert all(str(i) in warnings[0] for i in indices)
        return
    assert sorted(found) == sorted(indices)
    assert {d.id for d in found.values()} == {want}
    if doubt is None:
        assert warnings == []
    else:
        assert len(warnings) == 1 and doubt in warnings[0] and name in warnings[0]


@pytest.mark.parametrize(("device", "want"), SMI, ids=[w for _, w in SMI])
def test_names_the_tools_write(device: dict, want: str) -> None:
    found, warnings = devices_for(_meta(device))
    assert found[0].id == want
    assert warnings == []


def test_doubtful_matches_warn_and_take_the_highest_figures() -> None:
    # a blank H200 (real nsys figures): H200 SXM and NVL share arch, SMs and memory
    h200 = {"vendor": "NVIDIA", "cores": 132, "memory": 150137864192, "compute_capability": "9.0"}
    found, warnings = devices_for(_meta(h200))
    assert found[0].id == "h200-sxm"
    assert warnings == [
        "device 0 (unnamed NVIDIA, arch sm_90, 132 cores) could be any of h200-sxm, h200-nvl: "
        "using h200-sxm's figures (the highest); pass --device NAME to choose"
    ]
    # 'Ascend910B' with 20 AI cores and no memory size: a 910B3 or 910B4
    found, warnings = devices_for(_meta({"name": "Ascend910B", "cores": 20}))
    assert found[0].id == "910b3"
    assert "names no variant (910b3, 910b4)" in warnings[0]


def test_unknown_devices_are_named_once_per_name() -> None:
    meta = _meta(
        {"name": "NVIDIA GeForce RTX 4060 Ti"},
        {"name": "NVIDIA GeForce RTX 4060 Ti"},
        {"name": "AMD Instinct MI300X"},
    )
    found, warnings = devices_for(meta)
    assert {i: d.id for i, d in found.items()} == {2: "mi300x"}
    assert warnings == [
        "devices 0, 1 'NVIDIA GeForce RTX 4060 Ti' matches no entry of devices.toml: "
        "no roofline; pass --device NAME"
    ]
    assert devices_for({}) == ({}, [])


# -- overrides ----------------------------------------------------------------------------------


def test_override_by_id_or_name() -> None:
    meta = _meta({"name": "NVIDIA GeForce RTX 4060 Ti"}, {"name": "AMD Instinct MI300X"})
    found, warnings = devices_for(meta, "h100-sxm")
    assert {i: d.id for i, d in found.items()} == {0: "h100-sxm", 1: "h100-sxm"}
    assert warnings == []
    found, _ = devices_for(meta, "amd instinct mi355x")  # the entry's name, any case
    assert {d.id for d in found.values()} == {"mi355x"}
    found, _ = devices_for({}, "910b3")  # no device list: ANY stands for every device
    assert list(found) == [ANY] and found[ANY].tflops["fp16"] == 313


def test_override_by_user_toml(tmp_path) -> None:
    one = tmp_path / "mine.toml"
    one.write_text(
        '[[devices]]\nid = "lab-x1"\nname = "Lab X1"\nvendor = "nvidia"\nhbm_gbps = 1234\n'
        "vector_tflops = 50\ntflops = { bf16 = 400, fp16 = 400, fp8 = 800 }\n"
    )
    found, warnings = devices_for(_meta({"name": "Foo"}, {"name": "Bar"}), str(one))
    assert {d.id for d in found.values()} == {"lab-x1"} and sorted(found) == [0, 1]
    assert found[0].hbm_gbps == 1234 and found[0].peak_tflops("fp4", True) == 800
    assert found[0].link_gbps is None and warnings == []
    two = tmp_path / "two.toml"
    two.write_text(
        one.read_text() + 'match = "X1"\n'
        '[[devices]]\nid = "lab-y2"\nname = "Lab Y2"\nvendor = "amd"\nhbm_gbps = 99\n'
        'match = "Y2"\nvector_tflops = 5\ntflops = { fp16 = 10 }\n'
    )
    found, warnings = devices_for(_meta({"name": "Lab Y2"}, {"name": "Zed"}), str(two))
    assert {i: d.id for i, d in found.items()} == {0: "lab-y2"}
    assert warnings == [
        f"device 1 'Zed' matches no entry of {two}: no roofline; pass --device NAME"
    ]


def test_unknown_override_lists_the_known_ids(tmp_path) -> None:
    with pytest.raises(TraceError) as exc:
        devices_for(_meta({"name": "x"}), "h900")
    one_line(exc, "'h900'", "h100-sxm", "mi300x", "910b3", "gb300")
    with pytest.raises(TraceError) as exc:
        devices_for({}, str(tmp_path / "missing.toml"))
    one_line(exc, "missing.toml", "no such file")
    bad = tmp_path / "bad.toml"
    bad.write_text('[[devices]]\nid = "a"\nname = "A"\nvendor = "nvidia"\ntflops = {}\n')
    with pytest.raises(TraceError) as exc:
        devices_for({}, str(bad))
    one_line(exc, "bad.toml", "hbm_gbps", "vector_tflops")
    bad.write_text("[[devices]\n")
    with pytest.raises(TraceError) as exc:
        devices_for({}, str(bad))
    one_line(exc, "bad.toml", "not valid TOML")


# -- peak_tflops --------------------------------------------------------------------------------


def test_peak_tflops_and_its_fallbacks() -> None:
    a100 = BY_ID["a100-sxm-80gb"]
    assert a100.peak_tflops("bf16", True) == 312
    assert a100.peak_tflops("fp8", True) == 312  # no FP8 units: the bf16/fp16 rate
    assert a100.peak_tflops("fp4", True) == 312
    assert a100.peak_tflops("tf32", True) == 156
    assert a100.peak_tflops("fp32", True) == 19.5  # no FP32 matrix figure: the vector peak
    assert a100.peak_tflops("bf16", False) == 19.5  # off the matrix units: the vector peak
    assert a100.peak_tflops("fp64", True) == 19.5  # FP64 Tensor Core
    h100 = BY_ID["h100-sxm"]
    assert h100.peak_tflops("fp4", True) == 1979  # fp4 -> fp8
    assert h100.peak_tflops("int4", True) == 1979  # int4 -> int8
    assert BY_ID["mi355x"].peak_tflops("tf32", True) == 157.3  # no TF32: the fp32 matrix figure
    assert BY_ID["b200"].peak_tflops("fp6", True) == 4500
    assert BY_ID["mi300x"].peak_tflops("fp6", True) == 2614.9  # fp6 -> fp8
    v100 = BY_ID["v100-sxm2"]
    assert v100.peak_tflops("bf16", True) == 15.7  # no BF16 tensor cores: the vector peak
    assert v100.peak_tflops("fp64", True) is None  # no FP64 matrix figure, no stand-in
    assert BY_ID["910"].peak_tflops("bf16", True) == 8  # no BF16 on the 910: the vector peak
    assert BY_ID["910b3"].peak_tflops("fp8", True) == 313  # no FP8 on the 910B: fp16
    assert BY_ID["l40s"].peak_tflops("int32", True) is None  # not a math dtype of the table


def test_device_is_frozen() -> None:
    with pytest.raises(AttributeError):
        BY_ID["h100-sxm"].hbm_gbps = 1  # type: ignore[misc]
    assert isinstance(BY_ID["h100-sxm"], Device)


def test_every_peak_is_in_tflops_not_pflops_or_tops_per_mille() -> None:
    """Every figure is TFLOP/s (TOP/s for int8): none below 1 (B300's INT8, cut to 187.5 TOPS
    dense, is the lowest matrix figure of a current part), none above 25,000 (GB300's FP4
    sparse is 20,000)."""
    for d in known_devices():
        for table in (d.tflops, d.sparse_tflops):
            for dtype, value in table.items():
                assert 1 <= value <= 25_000, (d.id, dtype, value)
    assert BY_ID["b300"].tflops["int8"] == 187.5 and BY_ID["gb300"].tflops["int8"] == 160
