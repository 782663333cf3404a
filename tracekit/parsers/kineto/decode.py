"""Reading PyTorch-profiler (Kineto) Chrome-trace JSON with a typed msgspec decoder.

Only the fields tracekit keeps are declared; msgspec skips the rest in C. Timestamps are
converted to integer ns without passing large epoch values through float multiplication.
"""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any, ClassVar, Union

import msgspec
import numpy as np
import polars as pl
import pyarrow as pa

from tracekit.errors import TraceError
from tracekit.load import GZIP_MAGIC
from tracekit.parsers.kineto.escapes import utf8_replaced, without_lone_surrogates

try:  # ISA-L inflates about three times faster than zlib; same format, same checks
    from isal import isal_zlib as _zlib
except ImportError:  # pragma: no cover - isal ships wheels for the common platforms
    import zlib as _zlib  # type: ignore[no-redef]

EXACT_FLOAT_US = 2.0**43  # below this a float µs value still resolves single ns
MAX_US = (2**63 - 1) // 1000  # the largest µs value whose ns fit in int64


Text = bytes | bytearray | memoryview  # JSON text as read, or a view of part of it
Int = int | str | None  # some producers write numbers as text ("bytes": "2560")
NULL = msgspec.Raw(b"null")
Num = int | float | str | None


class Args(msgspec.Struct, gc=False):
    """The ``args`` keys tracekit keeps; union types absorb the variants seen in the wild.

    Fields are declared in the order Kineto writes them: msgspec looks a key up starting
    after the field it matched last.
    """

    external_id: Int = msgspec.field(name="External id", default=None)
    device: Int = None
    stream: Int = None
    correlation: Int = None
    registers: Int = msgspec.field(name="registers per thread", default=None)
    shared_memory: Int = msgspec.field(name="shared memory", default=None)
    grid: list[int] | None = None  # not msgspec.Raw: a Raw would pin the whole input text
    block: list[int] | None = None
    occupancy: Num = msgspec.field(name="est. achieved occupancy %", default=None)
    bytes: Int = None
    bandwidth: Num = msgspec.field(name="memory bandwidth (GB/s)", default=None)
    external_id_legacy: Int = msgspec.field(name="external id", default=None)
    collective: str | None = msgspec.field(name="Collective name", default=None)
    in_nelems: Int = msgspec.field(name="In msg nelems", default=None)
    out_nelems: Int = msgspec.field(name="Out msg nelems", default=None)
    group_size: Int = msgspec.field(name="Group size", default=None)
    dtype: str | None = None
    pg_name: str | int | None = msgspec.field(name="Process Group Name", default=None)
    pg_desc: str | None = msgspec.field(name="Process Group Description", default=None)
    pg_ranks: str | list[int] | None = msgspec.field(name="Process Group Ranks", default=None)
    wait_on_stream: Int = None
    wait_on_event_corr: Int = msgspec.field(name="wait_on_cuda_event_record_corr_id", default=None)
    event_id: Int = msgspec.field(name="wait_on_cuda_event_id", default=None)
    rank: Int = None


class InstantArgs(msgspec.Struct, gc=False):
    """The ``args`` keys an instant event keeps: a marker has no args column. Two fields, so
    that the keys of memory instants (``Addr``, ``Bytes``, ...) are skipped after two
    comparisons instead of one per :class:`Args` field."""

    correlation: Int = None
    rank: Int = None


class Event(msgspec.Struct, gc=False, tag_field="ph", tag="X"):
    """A complete event; instant phases decode as :class:`Instant`, the others as field-less
    stand-ins (:class:`Ignored`).

    Decoding a union tagged by ``ph`` lets msgspec skip every field of the events tracekit
    does not keep (flows, metadata, counters) instead of building strings for them.
    """

    ph: ClassVar[str] = "X"
    cat: str | None = None  # fields in the order Kineto writes them (see Args)
    name: str | None = None
    pid: int | str | None = None
    tid: int | str | None = None
    ts: int | float | str | None = None
    dur: int | float | str | None = None
    args: Args | None = None


# Group keys that no category can collide with: what ``cat`` reads as on the decoded events of
# instant phases and of the phases tracekit does not read, so that ``cat`` alone groups events.
INSTANT_GROUP, SKIP_GROUP = "\0instant", "\0skip"


