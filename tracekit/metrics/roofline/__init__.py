"""How far from the hardware: FLOPs and minimum bytes of every device row whose operator's
shapes are in the trace (:mod:`.formulas`), the device's peaks (:mod:`.devices`), and the
roofline per row, per operator and per step (:mod:`.bounds`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import polars as pl

from tracekit.metrics.columns import ROOFLINE_COLUMNS
from tracekit.metrics.roofline.bounds import bounded_rows, operators, step_roofline
from tracekit.metrics.roofline.devices import Device, devices_for
from tracekit.metrics.roofline.export import roofline_record
from tracekit.metrics.roofline.rows import COMBO_SCHEMA, shaped

STEP_COLUMNS = ROOFLINE_COLUMNS
# what every shaped row carries from its combination in :attr:`Roofline.rows`
ROW_ATTRIBUTES = ("op", "shapes", "family", "dtype", "matrix", "exact")


@dataclass
class Roofline:
    """The roofline of one timeline: ``bounded`` (per device row with work from its shapes:
    its place, time, ``combo`` and its share of the combination's FLOPs, bytes and bounds;
    :func:`.bounds.bounded_rows`), ``combos`` (per distinct operator and shapes: op, shapes
    as text, family, dtype, exact …; :func:`.rows.shaped`), ``operators`` (per operator,
    shapes and device; :func:`.bounds.operators`), ``steps`` (per step
    :data:`STEP_COLUMNS`), the ``devices`` matched per device index and ``warnings``
    (devices with no entry)."""

    bounded: pl.DataFrame = field(default_factory=pl.DataFrame)
    combos: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=COMBO_SCHEMA))
    operators: pl.DataFrame = field(default_factory=pl.DataFrame)
    steps: pl.DataFrame = field(default_factory=pl.DataFrame)
    devices: dict[int, Device] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    @property
    def shaped(self) -> bool:
        """Whether any device row has work from its shapes."""
        return self.bounded.height > 0

    @cached_property
    def rows(self) -> pl.DataFrame:
        """``bounded`` with each row's :data:`ROW_ATTRIBUTES` (made on first use: at millions
        of rows the texts cost more than everything else here)."""
        if not self.shaped:
            return pl.DataFrame()
        attributes = self.combos.select("combo", *ROW_ATTRIBUTES)
        return self.bounded.join(attributes, on="combo", how="left", maintain_order="left")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready records (:func:`.export.roofline_record`): the devices with their
        figures and roofs, warnings, per-family totals and the operators by headroom
        (capped, the count left out said)."""
        return roofline_record(self.operators, self.devices, self.warnings)


def roofline(
    rows: pl.DataFrame, work: pl.DataFrame, meta: dict[str, Any], device: str | None = None
) -> Roofline:
    """The :class:`Roofline` of a timeline's classified ``rows`` and placed ``work`` rows;
    ``device`` names a table entry (or a TOML file of entries) for every device instead of
    matching their names."""
    hits, combos = shaped(rows, work)
    if hits.height == 0:
        return Roofline()
    devices, warnings = devices_for(meta, device)
    bounded = bounded_rows(hits, combos, work, devices)
    steps = step_roofline(bounded, work)
    return Roofline(bounded, combos, operators(bounded, combos), steps, devices, warnings)


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
