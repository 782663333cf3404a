"""Kernel and operator names -> category, communication, fused and fallback flags.

The tables live in ``tracekit/data/taxonomy.toml`` (documented there); users prepend their
own with ``--patterns FILE``. Classification runs on the distinct (name, kind, engine)
combinations of a timeline, as polars regex expressions, and is joined back to the rows:
no Python per event, and a few thousand distinct names cost milliseconds.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import polars as pl

from tracekit.errors import TraceError
from tracekit.timeline import DEVICE_KINDS

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

CATEGORIES = (
    "gemm",
    "attention",
    "moe",
    "comm",
    "elementwise",
    "norm",
    "activation",
    "quant",
    "memory",
    "sampling",
    "other",
)
VENDORS = ("nvidia", "amd", "ascend")
FLAG_COLUMNS = ("category", "is_comm", "is_fused_comm", "is_fallback")
_ENTRY_KEYS = {
    "note", "match", "kinds", "engines", "vendors", "stacks", "not_stacks", "category", "comm",
    "fused_comm", "vetted",
}  # fmt: skip
_TABLES = ("category", "fallback", "suspect")


@dataclass(frozen=True)
class Pattern:
    """One table entry: conditions (all must hold) and what a match means."""

    note: str = ""
    match: str | None = None
    kinds: tuple[str, ...] = ()
    engines: tuple[str, ...] = ()
    vendors: tuple[str, ...] = ()
    stacks: tuple[str, ...] = ()  # holds when any of these ("a+b": all of a, b) is in the trace
    not_stacks: tuple[str, ...] = ()  # ... and none of these
    category: str = "other"
    comm: bool = False
    fused_comm: bool = False
    vetted: bool = False  # a name it matches is known, never a suspect (user entries are)

    def condition(
        self, vendor: str | None, column: str = "name", stack: frozenset[str] = frozenset()
    ) -> pl.Expr:
        """The polars condition over columns ``name`` (or ``column``), ``kind``, ``engine``
        (strings), for a trace of ``vendor`` whose software ``stack`` has these component
        ids (:mod:`tracekit.stack`)."""
        cond = pl.lit(True)
        if self.match is not None:
            cond &= pl.col(column).str.contains(f"(?i){self.match}")
        if self.kinds:
            cond &= pl.col("kind").is_in(self.kinds)
        if self.engines:
            cond &= pl.col("engine").is_in(self.engines)
        if self.vendors:
            cond &= pl.lit(vendor in self.vendors)
        if self.stacks:  # "a+b": a and b both in the stack
            cond &= pl.lit(any(set(ids.split("+")) <= stack for ids in self.stacks))
        if self.not_stacks:
            cond &= pl.lit(not stack & set(self.not_stacks))
        return cond.fill_null(False)


@dataclass(frozen=True)
class Taxonomy:
    """The category entries (first match wins), the fallback entries (any match) and the
    suspect entries: names that look like communication (any match), counted as such with a
    warning when no communication entry and no vetted entry matched them."""

    categories: tuple[Pattern, ...]
    fallbacks: tuple[Pattern, ...]
    suspects: tuple[Pattern, ...] = ()

    def extended(self, other: Taxonomy) -> Taxonomy:
        """``other``'s entries first, then these; ``other``'s categories are vetted (what a
        user's file says of a name is final)."""
        mine = tuple(replace(p, vetted=True) for p in other.categories)
        return Taxonomy(
            mine + self.categories,
            other.fallbacks + self.fallbacks,
            other.suspects + self.suspects,
        )


def _pattern(entry: Any, where: str) -> Pattern:
    if not isinstance(entry, dict):
        raise TraceError(f"{where}: each entry must be a table")
    unknown = sorted(set(entry) - _ENTRY_KEYS)
    if unknown:
        raise TraceError(
            f"{where}: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(_ENTRY_KEYS))}"
        )
    if not any(entry.get(k) for k in ("match", "kinds", "engines")):
        raise TraceError(f"{where}: an entry needs match, kinds or engines")
    category = entry.get("category", "other")
    if category not in CATEGORIES:
        raise TraceError(f"{where}: unknown category '{category}'; known: {', '.join(CATEGORIES)}")
    match = entry.get("match")
    if match is not None:
        try:
            pl.select(pl.lit("").str.contains(f"(?i){match}"))
        except pl.exceptions.PolarsError as exc:
            raise TraceError(f"{where}: bad regular expression {match!r} ({exc})") from None
    fused = bool(entry.get("fused_comm", False))
    return Pattern(
        note=str(entry.get("note", "")),
        match=match,
        kinds=tuple(entry.get("kinds", ())),
        engines=tuple(entry.get("engines", ())),
        vendors=tuple(entry.get("vendors", ())),
        stacks=tuple(entry.get("stacks", ())),
        not_stacks=tuple(entry.get("not_stacks", ())),
        category=category,
        comm=bool(entry.get("comm", False)) or fused,
        fused_comm=fused,
        vetted=bool(entry.get("vetted", False)),
    )


def parse_patterns(text: str, source: str) -> Taxonomy:
    """A taxonomy from TOML text (``[[category]]``, ``[[fallback]]``, ``[[suspect]]``)."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise TraceError(f"{source}: not valid TOML ({exc})") from None
    unknown = sorted(set(doc) - set(_TABLES))
    if unknown:
        raise TraceError(
            f"{source}: unknown table(s) {', '.join(unknown)};"
            " use [[category]], [[fallback]] and [[suspect]]"
        )
    tables = {
        table: tuple(
            _pattern(e, f"{source} [[{table}]] #{i + 1}") for i, e in enumerate(doc.get(table, []))
        )
        for table in _TABLES
    }
    return Taxonomy(tables["category"], tables["fallback"], tables["suspect"])


@cache
def builtin() -> Taxonomy:
    """The tables shipped with tracekit."""
    text = resources.files("tracekit.data").joinpath("taxonomy.toml").read_text("utf-8")
    return parse_patterns(text, "taxonomy.toml")


def load_patterns(path: str | Path | None = None) -> Taxonomy:
    """The built-in tables, with the entries of ``path`` (if given) taking precedence."""
    if path is None:
        return builtin()
    path = Path(path)
    try:
        text = path.read_text("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TraceError(f"{path}: cannot read the patterns file ({exc})") from None
    return builtin().extended(parse_patterns(text, str(path)))


# The runtime API a trace's launch calls belong to says whose device ran them
_API_VENDORS = (("amd", "^hip[A-Z]"), ("nvidia", "^(cuda|cu)[A-Z]"), ("ascend", "^acl[a-z]*[A-Z]"))


def vendor_of_calls(df: pl.DataFrame) -> str | None:
    """The vendor whose runtime API most of the trace's API calls name (``hipLaunchKernel``,
    ``cudaLaunchKernel``, ``aclrtMemcpy`` …), or None: what a trace shows when its metadata
    names no device (a merged Kineto file may keep another backend's producer text)."""
    calls = df.lazy().filter(pl.col("kind") == "api").group_by("name").agg(n=pl.len())
    calls = calls.with_columns(pl.col("name").cast(pl.String)).collect()
    if not calls.height:
        return None
    counts = {
        v: int(calls.filter(pl.col("name").str.contains(p))["n"].sum()) for v, p in _API_VENDORS
    }
    best = max(counts, key=lambda v: counts[v])
    return best if counts[best] > sum(counts.values()) / 2 else None


def vendor_of(meta: dict[str, Any]) -> str | None:
    """nvidia / amd / ascend, from the devices, the runtime API the calls name
    (``meta["api_vendor"]``, set at load) or the producer of a timeline."""
    for device in meta.get("devices") or []:
        vendor = str((device or {}).get("vendor") or "").lower()
        for known in VENDORS:
            if known in vendor or (known == "ascend" and "huawei" in vendor):
                return known
    if meta.get("api_vendor") in VENDORS:
        return str(meta["api_vendor"])
    producer = meta.get("producer") or {}
    text = " ".join(str(v) for v in [meta.get("format"), *producer.values()]).lower()
    if any(k in text for k in ("rocprof", "rocpd", "roctracer", "rocm", "hip")):
        return "amd"
    if any(k in text for k in ("msprof", "ascend", "cann", "torch_npu", "mindspore", "mindie")):
        return "ascend"
    if any(k in text for k in ("nsys", "nsight", "cupti", "cuda")):
        return "nvidia"
    return None


def function_of(name: pl.Expr) -> pl.Expr:
    """The function of a kernel name: template arguments and parameters cut off
    (``void ns::f<…>(…)`` -> ``void ns::f``), anonymous namespaces dropped first."""
    bare = name.str.replace_all(r"\(anonymous namespace\)::|<unnamed>::", "")
    return bare.str.replace(r"[<(].*$", "")


KEYS = ["name", "kind", "engine"]


def _categorical(df: pl.DataFrame) -> bool:
    return all(isinstance(df.schema[k], (pl.Categorical, pl.Enum)) for k in KEYS)


def _code(column: str) -> pl.Expr:
    """The categorical code of ``column`` plus one, null as 0."""
    return pl.col(column).to_physical().cast(pl.Int64).fill_null(-1) + 1


def _row_key(frame: pl.DataFrame, spans: list[int]) -> pl.Series:
    """One integer per row naming its (name, kind, engine) from their codes (one expression:
    the three code columns of 10M rows are never held at once)."""
    name, kind, engine = (_code(k) for k in KEYS)
    return frame.select(((name * spans[1] + kind) * spans[2] + engine).alias("_key"))["_key"]


def _keyed(df: pl.DataFrame) -> tuple[pl.Series, list[int]] | None:
    """:func:`_row_key` of ``df`` and the code spans it used, or None when the columns are
    not categorical or their codes do not fit one int64. Hashing and joining one integer
    column costs a fraction of the three (10M rows, a few thousand combinations)."""
    if not _categorical(df):
        return None
    highest = df.select(pl.col(k).to_physical().cast(pl.Int64).max() for k in KEYS).row(0)
    spans = [1 if code is None else code + 2 for code in highest]  # codes 0 (null) to code + 1
    if spans[0] * spans[1] * spans[2] >= 2**62:
        return None
    return _row_key(df, spans), spans


def _flags(
    df: pl.DataFrame, combos: pl.DataFrame, keyed: tuple[pl.Series, list[int]] | None
) -> pl.DataFrame:
    """The flag columns of every row of ``df``, from its combination's row of ``combos``
    (``keyed``: :func:`_keyed` of ``df``)."""
    if keyed is None or not _categorical(combos):  # join the key columns (not the whole frame)
        return df.select(KEYS).join(
            combos.drop("comm_guess"), on=KEYS, how="left", nulls_equal=True, maintain_order="left"
        )
    key, spans = keyed
    table = combos.select(FLAG_COLUMNS).with_columns(_row_key(combos, spans))
    return key.to_frame().join(table, on="_key", how="left", maintain_order="left")


def _distinct(df: pl.DataFrame, keyed: tuple[pl.Series, list[int]] | None) -> pl.DataFrame:
    """The distinct (name, kind, engine) of ``df``, in the frame's own dtypes."""
    if keyed is None:
        return df.select(KEYS).unique()
    return df.select(KEYS)[keyed[0].arg_unique()]


def _combos(
    distinct: pl.DataFrame, vendor: str | None, taxonomy: Taxonomy, stack: frozenset[str]
) -> pl.DataFrame:
    """The distinct (name, kind, engine) of a frame with the flag columns and ``comm_guess``
    (a device kernel counted as communication only because its name looks like it)."""
    keys = KEYS
    # Distinct combinations, kept in the frame's own dtypes (categoricals join on their codes)
    # beside string copies for the regexes: 2M rows, a few thousand distinct names.
    combos = distinct.with_columns(pl.col(k).cast(pl.String).alias(f"_{k}") for k in keys)
    combos = combos.rename({k: f"_key_{k}" for k in keys}).rename({f"_{k}": k for k in keys})
    first = pl.lit(None, pl.Int32)
    for i, pattern in reversed(list(enumerate(taxonomy.categories))):
        holds = pattern.condition(vendor, stack=stack)
        first = pl.when(holds).then(pl.lit(i, pl.Int32)).otherwise(first)

    def any_of(patterns: tuple[Pattern, ...], column: str = "name") -> pl.Expr:
        conditions = [p.condition(vendor, column, stack) for p in patterns]
        return pl.any_horizontal(conditions) if conditions else pl.lit(False)

    table = pl.DataFrame(
        {
            "_entry": list(range(len(taxonomy.categories))),
            "category": [p.category for p in taxonomy.categories],
            "is_comm": [p.comm for p in taxonomy.categories],
            "is_fused_comm": [p.fused_comm for p in taxonomy.categories],
            "_vetted": [p.vetted for p in taxonomy.categories],
        },
        schema={
            "_entry": pl.Int32,
            "category": pl.String,
            "is_comm": pl.Boolean,
            "is_fused_comm": pl.Boolean,
            "_vetted": pl.Boolean,
        },
    )
    device = pl.col("kind").is_in(DEVICE_KINDS)
    guess = (
        (pl.col("kind") == "kernel")
        & ~pl.col("is_comm")
        & ~pl.col("_vetted").fill_null(False)
        & pl.col("_suspect")
    )
    return (
        combos.with_columns(_entry=first, _fallback=any_of(taxonomy.fallbacks))
        .with_columns(_stem=function_of(pl.col("name")))
        .with_columns(
            _suspect=any_of(tuple(p for p in taxonomy.suspects if not p.vetted), "_stem")
            & ~any_of(tuple(p for p in taxonomy.suspects if p.vetted), "_stem")
        )
        .join(table, on="_entry", how="left")
        .with_columns(
            category=pl.col("category").fill_null("other"),
            is_comm=(pl.col("is_comm").fill_null(False) & device),
            is_fused_comm=(pl.col("is_fused_comm").fill_null(False) & device),
        )
        .with_columns(comm_guess=guess.fill_null(False))
        .with_columns(
            category=pl.when("comm_guess").then(pl.lit("comm")).otherwise("category"),
            is_comm=pl.col("is_comm") | pl.col("comm_guess"),
        )
        .with_columns(is_fallback=pl.col("_fallback") & device & ~pl.col("is_comm"))
        .select(*(pl.col(f"_key_{k}").alias(k) for k in keys), *FLAG_COLUMNS, "comm_guess")
        .with_columns(pl.col("category").cast(pl.Categorical))  # 4 bytes a row, not 16
    )


def classified(
    df: pl.DataFrame,
    vendor: str | None,
    taxonomy: Taxonomy | None = None,
    stack: frozenset[str] = frozenset(),
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """:func:`classify` and :func:`guessed_comm` of ``df`` from one pass over its names
    (``stack``: the ids of the trace's software components, for entries that name them)."""
    keyed = _keyed(df)  # one integer per row, used twice: the 10M-row pass is made once
    combos = _combos(_distinct(df, keyed), vendor, taxonomy or builtin(), stack)
    keys = KEYS
    # the flags beside the frame's own columns: joining the whole frame would copy them all
    flags = _flags(df, combos, keyed)
    rows = df.drop(FLAG_COLUMNS, strict=False).hstack(flags.select(FLAG_COLUMNS).get_columns())
    guesses = combos.filter("comm_guess")
    if not guesses.height:
        empty = pl.DataFrame(schema={"name": pl.String, "rows": pl.UInt32, "ns": pl.Int64})
        return rows, empty
    guessed = (
        df.join(guesses.select(keys), on=keys, how="semi", nulls_equal=True)
        .group_by(pl.col("name").cast(pl.String))
        .agg(rows=pl.len(), ns=pl.col("dur").sum().cast(pl.Int64))
        .sort("ns", "name", descending=[True, False])
    )
    return rows, guessed


def classify(
    df: pl.DataFrame,
    vendor: str | None,
    taxonomy: Taxonomy | None = None,
    stack: frozenset[str] = frozenset(),
) -> pl.DataFrame:
    """``df`` (timeline rows) with ``category``, ``is_comm``, ``is_fused_comm``, ``is_fallback``.

    Flags are set on device rows only; host rows get a category but no flags. A device kernel
    that no entry calls communication but whose name looks like it (``[[suspect]]``) is
    counted as communication; :func:`guessed_comm` lists those.
    """
    return classified(df, vendor, taxonomy, stack)[0]


def guessed_comm(
    df: pl.DataFrame, vendor: str | None, taxonomy: Taxonomy | None = None
) -> pl.DataFrame:
    """The kernels of ``df`` counted as communication only because their names look like it:
    ``name``, ``rows`` and ``ns`` (summed duration), most time first."""
    return classified(df, vendor, taxonomy)[1]
