"""Apply per-sequence state to decoded track events, column-wise.

Incremental state follows the Perfetto rules: a packet flagged
``SEQ_INCREMENTAL_STATE_CLEARED`` starts a new generation of its sequence's interned
strings and packet defaults; after ``previous_packet_dropped`` the state is invalid until
the next clear, and events that need it are skipped. Interned ids resolve per (sequence,
generation); defaults (clock, track) apply from their packet on. Timestamps go through
their clock: sequence-scoped incremental clocks accumulate deltas from their snapshot
value, and every clock is converted to the trace clock through the clock snapshots.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from tracekit.parsers.perfetto.fields import A_KIND_STR_IID
from tracekit.parsers.perfetto.read import Cols, Raw, TrackInfo
from tracekit.pftrace.schema import CLOCK_BOOTTIME, CLOCK_NAMES, SEQ_NEEDS

_NAMES, _CATEGORIES, _NOTE_NAMES, _STRINGS = range(4)


@dataclass
class Events:
    """Track events with names, tracks and trace-clock timestamps resolved (numpy/Arrow)."""

    cols: Cols  # ts, type, track, name, cat, corr, dur
    notes: Cols  # ev, name, kind, value, text
    clock: int
    tracks: dict[int, TrackInfo]
    warnings: list[str] = field(default_factory=list)


def clock_name(clock: int) -> str:
    """BOOTTIME, REALTIME, ... or "<id> of sequence <n>" for sequence-scoped clocks."""
    if clock > 255:
        return f"{clock & 0xFF} of sequence {clock >> 8}"
    return CLOCK_NAMES.get(clock, str(clock))


def _segmented_cumsum(values: np.ndarray, group: np.ndarray) -> np.ndarray:
    """Running sum of ``values`` within each group, in array order."""
    order = np.argsort(group, kind="stable")
    sums = np.cumsum(values[order])
    g = group[order]
    first = np.ones(len(g), dtype=bool)
    first[1:] = g[1:] != g[:-1]
    before = (sums - values[order])[first][np.cumsum(first) - 1]
    out = np.empty_like(sums)
    out[order] = sums - before
    return out


def _generations(raw: Raw) -> tuple[np.ndarray, np.ndarray]:
    """Per packet: dense (sequence, generation) group id, and whether its state is valid."""
    p = raw.packets
    _, seq = np.unique(p["seq"], return_inverse=True)
    cleared = p["cleared"].astype(np.int64)
    gen = _segmented_cumsum(cleared, seq)
    _, group = np.unique(seq.astype(np.int64) << 32 | gen, return_inverse=True)
    lost = _segmented_cumsum((p["dropped"] & ~p["cleared"]).astype(np.int64), group)
    return group.astype(np.int64), (gen > 0) & (lost == 0)


class _Interned:
    """Interned strings keyed by (table, sequence generation group, iid)."""

    def __init__(self, raw: Raw, group: np.ndarray) -> None:
        t = raw.interned
        key = np.stack([t["table"], group[t["pkt"]] if len(t["pkt"]) else t["pkt"], t["iid"]])
        order = np.lexsort(key[::-1])
        keys = key[:, order]
        last = np.ones(keys.shape[1], dtype=bool)  # a repeated key: the last definition wins
        last[:-1] = (keys[:, 1:] != keys[:, :-1]).any(axis=0)
        self.keys = keys[:, last]
        self.values = t["value"].take(pa.array(order[last]))

    def lookup(self, table: int, group: np.ndarray, iid: np.ndarray) -> pa.Array:
        """Strings for ``iid``s (null where 0 or not interned), dictionary-encoded."""
        k = self.keys
        lo = int(np.searchsorted(k[0], table, "left"))
        hi = int(np.searchsorted(k[0], table, "right"))
        index = np.full(len(iid), -1, dtype=np.int64)
        ask = np.flatnonzero(iid != 0)
        if hi > lo and len(ask):
            pos = _search_pairs(k[1, lo:hi], k[2, lo:hi], group[ask], iid[ask])
            index[ask] = np.where(pos >= 0, lo + pos, -1)
        indices = pa.array(index.astype(np.int32), mask=index < 0)
        return pa.DictionaryArray.from_arrays(indices, self.values)


def _search_pairs(g: np.ndarray, i: np.ndarray, qg: np.ndarray, qi: np.ndarray) -> np.ndarray:
    """Position of each (qg, qi) in the sorted pairs (g, i), or -1."""
    if len(g) and g.max() < 1 << 20 and i.min() >= 0 and i.max() < 1 << 43:
        keys = g << 43 | i
        query = qg << 43 | np.where((qi >= 0) & (qi < 1 << 43), qi, 0)
        at = np.minimum(np.searchsorted(keys, query), len(keys) - 1)
        return np.where((keys[at] == query) & (qi >= 0) & (qi < 1 << 43), at, -1)
    left = np.searchsorted(g, qg, "left")
    right = np.searchsorted(g, qg, "right")
    pos = np.full(len(qg), -1, dtype=np.int64)
    for value in np.unique(qg).tolist():  # one search per sequence generation
        sel = np.flatnonzero(qg == value)
        lo, hi = int(left[sel[0]]), int(right[sel[0]])
        if hi > lo:
            at = np.minimum(np.searchsorted(i[lo:hi], qi[sel]), hi - lo - 1)
            ok = i[lo:hi][at] == qi[sel]
            pos[sel[ok]] = lo + at[ok]
    return pos


def resolve(raw: Raw) -> Events:
    """Names, categories, tracks and timestamps of the events of ``raw``."""
    warnings: list[str] = []
    group, valid = _generations(raw)
    e = raw.events
    pkt = e["pkt"]
    keep = ~(((raw.packets["flags"][pkt] & SEQ_NEEDS) > 0) & ~valid[pkt])
    if not keep.all():
        warnings.append(
            f"skipped {int((~keep).sum())} events whose incremental state was lost before them"
        )
    kept = np.flatnonzero(keep)
    e = {k: (v.take(pa.array(kept)) if isinstance(v, pa.Array) else v[kept]) for k, v in e.items()}
    pkt = e["pkt"]
    interned = _Interned(raw, group)
    e["name"] = _coalesce(e["name"], interned.lookup(_NAMES, group[pkt], e["name_iid"]))
    e["cat"] = _coalesce(e["cat"], interned.lookup(_CATEGORIES, group[pkt], e["cat_iid"]))
    tracks = dict(raw.tracks)
    d_clock, d_track = _defaults(raw, group, pkt)
    e["track"] = np.where(e["track"] != 0, e["track"], d_track)
    _orphans(raw, e, tracks)
    clock = np.where(e["clock"] != 0, e["clock"], d_clock)
    clock = np.where(clock == 0, CLOCK_BOOTTIME, clock)
    seq = raw.packets["seq"][pkt]
    e["clock"] = np.where(clock >= 64, seq * 256 + clock, clock)
    ref, notes = _clocks(raw, e)
    warnings += notes
    return Events(e, _notes(raw, kept, group[pkt], interned), ref, tracks, warnings)


def _coalesce(inline: pa.Array, interned: pa.DictionaryArray) -> pa.Array:
    """Inline strings where set, else the interned ones (kept dictionary-encoded if possible)."""
    if inline.null_count == len(inline):
        return interned
    return pc.coalesce(inline, interned.cast(pa.string()))


def _notes(raw: Raw, kept: np.ndarray, ev_group: np.ndarray, interned: _Interned) -> Cols:
    """Annotations of the kept events, renumbered, with interned names and strings resolved."""
    n = raw.notes
    new_index = np.full(len(raw.events["pkt"]), -1, dtype=np.int64)
    new_index[kept] = np.arange(len(kept))
    ev = new_index[n["ev"]] if len(n["ev"]) else n["ev"]
    sel = np.flatnonzero(ev >= 0)
    out = {k: (v.take(pa.array(sel)) if isinstance(v, pa.Array) else v[sel]) for k, v in n.items()}
    out["ev"] = ev[sel]
    group = ev_group[out["ev"]]
    names = _coalesce(out["name"], interned.lookup(_NOTE_NAMES, group, out["name_iid"]))
    if names.null_count:  # an id interned nowhere: "arg<id>"
        missing = np.flatnonzero(names.is_null().to_numpy(zero_copy_only=False))
        text = names.cast(pa.string()).to_pylist()
        for i in missing.tolist():
            text[i] = f"arg{out['name_iid'][i]}"
        names = pa.array(text, pa.string())
    out["name"] = names
    is_iid = out["kind"] == A_KIND_STR_IID
    if is_iid.any():
        strings = interned.lookup(_STRINGS, group, out["value"].view(np.int64))
        out["text"] = pc.if_else(pa.array(is_iid), strings.cast(pa.string()), out["text"])
        out["kind"] = np.where(is_iid, 6, out["kind"])
    return out


def _asof(
    raw_frame: pl.DataFrame, group: np.ndarray, pkt: np.ndarray, by_group: bool
) -> pl.DataFrame:
    """For each event packet, the last row of ``raw_frame`` at or before it (same group)."""
    right = raw_frame.with_columns(g=pl.Series(group[raw_frame["pkt"].to_numpy()]))
    left = pl.DataFrame({"i": np.arange(len(pkt)), "pkt": pkt, "g": group[pkt]})
    if not by_group:
        right, left = right.with_columns(g=pl.lit(0)), left.with_columns(g=pl.lit(0))
    joined = left.sort("pkt").join_asof(
        right.sort("pkt"), on="pkt", by="g", strategy="backward", check_sortedness=False
    )
    return joined.sort("i")


def _defaults(raw: Raw, group: np.ndarray, pkt: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Default clock and track of each event's sequence generation (0 when none)."""
    if raw.defaults.is_empty():
        zero = np.zeros(len(pkt), dtype=np.int64)
        return zero, zero
    joined = _asof(raw.defaults, group, pkt, True)
    return joined["clock"].fill_null(0).to_numpy(), joined["track"].fill_null(0).to_numpy()


