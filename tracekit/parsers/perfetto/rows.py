"""Resolved Perfetto track events -> timeline rows.

Begin/end events pair per track as a stack, in timestamp order, the way trace processor
pairs them; instants and legacy complete events are rows of their own. A file tracekit
wrote carries its row fields exactly (track descriptions, category = kind, annotations
corr/engine/args, and its metadata instant); other files go through :mod:`.foreign`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from tracekit.parsers.perfetto import foreign
from tracekit.parsers.perfetto.read import COMPLETE, Raw
from tracekit.parsers.perfetto.resolve import Events, clock_name, realtime_of, resolve
from tracekit.pftrace.lanes import match_stack
from tracekit.pftrace.schema import (
    ANN_ARGS,
    ANN_CORR,
    ANN_ENGINE,
    INSTANT,
    META_ANNOTATION,
    META_EVENT,
    SLICE_BEGIN,
    SLICE_END,
    TRACK_FIELDS,
    VERSION,
    parse_track_description,
)
from tracekit.timeline import KINDS, Timeline, build_table, empty_meta


def _where_equal(values: pa.Array, text: str) -> np.ndarray:
    """Positions where a (possibly dictionary-encoded) string array equals ``text``."""
    if isinstance(values, pa.DictionaryArray):
        codes = _where_equal(values.dictionary, text)
        indices = values.indices.fill_null(-1).to_numpy(zero_copy_only=False)
        return np.flatnonzero(np.isin(indices, codes))
    return np.flatnonzero(
        pc.fill_null(pc.equal(values, text), False).to_numpy(zero_copy_only=False)
    )


def _tracekit_meta(events: Events) -> tuple[int, dict[str, Any]] | None:
    """(event, document) of the metadata instant of a file tracekit wrote."""
    e, n = events.cols, events.notes
    candidates = _where_equal(e["name"], META_EVENT)
    candidates = candidates[e["type"][candidates] == INSTANT]
    for i in _where_equal(n["name"], META_ANNOTATION).tolist():
        if n["ev"][i] not in candidates:
            continue
        try:
            doc = json.loads(n["text"][i].as_py() or "")
        except (TypeError, ValueError):
            continue
        if (
            isinstance(doc, dict)
            and doc.get("version") == VERSION
            and isinstance(doc.get("meta"), dict)
        ):
            return int(n["ev"][i]), doc
    return None


def _pair(e: dict[str, Any], code: np.ndarray) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Head event (begin, instant, complete) of every row, in event order, and durations."""
    typ, time = e["type"], e["ts"]
    order = np.lexsort((time, code))  # stable: file order breaks ties
    stacked = order[np.isin(typ[order], (SLICE_BEGIN, SLICE_END))]
    begins, ends, orphans = match_stack(code[stacked], typ[stacked] == SLICE_BEGIN)
    singles = np.flatnonzero((typ == INSTANT) | (typ == COMPLETE))
    heads = np.concatenate([stacked[begins], singles])
    dur = np.concatenate([time[stacked[ends]] - time[stacked[begins]], e["dur"][singles]])
    first = np.argsort(heads, kind="stable")
    notes = []
    open_slices = int((typ == SLICE_BEGIN).sum()) - len(begins)
    if open_slices:
        notes.append(f"{open_slices} slices never ended (trace cut short?); dropped")
    if orphans:
        notes.append(f"{orphans} slice ends without a begin (ring buffer wrapped?); ignored")
    return heads[first], dur[first], notes


def _unique_dictionary(values: pa.Array) -> pa.Array:
    """A dictionary array whose dictionary holds each used string once (interned strings of
    every table, sequence and generation share one pool)."""
    if not isinstance(values, pa.DictionaryArray):
        return values
    missing = values.is_null().to_numpy(zero_copy_only=False)
    old = values.indices.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
    used, inverse = np.unique(old[~missing], return_inverse=True)
    unique = pc.dictionary_encode(values.dictionary.take(pa.array(used)))
    index = np.zeros(len(old), dtype=np.int32)
    index[~missing] = unique.indices.to_numpy(zero_copy_only=False)[inverse.ravel()]
    return pa.DictionaryArray.from_arrays(pa.array(index, mask=missing), unique.dictionary)


