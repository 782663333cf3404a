"""Recognising and reading a Perfetto protobuf trace file (plain or gzip)."""

from __future__ import annotations

import zlib
from pathlib import Path

from google.protobuf.message import DecodeError

from tracekit.errors import TraceError
from tracekit.parsers.base import Progress
from tracekit.parsers.io import GZIP_MAGIC, InflateError, read_bytes
from tracekit.parsers.perfetto.read import decode
from tracekit.parsers.perfetto.rows import build
from tracekit.parsers.perfetto.sniff import looks_like_trace
from tracekit.parsers.perfetto.wire import WireError
from tracekit.parsers.probe import Probe
from tracekit.pftrace.schema import GZIP_SUFFIXES, SUFFIXES
from tracekit.timeline import Timeline


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


def parse(path: Path, progress: Progress | None = None) -> Timeline:
    """Read a Perfetto protobuf trace into a :class:`Timeline`."""
    note = progress or (lambda _msg: None)
    path = Path(path)
    note("decoding protobuf")
    try:
        raw = decode(read_bytes(path))
    except DecodeError as exc:
        raise TraceError(
            f"{path}: truncated or corrupt Perfetto protobuf (the data ends inside a packet"
            " or is damaged); write or copy the trace again"
        ) from exc
    except (WireError, zlib.error, InflateError) as exc:
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