class Instant(msgspec.Struct, gc=False, tag_field="ph"):
    """An instant event: a marker; its category is not kept."""

    ph: ClassVar[str] = "i"
    cat: ClassVar[str] = INSTANT_GROUP
    name: str | None = None
    pid: int | str | None = None
    tid: int | str | None = None
    ts: int | float | str | None = None
    dur: ClassVar[None] = None
    args: InstantArgs | None = None


class Ignored(msgspec.Struct, gc=False, tag_field="ph"):
    """An event of a phase tracekit does not read; its attributes read as None."""

    ph: ClassVar[str] = ""
    cat: ClassVar[str] = SKIP_GROUP
    name: ClassVar[None] = None
    ts: ClassVar[None] = None
    dur: ClassVar[None] = None
    pid: ClassVar[None] = None
    tid: ClassVar[None] = None
    args: ClassVar[None] = None


PlainEvent = msgspec.defstruct(
    "PlainEvent",  # ``ph`` as a field: the shape of the lenient fallback
    [("ph", str, ""), *((f.name, f.type, f.default) for f in msgspec.structs.fields(Event))],
    gc=False,
)

# The phases of the Chrome trace event format; an event with any other ``ph`` makes the
# typed decode fail and the lenient one (``PlainEvent`` with ``Any`` fields) take over.
KEPT_PHASES = ("i", "I", "R")
IGNORED_PHASES = ("B", "E", "C", "b", "n", "e", "S", "T", "p", "F", "s", "t", "f", "P", "N",
                  "O", "D", "M", "V", "v", "c", "(", ")")  # fmt: skip
_PHASES = (
    Event,
    *(msgspec.defstruct(f"Phase{ord(p)}", [], bases=(Instant,), tag=p, namespace={"ph": p})
      for p in KEPT_PHASES),
    *(msgspec.defstruct(f"Phase{ord(p)}", [], bases=(Ignored,), tag=p, namespace={"ph": p})
      for p in IGNORED_PHASES),
)  # fmt: skip
AnyEvent = Union[_PHASES]  # noqa: UP007 - a runtime union of many struct types


class DeviceProperties(msgspec.Struct, gc=False):
    id: int | None = None
    name: str | None = None
    totalGlobalMem: int | None = None
    numSms: int | None = None
    computeMajor: int | None = None
    computeMinor: int | None = None


class DistributedInfo(msgspec.Struct, gc=False):
    backend: str | None = None
    rank: int | None = None
    world_size: int | None = None


class Trace(msgspec.Struct, gc=False):
    traceEvents: list[AnyEvent] | None = None
    schemaVersion: int | None = None
    deviceProperties: list[DeviceProperties] | None = None
    distributedInfo: DistributedInfo | None = None
    displayTimeUnit: str | None = None
    baseTimeNanoseconds: int | None = None
    cupti_version: int | None = None
    cuda_runtime_version: int | None = None
    roctracer_version: Any = None
    rocprofiler_sdk_version: Any = msgspec.field(name="rocprofiler-sdk_version", default=None)
    hip_runtime_version: int | None = None


def _lenient(struct: type, **overrides: Any) -> Any:
    """The same struct with every field typed ``Any`` (values kept as decoded), except
    ``overrides``: the fallback for traces that give a kept key an unexpected type."""
    fields = []
    for info in msgspec.structs.fields(struct):
        kind = overrides.get(info.name, Any)
        default = info.default if info.default is not msgspec.NODEFAULT else None
        fields.append((info.name, kind, msgspec.field(name=info.encode_name, default=default)))
    return msgspec.defstruct(f"Lenient{struct.__name__}", fields, gc=False)


LenientArgs = _lenient(Args)
LenientEvent = _lenient(PlainEvent, args=LenientArgs | None)
LenientTrace = _lenient(Trace, traceEvents=list[LenientEvent] | None)


class _RawTs(msgspec.Struct, gc=False):
    ts: msgspec.Raw = NULL


class _RawTrace(msgspec.Struct, gc=False):
    traceEvents: list[_RawTs] | None = None


_DECODERS = {
    (False, False): msgspec.json.Decoder(Trace),
    (False, True): msgspec.json.Decoder(list[AnyEvent]),
    (True, False): msgspec.json.Decoder(LenientTrace),
    (True, True): msgspec.json.Decoder(list[LenientEvent]),
}


def is_bare_list(data: Text) -> bool:
    """True for a JSON array of events (no enclosing trace object)."""
    return bytes(data[:4096]).lstrip()[:1] == b"["


