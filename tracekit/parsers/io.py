"""Reading trace files, shared by every parser: gzip (ISA-L where installed), whole-file
text, memory mapping with one fallback, and the head of a file's text for sniffing."""

from __future__ import annotations

import contextlib
import mmap
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tracekit.errors import TraceError

try:  # ISA-L inflates about three times faster than zlib; same format, same checks
    from isal import isal_zlib as _zlib
except ImportError:  # pragma: no cover - isal ships wheels for the common platforms
    _zlib = zlib  # type: ignore[assignment]

GZIP_MAGIC = b"\x1f\x8b"
SQLITE_MAGIC = b"SQLite format 3\x00"
InflateError = _zlib.error
_INPUT_BYTES = 1 << 20
_COPY_BYTES = 1 << 20


def gzipped(path: Path) -> bool:
    """True when the file starts with the gzip magic."""
    with path.open("rb") as fh:
        return fh.read(2) == GZIP_MAGIC


def gzip_inflater() -> Any:
    """A decompressor of one gzip member (ISA-L's, which releases the GIL, where installed)."""
    return _zlib.decompressobj(16 + _zlib.MAX_WBITS)


def _gzip_error(path: Path, exc: BaseException) -> TraceError:
    return TraceError(f"{path}: gzip stream is truncated or corrupt ({exc}); copy the trace again")


def inflate_head(data: bytes, limit: int) -> bytes:
    """Up to ``limit`` bytes of text inflated from the start of gzip ``data``; empty when it is
    not valid gzip."""
    try:
        return gzip_inflater().decompress(data, limit)
    except (InflateError, zlib.error, ValueError):
        return b""


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


def read_bytes(path: Path) -> bytes:
    """The file's content, inflated (every gzip member) when it is gzip."""
    data = path.read_bytes()
    if data[:2] != GZIP_MAGIC:
        return data
    parts = []
    try:
        while data[:2] == GZIP_MAGIC:
            inflater = gzip_inflater()
            parts.append(inflater.decompress(data))
            if not inflater.eof:
                raise InflateError("unexpected end of stream")
            data = inflater.unused_data
    except (InflateError, zlib.error) as exc:
        raise _gzip_error(path, exc) from exc
    return parts[0] if len(parts) == 1 else b"".join(parts)


def inflate_to(path: Path, target: Path) -> None:
    """Inflate gzip file ``path`` into ``target``, 1 MB at a time."""
    try:
        with path.open("rb") as src, target.open("wb") as dst:
            data = src.read()
            for text in gzip_chunks(data, _COPY_BYTES):
                dst.write(text)
    except (InflateError, zlib.error, OSError) as exc:
        raise _gzip_error(path, exc) from exc


def map_file(path: Path, access: int = mmap.ACCESS_READ) -> mmap.mmap | None:
    """A read-only mapping of a non-empty file; None where the file system cannot map it
    (the caller then reads the bytes)."""
    with path.open("rb") as fh:
        try:
            return mmap.mmap(fh.fileno(), 0, access=access)
        except (OSError, ValueError):
            return None


@contextlib.contextmanager
def file_text(path: Path) -> Iterator[Any]:
    """The file's text: inflated when it is gzip, else mapped (not read into memory), or read
    where it cannot be mapped; a mapping is closed on exit."""
    mapped = None if gzipped(path) or not path.stat().st_size else map_file(path)
    if mapped is None:
        yield read_bytes(path)
        return
    try:
        yield mapped
    finally:
        with contextlib.suppress(BufferError):  # a view still held by a failed decode
            mapped.close()
