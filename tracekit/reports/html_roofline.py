"""The roofline chart's part of the HTML report payload (``templates/report.js`` draws it).

Per trace with shapes: one point per operator, shapes and device of the roofline (the first
:data:`tracekit.metrics.roofline.export.MAX_OPERATORS` by headroom) with its arithmetic intensity
(FLOP/byte) and achieved TFLOP/s, drawn log-log; the roofs of each device table entry its
operators ran on (the HBM bandwidth slope and one flat roof per compute peak the operators'
bounds used); the roofline's warnings. Operators without FLOPs (copies) or without time have
no place on log axes: counted, not drawn. Names (op, shapes, kernels) stay raw here: the page
writes them as text or entity-escaped plotly labels.
"""

from __future__ import annotations

from typing import Any

from tracekit.analysis import Analysis
from tracekit.reports.format import cut

KERNEL_CHARS = 160  # a kernel name in the hover (demangled templates run to thousands)
TOP_ROWS = 10  # operators in the table under the chart
TABLE_COLUMNS = ("op", "shapes", "launches", "time_ns", "tflops", "gbps", "efficiency", "exact",
                 "headroom_ns", "limit")  # fmt: skip
POINT_COLUMNS = ("op", "shapes", "family", "dtype", "device", "launches", "time_ns", "tflops",
                 "gbps", "intensity", "efficiency", "exact", "headroom_ns", "limit",
                 "note")  # fmt: skip


def _parts(record: dict[str, Any], devices: set[int]) -> list[dict[str, Any]]:
    """Per device table entry the operators ran on: its name, HBM GB/s, the device indices
    and its compute roofs (distinct TFLOP/s, with the dtypes held to each)."""
    parts: dict[str, dict[str, Any]] = {}
    for _, device in sorted(record["devices"].items(), key=lambda kv: int(kv[0])):
        served = [i for i in device.get("serves") or [] if i in devices]
        if not served:
            continue
        part = parts.setdefault(
            device["id"],
            {"name": device["name"], "hbm_gbps": device["hbm_gbps"], "devices": [], "roofs": []},
        )
        part["devices"] += served
        for roof in device.get("roofs") or []:
            same = next((r for r in part["roofs"] if r["tflops"] == roof["tflops"]), None)
            unit = "matrix" if roof["matrix"] else "vector"
            if same is None:
                part["roofs"].append({"tflops": roof["tflops"], "dtypes": [], "units": []})
                same = part["roofs"][-1]
            if roof["dtype"] not in same["dtypes"]:
                same["dtypes"].append(roof["dtype"])
            if unit not in same["units"]:
                same["units"].append(unit)
    return list(parts.values())


def roofline_payload(analysis: Analysis) -> dict[str, Any] | None:
    """The chart's data for one trace, or None when no row has work from its shapes."""
    roof = analysis.roofline
    if not roof.shaped:
        return None
    record = roof.to_dict()
    operators = record["operators"]
    drawn = [
        op for op in operators if (op.get("intensity") or 0) > 0 and (op.get("tflops") or 0) > 0
    ]
    points: dict[str, list[Any]] = {c: [op.get(c) for op in drawn] for c in POINT_COLUMNS}
    points["kernels"] = [[cut(k, KERNEL_CHARS) for k in op.get("kernels") or []] for op in drawn]
    return {
        "warnings": record["warnings"],
        "parts": _parts(record, {int(op["device"]) for op in operators}),
        "points": points,
        "top": [{c: op.get(c) for c in TABLE_COLUMNS} for op in operators[:TOP_ROWS]],
        "families": list(dict.fromkeys(op["family"] for op in drawn)),
        "not_drawn": len(operators) - len(drawn),
        "left_out": record["operators_left_out"],
        "operators_total": record["operators_total"],
    }