InflateError = _zlib.error
_INPUT_BYTES = 1 << 20


def gzip_inflater() -> Any:
    """A decompressor of one gzip member (ISA-L's, which releases the GIL, where installed)."""
    return _zlib.decompressobj(16 + _zlib.MAX_WBITS)


def gzip_chunks(data: bytes, size: int, first: int | None = None) -> Iterator[bytes]:
    """The inflated text of every gzip member of ``data``, at most ``size`` bytes at a time;
    at most ``first`` bytes in the first chunk, doubling from there up to ``size``.

    The input goes in 1 MB at a time: a decompressor keeps the input it has not used as a new
    bytes object after every call, which would copy the rest of a large file each time.
    """
    limit = min(size, first or size)
    view, pos = memoryview(data), 0
    left = b""  # input after the end of the last member
    while (bytes(left[:2]) + bytes(view[pos : pos + max(0, 2 - len(left))])) == GZIP_MAGIC:
        inflater = gzip_inflater()
        while not inflater.eof:
            if inflater.unconsumed_tail:
                given = inflater.unconsumed_tail
            elif left:
                given, left = left, b""
            else:
                given = view[pos : pos + _INPUT_BYTES]
                pos += len(given)
                if not given:
                    raise InflateError("unexpected end of stream")
            text = inflater.decompress(given, limit)
            if text:
                yield text
                limit = min(size, 2 * limit)
        left = inflater.unused_data


def gzipped(path: Path) -> bool:
    """True when the file starts with the gzip magic."""
    with path.open("rb") as fh:
        return fh.read(2) == GZIP_MAGIC


def read_bytes(path: Path) -> bytes:
    """The file's JSON text, un-gzipped (every gzip member) when it is compressed."""
    data = path.read_bytes()
    if data[:2] != GZIP_MAGIC:
        return data
    parts = []
    try:
        while data[:2] == GZIP_MAGIC:
            inflater = gzip_inflater()
            parts.append(inflater.decompress(data))
            if not inflater.eof:
                raise _zlib.error("unexpected end of stream")
            data = inflater.unused_data
    except _zlib.error as exc:
        raise TraceError(
            f"{path}: gzip stream is truncated or corrupt ({exc}); copy the trace again"
        ) from exc
    return parts[0] if len(parts) == 1 else b"".join(parts)


def decode(path: Path, data: Text, warnings: list[str]) -> Trace | LenientTrace:
    """Decode a Chrome trace object or a bare event list into a :class:`Trace`."""
    bare = is_bare_list(data)
    for lenient in (False, True):
        try:
            decoded = _DECODERS[(lenient, bare)].decode(data)
        except msgspec.ValidationError:
            continue  # a kept key with an unexpected type: retry with the lenient structs
        except (UnicodeDecodeError, msgspec.DecodeError) as exc:
            # msgspec < 0.23 raises UnicodeDecodeError for bad UTF-8, later a DecodeError.
            if isinstance(exc, msgspec.DecodeError) and "UTF-8" not in str(exc):
                repaired = without_lone_surrogates(data)
                if repaired is None:
                    raise TraceError(
                        f"{path}: not valid JSON ({exc}); the file may be truncated"
                    ) from exc
                warnings.append("lone UTF-16 surrogate escapes in the trace replaced by U+FFFD")
                return decode(path, repaired, warnings)
            warnings.append("invalid UTF-8 in the trace replaced by U+FFFD")
            return decode(path, utf8_replaced(data), warnings)
        if lenient:
            warnings.append("unexpected value types in event args; read leniently")
        if bare:
            return (LenientTrace if lenient else Trace)(traceEvents=decoded)
        return decoded
    raise TraceError(f"{path}: JSON does not have the shape of a Chrome trace")


def raw_timestamps(data: Text) -> list[bytes | None]:
    """The exact JSON text of every event's ``ts`` (for values a float cannot hold)."""
    try:
        return _raw_timestamps(data)
    except (UnicodeDecodeError, msgspec.DecodeError):  # the repairs :func:`decode` made
        text = utf8_replaced(data)
        return _raw_timestamps(without_lone_surrogates(text) or text)


def _raw_timestamps(data: Text) -> list[bytes | None]:
    if is_bare_list(data):
        events = msgspec.json.decode(data, type=list[_RawTs])
    else:
        events = msgspec.json.decode(data, type=_RawTrace).traceEvents or []
    return [None if e.ts == b"null" else bytes(e.ts) for e in events]


