"""Large timeline JSON read by several processes, one slice of events each.

Built on :mod:`tracekit.parsers.kineto.chunks` (slices of whole events, worker processes).
The layers of a slice depend on metadata events anywhere in the file (process and thread
names), so a worker (``python -m tracekit.parsers.msprof.worker``) answers in two steps: the
:class:`~.trace_json.Summary` of its slice, then, given the roles and thread names of the
whole file, the :class:`~.trace_layers.Part` of its slice, written to a temporary folder
(:mod:`.part_io`; a pipe would make it wait until this process, busy with its own slice,
reads). Messages are length-prefixed pickles. A plain (not gzip) file is mapped by every
process, which decodes its byte range in place; the cuts between slices even out the work
(:mod:`.split`). This process reads its own slice's layers while a thread gathers the
workers' summaries. Any failure returns None and the caller reads the file in one process.
"""

from __future__ import annotations

import json
import mmap
import pickle
import shutil
import struct
import tempfile
import threading
from pathlib import Path
from typing import Any, BinaryIO

import polars as pl

from tracekit.errors import TraceError
from tracekit.parsers.kineto import chunks
from tracekit.parsers.kineto.decode import gzipped
from tracekit.parsers.msprof import split
from tracekit.parsers.msprof.part_io import load_part
from tracekit.parsers.msprof.trace_decode import decode_bytes
from tracekit.parsers.msprof.trace_json import Layers, finish, layers_of, resolve, scan

MIN_BYTES = 128 << 20  # below this, starting workers costs more than it saves
# work (in bytes of JSON decoded, see .split) this process does besides its slice, less what
# a worker does besides its own: this process frees its events and reads the op tables in a
# thread; a worker starts (imports) and writes its part. Negative: the worker's extra weighs
# more (measured on the 1M-task bench, 2 cores)
HEAD_EXTRA = -(160 << 20)
MAX_HEAD = 0.8  # when this process would read more than this share, it reads alone
MODULE = "tracekit.parsers.msprof.worker"
_LENGTH = struct.Struct(">Q")


def send(stream: BinaryIO, value: Any) -> None:
    """Write one message."""
    body = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_LENGTH.pack(len(body)))
    stream.write(body)
    stream.flush()


def receive(stream: BinaryIO) -> Any:
    """Read one message (EOFError when the other side is gone)."""
    head = stream.read(_LENGTH.size)
    if len(head) < _LENGTH.size:
        raise EOFError("worker ended")
    size = _LENGTH.unpack(head)[0]
    body = stream.read(size)
    if len(body) < size:
        raise EOFError("worker ended")
    return pickle.loads(body)


class _Worker(chunks.Worker):
    """A worker answering in two steps (see the module docstring)."""

    def __init__(self) -> None:
        super().__init__(MODULE)
        self.target: Path | None = None

    def start(self, path: Path, data: bytes, piece: chunks.Slice, plain: bool) -> None:
        """Hand over the slice: its byte range in ``path``, or its bytes."""
        stdin = self.process.stdin
        assert stdin is not None
        if plain:
            header = {"path": str(path), "start": piece.start, "size": piece.stop - piece.start}
            stdin.write(json.dumps(header).encode() + b"\n")
        else:
            stdin.write(json.dumps({"size": piece.stop - piece.start}).encode() + b"\n")
            stdin.write(memoryview(data)[piece.start : piece.stop])
        stdin.flush()

    def summary(self) -> Any:
        return receive(self.process.stdout)  # type: ignore[arg-type]

    def finish(self, context: tuple) -> None:
        """Send the file's roles and thread names, and the temporary folder the worker writes
        its part to (a pipe would have it wait for this busy process)."""
        self.target = Path(tempfile.mkdtemp(prefix="tracekit-part-"))
        send(self.process.stdin, (*context, str(self.target)))  # type: ignore[arg-type]
        self.process.stdin.close()  # type: ignore[union-attr]

    def part(self) -> Any:
        """The worker's part, once it says it is written; None when it failed."""
        try:
            receive(self.process.stdout)  # type: ignore[arg-type]
            return load_part(self.target)  # type: ignore[arg-type]
        except (EOFError, OSError, pickle.UnpicklingError, pl.exceptions.PolarsError):
            return None
        finally:
            shutil.rmtree(self.target, ignore_errors=True)  # type: ignore[arg-type]

    def stop(self) -> None:
        """End the process and remove its part folder."""
        super().stop()
        if self.target is not None:
            shutil.rmtree(self.target, ignore_errors=True)


