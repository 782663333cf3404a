"""Reading PyTorch-profiler (Kineto) Chrome-trace JSON with a typed msgspec decoder.

Only the fields tracekit keeps are declared; msgspec skips the rest in C. Timestamps are
converted to integer ns without passing large epoch values through float multiplication.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar, Union

import msgspec

from tracekit.errors import TraceError
from tracekit.parsers.kineto.escapes import utf8_replaced, without_lone_surrogates

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
    # an operator's inputs (record_shapes): scalar values, element types and shapes, kept as
    # the trace's JSON text; collect.py copies them out at once, so that no Raw pins the
    # input text (a Raw takes part in no union: absent reads as the Raw text ``null``)
    concrete_inputs: msgspec.Raw = msgspec.field(name="Concrete Inputs", default=NULL)
    input_types: msgspec.Raw = msgspec.field(name="Input type", default=NULL)
    input_dims: msgspec.Raw = msgspec.field(name="Input Dims", default=NULL)
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
    seq: Int = msgspec.field(name="Seq", default=None)  # per process group (PyTorch 2.12+)
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