def typed_ints(values: list[Any]) -> pa.Array | None:
    """An int64 array of ``values`` when every one is an int (or None), else None.

    Only for values from the typed decoder, which never yields bools: polars would read
    ``True`` as 1. It converts Python ints about three times faster than pyarrow.
    """
    try:
        return pl.Series(values, dtype=pl.Int64).to_arrow()
    except (TypeError, OverflowError, pl.exceptions.PolarsError):
        return None


def to_ns(values: list[Any], raw: Any = None,
          typed: bool = False) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """Convert µs values (int, float, numeric text) to int64 ns; also return a valid mask.

    Floats too large to resolve ns (epoch µs with fractions) are re-read from their JSON
    text via ``raw()``, a callable returning the raw text of every value. ``typed``: the
    values come from the typed decoder (see :func:`typed_ints`).
    """
    ints = typed_ints(values) if typed else None
    if ints is not None:
        return _int_us_to_ns(ints)
    try:
        arr = pa.array(values)
        if pa.types.is_integer(arr.type) or pa.types.is_null(arr.type):
            return _int_us_to_ns(arr.cast(pa.int64()))
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):  # e.g. beyond 64 bits
        return _text_to_ns([None if v is None else str(v) for v in values])
    if not pa.types.is_floating(arr.type):
        return _text_to_ns([None if v is None else str(v) for v in values])
    floats = arr.to_numpy(zero_copy_only=False)
    valid = ~np.isnan(floats) & (np.abs(floats) < MAX_US)  # float(MAX_US) rounds up
    clean = np.where(valid, floats, 0.0)
    whole = np.floor(clean)
    ns = whole.astype(np.int64) * 1000 + np.rint((clean - whole) * 1000).astype(np.int64)
    # A float this large may already have lost the ns digits that its text carried.
    coarse = valid & (np.abs(clean) >= EXACT_FLOAT_US)
    if coarse.any() and raw is not None:
        texts = raw()
        idx = np.nonzero(coarse)[0]
        exact, ok = _text_to_ns([texts[i] for i in idx])
        ns[idx] = np.where(ok, exact, ns[idx])
    return ns, valid


def _int_us_to_ns(us: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """int64 µs -> (ns, valid): null, and values whose ns would not fit in int64, are
    invalid."""
    values = us.fill_null(0).to_numpy(zero_copy_only=False)
    valid = us.is_valid().to_numpy(zero_copy_only=False) & (values >= -MAX_US) & (values <= MAX_US)
    return np.where(valid, values, 0) * 1000, valid


def _text_to_ns(texts: list[Any]) -> tuple[np.ndarray, np.ndarray]:
    """Decimal µs text -> int64 ns, vectorised; exponent forms go through ``Decimal``."""
    strings = [t.decode("ascii", "replace") if isinstance(t, bytes) else t for t in texts]
    series = pl.Series(strings, dtype=pl.String).str.strip_chars().str.strip_chars('"')
    parts = series.str.split_exact(".", 1)
    whole_text = parts.struct.field("field_0")
    frac_text = parts.struct.field("field_1").fill_null("")
    whole = whole_text.cast(pl.Int64, strict=False)
    whole = pl.when(whole.is_between(-MAX_US, MAX_US)).then(whole)  # null where ns overflow
    digits = (frac_text + "0000").str.slice(0, 4)
    frac = digits.str.slice(0, 3).cast(pl.Int64, strict=False)
    round_up = (digits.str.slice(3, 1) >= "5").cast(pl.Int64)
    magnitude = whole.abs() * 1000 + frac + round_up
    ns = pl.when(series.str.starts_with("-")).then(-magnitude).otherwise(magnitude)
    frame = pl.DataFrame({"ns": pl.select(ns).to_series(), "text": series})
    ok = frame["ns"].is_not_null() & frac_text.str.contains(r"^[0-9]*$")
    out = frame["ns"].fill_null(0).to_numpy().copy()
    valid = ok.to_numpy().copy()
    for i in np.nonzero(~valid & series.is_not_null().to_numpy())[0]:
        try:  # exponent notation such as 1.7e15, rare enough for a per-value path
            ns_value = int((Decimal(series[int(i)]) * 1000).to_integral_value())
        except (InvalidOperation, ValueError, OverflowError):  # OverflowError: "inf"
            continue
        if abs(ns_value) <= MAX_US * 1000:
            out[i], valid[i] = ns_value, True
    return out, valid
