"""Checks of the communication tracekit found: a trace of several ranks or devices that
communicates, and kernels counted as communication only because their names look like it."""

from __future__ import annotations

from typing import Any

import polars as pl

from tracekit.intervals import lengths, merge
from tracekit.model import Check, skipped
from tracekit.model import ns_text as _ns

KEY = ["rank", "device"]
LISTED = 5  # guessed names named in the detail


def _brief(name: str, width: int = 70) -> str:
    return name if len(name) <= width else name[: width - 1] + "…"


def _comm_ns(work: pl.DataFrame) -> int:
    """Communication time: the union of communication rows per (rank, device)."""
    comm = work.filter(pl.col("is_comm"))
    return int(lengths(merge(comm, KEY), KEY)["ns"].sum() or 0) if comm.height else 0


def communicates(work: pl.DataFrame, meta: dict[str, Any]) -> Check:
    """A trace of several ranks or devices with no communication at all is suspicious: its
    collectives probably run in kernels tracekit does not know."""
    if not work.height:
        return skipped("comm.present")
    places = work.select(KEY).unique().height
    ranks = len(meta.get("ranks") or []) or work["rank"].n_unique()
    world = int(meta.get("world_size") or 1)
    comm = _comm_ns(work)
    several = max(places, ranks, world) > 1
    if not several or comm:
        detail = f"communication {_ns(comm)} (union per device)" + (
            "" if several else " (one device)"
        )
        return Check("comm.present", "pass", detail, None, comm)
    detail = (
        f"{max(places, ranks, world)} ranks/devices but no communication kernel was recognised;"
        " add the collective's kernels with --patterns"
    )
    return Check("comm.present", "warn", detail, None, 0)


def unknown_comm(guessed: pl.DataFrame, work: pl.DataFrame) -> Check:
    """Kernels that no table entry names but whose names look like communication: counted as
    communication, and listed with their time so the user can confirm them."""
    if not work.height:
        return skipped("comm.unknown")
    if not guessed.height:
        if not work["is_comm"].any():
            return skipped("comm.unknown", "no communication kernel in this trace")
        return Check("comm.unknown", "pass", "every communication kernel is a known one", 0, 0)
    ns = int(guessed["ns"].sum())
    comm = int(work.filter(pl.col("is_comm") & ~pl.col("is_part"))["dur"].sum() or 0)
    share = f" ({ns / comm:.0%} of communication)" if comm else ""
    listed = "; ".join(
        f"{_brief(name)} ×{rows:,} {_ns(t)}" for name, rows, t in guessed.head(LISTED).iter_rows()
    )
    more = f"; and {guessed.height - LISTED} more" if guessed.height > LISTED else ""
    detail = (
        f"{guessed.height} kernel name(s) counted as communication by their look alone,"
        f" {_ns(ns)}{share}: {listed}{more}. Confirm or correct them with --patterns"
    )
    return Check("comm.unknown", "warn", detail, 0, guessed.height)
