"""Perfetto protobuf traces (``.pftrace``, ``.perfetto-trace``, also gzip-compressed).

Reads the TrackEvent part of a ``Trace``: track/process/thread descriptors, slice begin/end
(paired per track as a stack), instants and legacy complete events, interned names,
categories and annotation names with per-sequence incremental state, clock snapshots and
packet clocks (incremental ones too), and zlib-compressed packets; counters, ftrace and the
other data sources are skipped and counted in the warnings. No trace_processor is needed:
the state-carrying packets are parsed with the protobuf classes of the ``perfetto``
package, the track events (millions) column-wise with numpy (:mod:`.wire`), field numbers
taken from the same classes' descriptors.

A file written by :func:`write_pftrace` (``tracekit convert TRACE -o out.pftrace``) reads
back to the same rows and metadata; other files (rocprofv3 ``--output-format pftrace``,
Perfetto SDK apps) load best-effort as described in :mod:`.foreign`.
"""

from __future__ import annotations

import zlib
from pathlib import Path

from google.protobuf.message import DecodeError

from tracekit.errors import TraceError
from tracekit.load import GZIP_MAGIC, Probe
from tracekit.parsers import Parser, Progress
from tracekit.parsers.perfetto.read import decode
from tracekit.parsers.perfetto.rows import build
from tracekit.parsers.perfetto.schema import GZIP_SUFFIXES, SUFFIXES
from tracekit.parsers.perfetto.sniff import looks_like_trace
from tracekit.parsers.perfetto.wire import WireError
from tracekit.parsers.perfetto.write import write_pftrace
from tracekit.timeline import Timeline

try:
    from isal import isal_zlib as _zlib
except ImportError:  # pragma: no cover
    _zlib = zlib  # type: ignore[assignment]


def sniff(probe: Probe) -> bool:
    """A Perfetto protobuf by content; a .pftrace/.perfetto-trace name needs only its first byte."""
    if not probe.path.is_file():
        return False
    name = probe.path.name.lower()
    head = probe.head
    if head.startswith(GZIP_MAGIC):
        return name.endswith(GZIP_SUFFIXES) and probe.text_head[:4096].startswith(b"\x0a")
    if name.endswith(SUFFIXES) and head.startswith(b"\x0a"):
        return True
    return looks_like_trace(head, probe.path.stat().st_size)


def _read(path: Path) -> bytes:
    data = path.read_bytes()
    if data.startswith(GZIP_MAGIC):
        try:
            return _zlib.decompress(data, 16 + zlib.MAX_WBITS)
        except zlib.error as exc:
            raise TraceError(
                f"{path}: gzip data is corrupt or truncated ({exc}); copy it again"
            ) from exc
    return data


def parse(path: Path, progress: Progress | None = None) -> Timeline:
    """Read a Perfetto protobuf trace into a :class:`Timeline`."""
    note = progress or (lambda _msg: None)
    path = Path(path)
    note("decoding protobuf")
    try:
        raw = decode(_read(path))
    except DecodeError as exc:
        raise TraceError(
            f"{path}: truncated or corrupt Perfetto protobuf (the data ends inside a packet"
            " or is damaged); write or copy the trace again"
        ) from exc
    except (WireError, zlib.error) as exc:
        raise TraceError(
            f"{path}: truncated or corrupt Perfetto protobuf ({exc}); write or copy the trace again"
        ) from exc
    if not len(raw.events["pkt"]):
        kinds = ", ".join(sorted(raw.skipped)) or "no packets"
        raise TraceError(
            f"{path}: Perfetto trace has no track events (slices) to read ({kinds});"
            " tracekit reads TrackEvent traces such as rocprofv3 --output-format pftrace"
        )
    note("rows")
    return build(raw, path)


PERFETTO = Parser(
    "perfetto",
    "Perfetto protobuf trace (.pftrace, .perfetto-trace; rocprofv3, Perfetto SDK, tracekit)",
    sniff,
    parse,
)

__all__ = ["PERFETTO", "looks_like_trace", "parse", "sniff", "write_pftrace"]
