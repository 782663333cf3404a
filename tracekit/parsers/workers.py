"""Worker processes that read slices of a large trace (Kineto and msprof alike), and the one
protocol between them and the process that starts them.

Decoding JSON and reading fields per event hold the GIL, so threads cannot share that work:
each extra worker is a fresh ``python -m <module>`` process (no fork: nothing of the caller's
threads or ``__main__`` is inherited), started early so that its imports overlap the caller's
reading, and given work later.

Protocol: messages are length-prefixed pickles, both ways (stdin / stdout), possibly followed
by raw bytes the worker reads itself. The parent ends with :meth:`Worker.finish`, which also
names a temporary folder; the worker writes its answer there (:func:`store`: tables and frames
as Arrow IPC files, written and mapped back several times faster than pickled, the rest
pickled), not to a pipe, so that it never waits for the busy parent, and says so. The folder
is removed once the answer is read, and by :meth:`Worker.stop` in any case. Any failure makes
:meth:`Worker.result` None, and the caller reads the trace in one process.
"""

from __future__ import annotations

import contextlib
import gc
import io
import os
import pickle
import shutil
import struct
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

import polars as pl
import pyarrow as pa

from tracekit.parsers.io import gzipped

GZIP_RATIO = 8  # JSON gzips 8 to 15 times: the text size of a gzip file, at least
MAX_PROCESSES = 8
_LENGTH = struct.Struct(">Q")
_ANSWER = "answer.pickle"
_FAILED = (EOFError, OSError, pickle.UnpicklingError, pa.ArrowInvalid, pl.exceptions.PolarsError)


def processes_for(size: int, min_bytes: int) -> int:
    """How many processes to use for ``size`` bytes of JSON (1 means: do not split), one per
    ``min_bytes``, at most one per usable CPU and :data:`MAX_PROCESSES`;
    ``TRACEKIT_PROCESSES=1`` keeps to one."""
    affinity = getattr(os, "sched_getaffinity", None)
    cpus = len(affinity(0)) if affinity else (os.cpu_count() or 1)
    if size < min_bytes or cpus < 2 or os.environ.get("TRACEKIT_PROCESSES") == "1":
        return 1
    return min(cpus, MAX_PROCESSES, max(2, size // min_bytes))


def start(module: str, path: Path, min_bytes: int, *args: str) -> list[Worker]:
    """Start the helper processes for the file at ``path`` (before it is read) when its text is
    large enough to split: ``python -m module args...``, one fewer than :func:`processes_for`."""
    size = path.stat().st_size * (GZIP_RATIO if gzipped(path) else 1)
    return [Worker(module, *args) for _ in range(processes_for(size, min_bytes) - 1)]


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


class _Storing(pickle.Pickler):
    """Pickles a value with its Arrow tables and polars frames written to files beside it."""

    def __init__(self, file: BinaryIO, folder: Path) -> None:
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.folder, self.count = folder, 0

    def persistent_id(self, obj: Any) -> tuple[str, str] | None:
        if isinstance(obj, pa.Table):
            name = self._name()
            path = str(self.folder / name)
            with pa.OSFile(path, "wb") as sink, pa.ipc.new_file(sink, obj.schema) as writer:
                writer.write_table(obj)
            return ("table", name)
        if isinstance(obj, pl.DataFrame):
            name = self._name()
            obj.write_ipc(self.folder / name, compression="uncompressed")
            return ("frame", name)
        return None

    def _name(self) -> str:
        self.count += 1
        return f"{self.count}.arrow"


class _Loading(pickle.Unpickler):
    def __init__(self, file: BinaryIO, folder: Path) -> None:
        super().__init__(file)
        self.folder = folder

    def persistent_load(self, pid: Any) -> Any:
        kind, name = pid
        path = str(self.folder / name)
        if kind == "frame":
            return pl.read_ipc(path)
        # the table maps its file (removed with the folder: the mapping stays valid); on
        # Windows, where a mapped file cannot be removed, it is read
        with pa.memory_map(path) if os.name != "nt" else pa.OSFile(path) as source:
            return pa.ipc.open_file(source).read_all()


def store(folder: Path, value: Any) -> None:
    """Write ``value`` into ``folder`` (which exists)."""
    buffer = io.BytesIO()
    _Storing(buffer, folder).dump(value)
    (folder / _ANSWER).write_bytes(buffer.getvalue())


def load(folder: Path) -> Any:
    """The value :func:`store` wrote into ``folder``."""
    with (folder / _ANSWER).open("rb") as fh:
        return _Loading(fh, folder).load()


class Worker:
    """The parent's handle on one worker process."""

    def __init__(self, module: str, *args: str) -> None:
        """Start ``python -m module args...``."""
        self.process = subprocess.Popen(
            [sys.executable, "-m", module, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        self.folder: Path | None = None
        self.failed = False

    def send(self, value: Any, raw: Any = None) -> None:
        """Send one message, followed by the bytes ``raw`` when given."""
        stdin = self.process.stdin
        assert stdin is not None
        send(stdin, value)
        if raw is not None:
            stdin.write(raw)
            stdin.flush()

    def receive(self) -> Any:
        """The worker's next message (EOFError when it ended)."""
        return receive(self.process.stdout)  # type: ignore[arg-type]

    def finish(self, value: Any) -> None:
        """Send the last message, ``(value, folder)``: what the worker needs to answer, and a new
        temporary folder to write the answer to. A worker that is gone answers None."""
        try:
            self.folder = Path(tempfile.mkdtemp(prefix="tracekit-worker-"))
            self.send((value, str(self.folder)))
            self.process.stdin.close()  # type: ignore[union-attr]
        except OSError:
            self.failed = True
            self._remove()

    def result(self) -> Any:
        """The worker's answer, once it says it is written; None when it failed. The folder is
        removed."""
        try:
            if self.failed or self.folder is None:
                return None
            self.receive()
            return load(self.folder)
        except _FAILED:
            return None
        finally:
            self._remove()

    def stop(self) -> None:
        """End the process (it may never have been given work) and remove its folder."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None and not stream.closed:
                with contextlib.suppress(OSError):
                    stream.close()
        self._remove()

    def _remove(self) -> None:
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None


class Parent:
    """The worker's side of the protocol: messages from and to the process that started it."""

    def __init__(self) -> None:
        self.input: BinaryIO = sys.stdin.buffer
        self.output: BinaryIO = sys.stdout.buffer

    def receive(self) -> Any:
        return receive(self.input)

    def send(self, value: Any) -> None:
        send(self.output, value)

    def answer(self, folder: str, value: Any) -> None:
        """Write ``value`` into ``folder`` (named by the parent's last message) and say so."""
        store(Path(folder), value)
        self.send(True)


def serve(main: Callable[[Parent], None]) -> None:
    """Run a worker's ``main`` and end the process: a short-lived process building many objects
    keeps the garbage collector off (reference counting suffices) and skips freeing what is left
    one object at a time once it has answered."""
    gc.disable()
    main(Parent())
    os._exit(0)