def start(path: Path) -> list[_Worker]:
    """Start helper processes (before the file is read) when it is large enough to split."""
    size = path.stat().st_size * (8 if gzipped(path) else 1)
    return [_Worker() for _ in range(chunks.workers_for(size, MIN_BYTES) - 1)]


def read_layers(
    path: Path, data: bytes | None, include_python: bool, workers: list[_Worker]
) -> Layers | None:
    """The layers of ``data`` (the text of a gzip file; None for a plain file, which is mapped,
    not read) read by this process and ``workers``; None when it cannot be split (or a slice
    fails), and the workers are stopped either way."""
    mapped = None
    try:
        if not workers:
            return None
        if data is None:
            with path.open("rb") as fh:
                mapped = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        return _read(path, mapped if data is None else data, include_python, workers)
    except (EOFError, OSError, ValueError, pickle.UnpicklingError, TraceError):
        return None
    finally:
        if mapped is not None:
            mapped.close()
        for worker in workers:
            worker.stop()


def _read(path: Path, data: Any, include_python: bool, workers: list[_Worker]) -> Layers | None:
    bare = data[:4096].lstrip(b"\xef\xbb\xbf \t\r\n")[:1] == b"["
    count = len(workers) + 1
    at = split.cuts(data, count, HEAD_EXTRA)
    if at is None or at[0] > MAX_HEAD:
        return None
    planned = chunks.plan(data, count, bare=bare, at=at)
    if planned is None:
        return None
    slices = planned[0]
    plain = isinstance(data, mmap.mmap)
    for worker, piece in zip(workers, slices[1:]):
        worker.start(path, data, piece, plain)
    own = scan(_decode_own(path, data, slices[0]))
    # the workers' summaries are gathered, and the file's context sent back, in a thread; this
    # process meanwhile reads its layers with the context of its own slice, kept when the
    # file's agrees on every pid of the slice
    context = _Context(own.summary, workers, include_python)
    _, roles, threads = resolve([own.summary])
    mine = layers_of(own, roles, threads, include_python)
    out, roles_all, threads_all = context.result()
    if not _agrees(own.summary.pids, (roles, threads), (roles_all, threads_all)):
        mine = layers_of(own, roles_all, threads_all, include_python)
    del own
    parts = [mine] + [worker.part() for worker in workers]
    if any(part is None for part in parts):
        return None
    return finish(out, parts)


class _Context:
    """The file's roles and thread names, resolved from every slice's summary in a thread and
    sent to the workers as soon as the last summary arrives."""

    def __init__(self, own: Any, workers: list[_Worker], include_python: bool) -> None:
        self.found: Any = None
        self.thread = threading.Thread(
            target=self._run, args=(own, workers, include_python), daemon=True
        )
        self.thread.start()

    def _run(self, own: Any, workers: list[_Worker], include_python: bool) -> None:
        try:
            self.found = resolve([own] + [worker.summary() for worker in workers])
            for worker in workers:
                worker.finish((self.found[1], self.found[2], include_python))
        except BaseException as exc:  # handed to the caller by result()
            self.found = exc

    def result(self) -> tuple[Layers, dict, dict]:
        self.thread.join()
        if isinstance(self.found, BaseException):
            raise self.found
        return self.found


def _agrees(pids: list[Any], mine: tuple[dict, dict], full: tuple[dict, dict]) -> bool:
    """True when two contexts, (roles by pid, thread names by (pid, tid)), agree on every pid
    of ``pids``: the layers of a slice with those pids then come out the same."""
    keep = set(pids)
    (roles, threads), (roles_all, threads_all) = mine, full

    def local(names: dict) -> dict:
        return {key: name for key, name in names.items() if key[0] in keep}

    same_roles = all(roles.get(pid) == roles_all.get(pid) for pid in keep)
    return same_roles and local(threads) == local(threads_all)


def _decode_own(path: Path, data: Any, piece: chunks.Slice) -> list[Any]:
    """The events of this process's slice: from a mapping of a plain file (no copy) or from
    the text of a gzip file."""
    if not isinstance(data, mmap.mmap):
        return decode_bytes(path, chunks.slice_text(data, piece))
    mapped, text = chunks.map_slice(path, piece, first=True)
    try:
        return decode_bytes(path, text)
    finally:
        text.release()
        mapped.close()
