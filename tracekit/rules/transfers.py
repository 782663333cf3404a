"""Rule ``transfers``: host <-> device and device <-> device copies, one finding per direction
and call site, with the copy time that compute did not hide as its impact."""

from __future__ import annotations

from typing import Any, ClassVar

import polars as pl

from tracekit.intervals import covered, merge
from tracekit.metrics import DEVICE, IS_COMPUTE, KEY
from tracekit.metrics.steps import clipped
from tracekit.model import Context, Finding
from tracekit.rules.base import Rule
from tracekit.rules.copies import HOST_LINK, attributes, call_sites, device_links, link
from tracekit.rules.patterns import PATTERN_HELP, PATTERN_OPTIONS, findings, step_time, summarise

STATS = (
    "copy_ns",
    "unhidden_share",
    "unhidden_busy_share",
    "copies",
    "gbps",
    "busy_share",
    "step_share",
)
_WHAT = {
    "h2d": "host → device",
    "d2h": "device → host",
    "d2d": "device → device",
    "peer": "device → peer device",
    "h2h": "host → host",
    "unknown": "unknown-direction",
}
RANGES_KEPT = 100  # copy intervals of the worst step kept as evidence


class Transfers(Rule):
    """Host <-> device and device <-> device copies (and Ascend DMA copy tasks): one finding
    per direction and call site whose copy time compute does not hide.

    Every ``memcpy`` row (not a memset, not a hardware task of a collective) is given its
    direction (h2d, d2h, d2d, peer, h2h or unknown: from the copy kind, the name, or the
    name of the launching call), its bytes where the trace records them, and its call site:
    the framework op and API call that launched it (linked by rank and correlation id), else
    its stream. Per step it measures the copies' time, the bytes, the achieved bandwidth
    against the peak of the link crossed (PCIe for host copies, NVLink / Infinity Fabric /
    HCCS for peer copies, from ``tracekit/data/links.toml`` by device name, or the options
    ``link`` / ``peer_link``), and their share of the device's busy time and of the step.
    Where bytes are missing the bandwidth is said unknown, never guessed. Why it matters: a
    copy that no kernel runs beside is time the device spends waiting for data, often
    pageable host memory or a copy on the compute stream that could run beside compute.

    Impact: the copy time not hidden by compute on the same device (the union of the
    pattern's copy intervals minus every compute kernel's interval), summed over its steps,
    ranks and devices. A pattern is reported when that time reaches ``report_share`` of a
    step or ``report_busy_share`` of the device's busy time in one; advice by kind (h2d,
    d2h, d2d, peer, small_copies: many tiny copies, unknown) and vendor.

    Triggers: a 4 MiB host -> device copy from pageable memory on the compute stream, 1 ms
    with no kernel beside it, in each of 4 steps -> one finding ``h2d: aten::copy_ →
    cudaMemcpyAsync``, impact 4 ms, 4.2 GB/s, 13 % of PCIe 4.0 x16. Clean: the same bytes
    copied on a side stream while the step's GEMMs run -> nothing.
    """

    id: ClassVar[str] = "transfers"
    name: ClassVar[str] = "host and device copies"
    options: ClassVar[dict] = {
        "report_share": 0.02,
        "report_busy_share": 0.1,
        "link": "",
        "peer_link": "",
        "small_bytes": 65_536,
        "small_count": 32,
        "small_ns": 10_000,
        **PATTERN_OPTIONS,
    }
    option_help: ClassVar[dict] = {
        "report_share": "report a pattern when its unhidden copy time reaches this share of a step",
        "report_busy_share": "... or this share of the device's busy time in a step",
        "link": "the host link of every device (an id of tracekit/data/links.toml, e.g. pcie5)"
        " instead of the one its device name gives",
        "peer_link": "the link between devices (e.g. nvlink4, xgmi-mi300, hccs-910b) instead "
        "of the one its device name gives",
        "small_bytes": "copies of at most this many bytes on average are small",
        "small_count": "... and a pattern of small copies with this many per step is "
        "small_copies (many tiny copies)",
        "small_ns": "without byte counts: copies of at most this many ns on average are small",
        **PATTERN_HELP,
    }

    def run(self, ctx: Context) -> list[Finding]:
        """One finding per (direction, call site) whose unhidden copy time is large."""
        if "kind" not in ctx.work.columns:  # a cluster merged from per-rank results
            return []
        copies = ctx.work.filter(
            (pl.col("kind") == "memcpy")
            & ~pl.col("is_comm")
            & ~pl.col("is_part")
            & pl.col("step").is_not_null()
        )
        if copies.height == 0 or ctx.windows.height == 0:
            return []
        sites = call_sites(ctx.rows, copies)
        copies = copies.with_columns(
            pl.col("rank").fill_null(0).cast(pl.Int32), _dur0=pl.col("dur")
        ).join(sites, on=["rank", "corr"], how="left")
        copies = attributes(copies).with_columns(
            site=pl.col("site").fill_null(
                pl.format("stream {}", "stream").fill_null(pl.lit("no launch link"))
            )
        )
        copies = copies.with_columns(pattern=pl.format("{}: {}", "direction", "site"))
        cut = clipped(copies, ctx.windows)
        if cut.height == 0:
            return []
        obs = self._observations(ctx, cut)
        table = summarise(obs, STATS, step_time(ctx))
        table = table.filter(
            (pl.col("impact_ns") > 0)
            & (
                (pl.col("unhidden_share_max") >= self.opts["report_share"])
                | (pl.col("unhidden_busy_share_max") >= self.opts["report_busy_share"])
            )
        )
        totals = obs.group_by("pattern").agg(
            total_copies=pl.col("copies").sum(),
            total_copy_ns=pl.col("copy_ns").sum(),
            total_bytes=pl.col("bytes").sum(),
            total_known=pl.col("known").sum(),
            total_bytes_ns=pl.col("bytes_ns").sum(),
            total_pageable=pl.col("pageable").sum(),
        )
        table = table.join(totals, on="pattern", how="left", maintain_order="left")
        return findings(self, ctx, table, self._describe, STATS)

    def _observations(self, ctx: Context, cut: pl.DataFrame) -> pl.DataFrame:
        """One row per (pattern, rank, device, step): copy and unhidden time, bytes,
        bandwidth, the link's peak and the shares of busy time and step."""
        compute = merge(ctx.work.lazy().filter(IS_COMPUTE).select(*DEVICE, "ts", "dur"), DEVICE)
        intervals = merge(cut.select("pattern", *KEY, "ts", "dur"), ["pattern", *KEY])
        length = pl.col("end") - pl.col("start")
        intervals = intervals.with_columns(_covered=covered(intervals, compute, DEVICE))
        timed = (
            intervals.sort("start")
            .group_by("pattern", *KEY)
            .agg(
                copy_ns=length.sum(),
                impact_ns=(length - pl.col("_covered")).sum(),
                ranges=pl.concat_list("start", "end").head(RANGES_KEPT),
            )
        )
        known = pl.col("bytes").is_not_null()
        counted = cut.group_by("pattern", *KEY).agg(
            copies=pl.len(),
            known=known.sum(),
            bytes=pl.col("bytes").sum(),
            bytes_ns=pl.col("_dur0").filter(known).sum(),
            pageable=pl.col("pageable").sum(),
            direction=pl.col("direction").first(),
            site=pl.col("site").first(),
            streams=pl.col("stream").unique().sort(),
            names=pl.col("name").cast(pl.String).unique(maintain_order=True),
        )
        links = device_links(ctx.meta, self.opts["link"], self.opts["peer_link"])
        host_link = pl.col("direction").is_in(HOST_LINK)
        obs = (
            counted.join(timed, on=["pattern", *KEY])
            .join(ctx.step_metrics.select(*KEY, "dur", "busy_ns"), on=KEY, how="left")
            .join(links, on="device", how="left")
        )
        for end, option in (("host", "link"), ("peer", "peer_link")):  # devices not listed
            if self.opts[option]:
                given = link(self.opts[option], option)
                obs = obs.with_columns(
                    pl.col(f"{end}_gbps").fill_null(given["gbps"]),
                    pl.col(f"{end}_link").fill_null(given["name"]),
                )
        peer = pl.col("direction") == "peer"
        return obs.with_columns(
            bytes=pl.when(pl.col("known") > 0).then("bytes"),
            gbps=pl.when((pl.col("known") > 0) & (pl.col("bytes_ns") > 0)).then(
                pl.col("bytes") / pl.col("bytes_ns")
            ),
            peak_gbps=pl.when(host_link).then("host_gbps").when(peer).then("peer_gbps"),
            link_name=pl.when(host_link).then("host_link").when(peer).then("peer_link"),
            busy_share=pl.when(pl.col("busy_ns") > 0).then(pl.col("copy_ns") / pl.col("busy_ns")),
            step_share=pl.when(pl.col("dur") > 0).then(pl.col("copy_ns") / pl.col("dur")),
            unhidden_share=pl.when(pl.col("dur") > 0).then(pl.col("impact_ns") / pl.col("dur")),
            unhidden_busy_share=pl.when(pl.col("busy_ns") > 0).then(
                pl.col("impact_ns") / pl.col("busy_ns")
            ),
        )

    def _small(self, row: dict[str, Any]) -> bool:
        """Many tiny copies: at least ``small_count`` per step, of at most ``small_bytes``
        each on average (``small_ns`` where bytes are unknown)."""
        per_step = row["total_copies"] / max(1, row["occurrences"])
        if per_step < self.opts["small_count"]:
            return False
        if row["total_known"]:
            return row["total_bytes"] / row["total_known"] <= self.opts["small_bytes"]
        return row["total_copy_ns"] / row["total_copies"] <= self.opts["small_ns"]

    def _describe(self, row: dict[str, Any]) -> dict[str, Any]:
        direction, n_steps = row["direction"], len(row["steps"])
        known, copies = row["total_known"], row["total_copies"]
        timed = row["total_bytes_ns"]
        gbps = row["total_bytes"] / timed if known and timed else None
        peak = row["peak_gbps"]
        share = gbps / peak if gbps is not None and peak else None
        what, pageable = _WHAT[direction], row["total_pageable"]
        text = (
            f"{copies:,} {what} copies"
            + (f" ({pageable:,} from pageable host memory)" if pageable else "")
            + f" launched by {row['site']}: {row['total_copy_ns']:,} ns over {n_steps:,} step(s)"
            + (f", {row['total_bytes']:,} bytes" if known else "")
            + f"; {_bandwidth(row, gbps, share, known, copies)}. Worst in step {row['step']}"
            f" (rank {row['rank']}, device {row['device']}): {row['copy_ns']:,} ns of copies, "
            f"{_pct(row['busy_share'])} of the device's busy time and {_pct(row['step_share'])}"
            f" of the step; {row['worst_ns']:,} ns of it with no compute kernel beside it"
        )
        return {
            "kind": "small_copies" if self._small(row) else direction,
            "title": f"{direction} copies from {row['site']}: {row['impact_ns']:,} ns not hidden "
            f"by compute in {n_steps:,} step(s)",
            "detail": text,
            "metrics": {
                "copy_ns": row["copy_ns"],
                "unhidden_ns": row["worst_ns"],
                "copies": row["copies"],
                "bytes": row["bytes"],
                "gbps": gbps,
                "peak_gbps": peak,
                "link_share": share,
                "busy_share": row["busy_share"],
                "step_share": row["step_share"],
            },
            "evidence": {"ranges": row["ranges"], "streams": row["streams"], "names": row["names"]},
        }