def _note_column(events: Events, name: str, column: str, m: int) -> pa.Array:
    """Per event, the value of its first annotation called ``name`` (ints or text)."""
    n = events.notes
    at = _where_equal(n["name"], name)
    ev = n["ev"][at]
    _, first = np.unique(ev, return_index=True)  # the first one per event wins
    at = at[first]
    index = np.full(m, -1, dtype=np.int64)
    index[n["ev"][at]] = at
    if column == "int":
        out = np.zeros(m, dtype=np.int64)
        out[n["ev"][at]] = n["value"][at].view(np.int64)
        return pa.array(out, mask=index < 0)
    return n["text"].take(pa.array(index, mask=index < 0))


def build(raw: Raw, path: Path) -> Timeline:
    """Timeline of the rows in ``raw``."""
    events = resolve(raw)
    e = events.cols
    keys, code = np.unique(e["track"], return_inverse=True)
    code = code.ravel().astype(np.int64)
    found = _tracekit_meta(events)
    heads, dur, pair_notes = _pair(e, code)
    if found is not None:
        keep = heads != found[0]
        heads, dur = heads[keep], dur[keep]
    row_code = code[heads]
    used = np.zeros(len(keys), dtype=bool)
    used[row_code] = True
    tracks, guess = _track_fields(events, keys.tolist(), used, found is not None)
    own = tracks["own"][row_code]
    cols: dict[str, Any] = {"dur": dur, "name": _unique_dictionary(e["name"].take(pa.array(heads)))}
    for name in TRACK_FIELDS:
        values, ok = tracks[name]
        cols[name] = pa.array(values[row_code], mask=~ok[row_code])
    m = len(e["ts"])
    if own.any():
        cols["kind"] = _own_kinds(e["cat"], heads)
        cols["corr"] = _note_column(events, ANN_CORR, "int", m).take(pa.array(heads))
        cols["engine"] = _note_column(events, ANN_ENGINE, "text", m).take(pa.array(heads))
        cols["args"] = _note_column(events, ANN_ARGS, "text", m).take(pa.array(heads))
    if not own.all():
        _foreign_rows(events, heads, own, tracks["on_device"][row_code], cols)
    meta = empty_meta()
    warnings = [
        *events.warnings,
        *pair_notes,
        *guess.warnings(),
        *(f"skipped {count} {what}" for what, count in raw.skipped.items()),
    ]
    ts = e["ts"][heads]
    if found is not None:
        meta.update(found[1]["meta"])
        ts = ts - int(found[1]["ts_base"])
    else:
        t0 = int(ts.min()) if len(ts) else 0
        ts = ts - t0
        origin = realtime_of(raw, events.clock, t0)
        meta.update(
            format="perfetto", source=path.name, origin_ns=origin, clock=clock_name(events.clock)
        )
        if origin is None:
            warnings.insert(
                0,
                f"timestamps are {clock_name(events.clock)} ns and no clock "
                "snapshot relates them to REALTIME; origin_ns unknown",
            )
        _describe(meta, e["cat"], cols)
    meta["warnings"] = [*meta.get("warnings", []), *warnings]
    cols["ts"] = ts
    table = build_table(cols, len(heads))
    return Timeline(table.take(pa.array(np.argsort(ts, kind="stable"))), meta)


def _own_kinds(cat: pa.Array, heads: np.ndarray) -> pa.Array:
    kinds = cat.take(pa.array(heads))
    if isinstance(kinds, pa.DictionaryArray):
        kinds = kinds.cast(pa.string())
    known = pc.fill_null(pc.is_in(kinds, pa.array(KINDS)), False)
    return pc.if_else(known, kinds, pa.scalar("range"))