def _orphans(raw: Raw, e: dict[str, Any], tracks: dict[int, TrackInfo]) -> None:
    """Tracks for events without one: the sequence's legacy thread, else the sequence."""
    lost = np.flatnonzero(e["track"] == 0)
    if not len(lost):
        return
    seq = raw.packets["seq"][e["pkt"][lost]]
    pid = np.full(len(lost), -1, dtype=np.int64)
    tid = np.full(len(lost), -1, dtype=np.int64)
    if not raw.threads.is_empty():
        _, seq_group = np.unique(raw.packets["seq"], return_inverse=True)
        joined = _asof(raw.threads, seq_group.astype(np.int64), e["pkt"][lost], True)
        pid = joined["pid"].fill_null(-1).to_numpy()
        tid = joined["tid"].fill_null(-1).to_numpy()
    combos, inverse = np.unique(np.stack([seq, pid, tid]), axis=1, return_inverse=True)
    for number, (s, p, t) in enumerate(combos.T.tolist()):
        key = -1 - number
        tracks[key] = TrackInfo(name=f"sequence {s}") if p < 0 else TrackInfo(pid=p, tid=t)
    e["track"][lost] = -1 - inverse.ravel()


def _clocks(raw: Raw, e: dict[str, Any]) -> tuple[int, list[str]]:
    """Convert ``e["ts"]`` to the trace clock in place; return that clock and notes."""
    seqs = raw.packets["seq"]
    snaps = [
        (pkt, {(int(seqs[pkt]) << 8 | c if c >= 64 else c): v for c, v in clocks.items()})
        for pkt, clocks in raw.snapshots
    ]
    notes: list[str] = []
    time, keys = e["ts"].copy(), e["clock"]
    incremental = [(pkt, key, v[0]) for pkt, s in snaps for key, v in s.items() if v[2]]
    for pkt_at, key, base in sorted(incremental, reverse=True):
        upto = _next(incremental, key, pkt_at)
        sel = np.flatnonzero((keys == key) & (e["pkt"] >= pkt_at) & (e["pkt"] < upto))
        time[sel] = base + np.cumsum(e["ts"][sel])
    ref = raw.primary_clock
    used = np.unique(keys).tolist()
    related = any(ref in s and c in s for _, s in snaps for c in used if c != ref)
    if len(used) == 1 and not related:
        e["ts"] = time
        return (int(used[0]) if used else ref), notes  # one clock throughout: keep it
    for c in used:
        if c == ref:
            continue
        pairs = sorted((s[c][0], s[c][1], s[ref][0]) for _, s in snaps if c in s and ref in s)
        sel = keys == c
        if not pairs:
            notes.append(
                f"{int(sel.sum())} events on clock {clock_name(c)} have no clock "
                f"snapshot relating them to {clock_name(ref)}; kept unconverted"
            )
            continue
        base_v, mult, target = (np.array(v, dtype=np.int64) for v in zip(*pairs))
        pick = np.clip(np.searchsorted(base_v, time[sel], side="right") - 1, 0, len(pairs) - 1)
        time[sel] = (time[sel] - base_v[pick]) * mult[pick] + target[pick]
    e["ts"] = time
    return ref, notes


def _next(snapshots: list[tuple[int, int, int]], key: int, pkt: int) -> int:
    """Packet of the next snapshot of incremental clock ``key`` after ``pkt``."""
    later = [p for p, k, _ in snapshots if k == key and p > pkt]
    return min(later) if later else 1 << 62


def realtime_of(raw: Raw, ref: int, t0: int) -> int | None:
    """The REALTIME (epoch) ns of trace-clock time ``t0``, when a snapshot relates them."""
    if ref == 1:
        return t0
    pairs = sorted((s[ref][0], s[1][0]) for _, s in raw.snapshots if ref in s and 1 in s)
    if not pairs:
        return None
    best = max((p for p in pairs if p[0] <= t0), default=pairs[0])
    return t0 - best[0] + best[1]