def _pct(value: float | None) -> str:
    return "?" if value is None else f"{value:.1%}"


def _bandwidth(
    row: dict[str, Any], gbps: float | None, share: float | None, known: int, copies: int
) -> str:
    """What can be said of the pattern's bandwidth and its link."""
    if gbps is None:
        return "bandwidth unknown: the trace records no byte counts for these copies"
    text = f"{gbps:.2f} GB/s achieved" + (
        f" (over the {known:,} of {copies:,} copies with a byte count)" if known < copies else ""
    )
    direction = row["direction"]
    if share is not None:
        peak = f"{row['link_name']}'s {row['peak_gbps']:g} GB/s per direction"
        return f"{text}, {share:.1%} of {peak}"
    if direction == "d2d":
        return f"{text}; a copy inside device memory crosses no link: no link peak to compare"
    if direction in ("unknown", "h2h"):
        return f"{text}; the link crossed is not known for this direction: no link share"
    name = row["device_name"]
    return (
        f"{text}; link share not computed: device {name!r} is not in tracekit's link table "
        "(give the link with option transfers.link or transfers.peer_link, e.g. pcie5)"
        if name
        else f"{text}; link share not computed: the trace names no device model (give the "
        "link with option transfers.link or transfers.peer_link, e.g. pcie5)"
    )