def _track_fields(
    events: Events, keys: list[int], used: np.ndarray, own_file: bool
) -> tuple[dict[str, Any], foreign.Tracks]:
    """Per track code: (values, valid) of each timeline field, ``own``, ``on_device``."""
    guess = foreign.Tracks(events.tracks)
    rows, own, device = [], [], []
    for key, holds_rows in zip(keys, used.tolist()):
        if not holds_rows:
            rows.append((None,) * len(TRACK_FIELDS))
            own.append(False)
            device.append(False)
            continue
        info = events.tracks.get(key)
        mine = parse_track_description(info.description or "") if own_file and info else None
        if mine is not None:
            rows.append(mine)
            own.append(True)
            device.append(mine[1] is not None and mine[1] >= 0)
        else:
            fields, on_device = guess.fields(key)
            rows.append(fields)
            own.append(False)
            device.append(on_device)
    out: dict[str, Any] = {"own": np.array(own, dtype=bool), "on_device": np.array(device, bool)}
    for i, name in enumerate(TRACK_FIELDS):
        values = [r[i] for r in rows]
        out[name] = (
            np.array([0 if v is None else v for v in values], dtype=np.int64),
            np.array([v is not None for v in values], dtype=bool),
        )
    return out, guess


def _foreign_rows(
    events: Events, heads: np.ndarray, own: np.ndarray, on_device: np.ndarray, cols: dict[str, Any]
) -> None:
    """kind, corr, engine and args of the rows on tracks tracekit did not write."""
    e = events.cols
    rows = pl.DataFrame(
        {
            "ev": heads,
            "type": e["type"][heads],
            "on_device": on_device,
            "name": pl.Series(_text(cols["name"])),
            "cat": pl.Series(_text(e["cat"].take(pa.array(heads)))),
            "corr": e["corr"][heads],
        }
    )
    n = events.notes
    notes = pl.DataFrame(
        {
            "ev": n["ev"],
            "name": pl.Series(_text(n["name"])),
            "kind": n["kind"],
            "int": n["value"].view(np.int64),
            "uint": n["value"],
            "double": n["value"].view(np.float64),
            "str": pl.Series(n["text"]),
        }
    )
    guessed = foreign.annotations(
        notes.join(rows.select("ev"), on="ev", how="semi"), rows.select("ev", "corr")
    )
    rows = rows.join(guessed, on="ev", how="left", maintain_order="left", suffix="_g")
    kind = foreign.kinds()
    engine = kind.replace_strict({"kernel": "sm", "memcpy": "copy"}, default=None)
    rows = rows.with_columns(kind=kind, engine=pl.when("on_device").then(engine))
    for name in ("kind", "corr", "engine", "args"):
        source = "corr_g" if name == "corr" else name
        guess = rows[source].to_arrow().cast(pa.int64() if name == "corr" else pa.string())
        if name in cols:
            cols[name] = pc.if_else(pa.array(own), cols[name], guess)
        else:
            cols[name] = guess


def _text(values: pa.Array) -> pa.Array:
    return values.cast(pa.string()) if isinstance(values, pa.DictionaryArray) else values


def _describe(meta: dict[str, Any], cat: pa.Array, cols: dict[str, Any]) -> None:
    """Producer, devices and ranks of a foreign trace, from its content."""
    cats = set(pc.unique(cat.drop_null()).to_pylist())
    rocprof = bool(cats & set(foreign.ROCPROF_CATEGORIES))
    if rocprof:
        meta["producer"] = {"name": "rocprofv3 (guessed from event categories)"}
    devices = sorted(d for d in pc.unique(cols["device"].drop_null()).to_pylist() if d >= 0)
    meta["devices"] = [
        {"index": d, "name": None, **({"vendor": "AMD"} if rocprof else {})} for d in devices
    ]
    ranks = pc.unique(cols["rank"].drop_null()).to_pylist()
    meta["ranks"] = sorted(ranks) or [0]
