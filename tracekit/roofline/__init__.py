"""How far from the hardware: FLOPs and minimum bytes of every device row whose operator's
shapes are in the trace (:mod:`.formulas`), the device's peaks (:mod:`.devices`), and the
roofline per row, per operator and per step (:mod:`.bounds`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import polars as pl

from tracekit.roofline.bounds import operators, step_roofline, with_bounds
from tracekit.roofline.devices import Device, devices_for
from tracekit.roofline.rows import shaped_rows

# the per-row columns kept for the rules and reports
ROW_COLUMNS = (
    "rank", "device", "step", "stream", "name", "dur", "category", "op", "shapes", "family",
    "dtype", "flops", "bytes", "exact", "compute_ns", "memory_ns", "bound_ns",
)  # fmt: skip
STEP_COLUMNS = ("roofline_ns", "shaped_share", "bound")


@dataclass
class Roofline:
    """The roofline of one timeline: ``rows`` (the device rows with shapes and work, with
    their bound), ``operators`` (per operator, shapes and device; :func:`.bounds.operators`),
    ``steps`` (per step :data:`STEP_COLUMNS`), the ``devices`` matched per device index and
    ``warnings`` (devices with no entry, no shapes at all)."""

    rows: pl.DataFrame = field(default_factory=pl.DataFrame)
    operators: pl.DataFrame = field(default_factory=pl.DataFrame)
    steps: pl.DataFrame = field(default_factory=pl.DataFrame)
    devices: dict[int, Device] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    @property
    def shaped(self) -> bool:
        """Whether any device row has work from its shapes."""
        return self.rows.height > 0

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready records (:func:`.export.roofline_record`): the devices with their
        figures and roofs, warnings, per-family totals and the operators by headroom
        (capped, the count left out said)."""
        from tracekit.roofline.export import roofline_record

        return roofline_record(self.operators, self.devices, self.warnings)


def roofline(
    rows: pl.DataFrame, work: pl.DataFrame, meta: dict[str, Any], device: str | None = None
) -> Roofline:
    """The :class:`Roofline` of a timeline's classified ``rows`` and placed ``work`` rows;
    ``device`` names a table entry (or a TOML file of entries) for every device instead of
    matching their names."""
    shaped = shaped_rows(rows, work)
    has_work = shaped.filter(pl.col("flops").is_not_null())
    if has_work.height == 0:
        return Roofline()
    devices, warnings = devices_for(meta, device)
    bounded = with_bounds(shaped, devices)
    steps = step_roofline(bounded)
    bounded = bounded.filter(pl.col("flops").is_not_null())
    kept = [c for c in ROW_COLUMNS if c in bounded.columns]
    return Roofline(bounded.select(kept), operators(bounded), steps, devices, warnings)


def with_roofline(metrics: pl.DataFrame, roof: Roofline) -> pl.DataFrame:
    """The step metrics with :data:`STEP_COLUMNS`: null roofline and bound, and a zero
    shaped share, for the steps with no shaped rows."""
    key = ["rank", "device", "step"]
    if roof.steps.height:
        out = metrics.join(roof.steps, on=key, how="left", maintain_order="left")
    else:
        out = metrics.with_columns(
            roofline_ns=pl.lit(None, pl.Int64),
            shaped_share=pl.lit(None, pl.Float64),
            bound=pl.lit(None, pl.String),
        )
    return out.with_columns(pl.col("shaped_share").fill_null(0.0))
