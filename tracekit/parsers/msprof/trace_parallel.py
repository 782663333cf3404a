"""Large timeline JSON read by several processes, one slice of events each.

Built on :mod:`tracekit.parsers.slices` (slices of whole events, cut where the work evens out)
and :mod:`tracekit.parsers.workers` (worker processes, answers through files). The layers of a
slice depend on metadata events anywhere in the file (process and thread names), so a worker
(``python -m tracekit.parsers.msprof.worker``) answers in two steps: the
:class:`~.trace_json.Summary` of its slice, then, given the roles and thread names of the whole
file, the :class:`~.trace_layers.SliceLayers` of its slice. A plain (not gzip) file is mapped
by every process, which decodes its byte range in place; the slice of a gzip file is sent to
the worker. This process reads its own slice's layers while a thread gathers the workers'
summaries. Any failure returns None and the caller reads the file in one process.
"""

from __future__ import annotations

import pickle
import threading
from pathlib import Path
from typing import Any

from tracekit.errors import TraceError
from tracekit.parsers.msprof.trace_decode import decode_bytes
from tracekit.parsers.msprof.trace_json import Layers, finish, layers_of, resolve, scan
from tracekit.parsers.slices import Slice, mapped_slice, plan, slice_text, work_cuts
from tracekit.parsers.workers import Worker
from tracekit.parsers.workers import start as start_workers

WORKER = "tracekit.parsers.msprof.worker"
MIN_BYTES = 128 << 20  # of JSON per process: below this, starting workers costs more than it saves
# work (in bytes of JSON decoded, see slices.work_cuts) this process does besides its slice,
# less what a worker does besides its own: this process frees its events and reads the op
# tables in a thread; a worker starts (imports) and writes its layers. Negative: the worker's
# extra weighs more (measured on the 1M-task bench, 2 cores)
HEAD_EXTRA = -(160 << 20)
MAX_HEAD = 0.8  # when this process would read more than this share, it reads alone


def start(path: Path) -> list[Worker]:
    """Start helper processes (before the file is read) when it is large enough to split."""
    return start_workers(WORKER, path, MIN_BYTES)


def read_layers(
    path: Path, data: Any, include_python: bool, helpers: list[Worker]
) -> Layers | None:
    """The layers of ``data`` (the file's text: a mapping of a plain file, or bytes) read by
    this process and ``helpers``; None when it cannot be split (or a slice fails), and the
    workers are stopped either way."""
    try:
        if not helpers:
            return None
        return _read(path, data, include_python, helpers)
    except (EOFError, OSError, ValueError, pickle.UnpicklingError, TraceError):
        return None
    finally:
        for worker in helpers:
            worker.stop()


def _read(path: Path, data: Any, include_python: bool, helpers: list[Worker]) -> Layers | None:
    bare = data[:4096].lstrip(b"\xef\xbb\xbf \t\r\n")[:1] == b"["
    count = len(helpers) + 1
    at = work_cuts(data, count, HEAD_EXTRA)
    if at is None or at[0] > MAX_HEAD:
        return None
    planned = plan(data, count, bare=bare, at=at)
    if planned is None:
        return None
    slices = planned[0]
    plain = not isinstance(data, bytes)  # a mapping of a plain file, not its bytes
    for worker, piece in zip(helpers, slices[1:]):
        if plain:  # the worker maps the file itself
            worker.send({"path": str(path), "start": piece.start, "size": piece.stop - piece.start})
        else:
            worker.send(
                {"size": piece.stop - piece.start}, memoryview(data)[piece.start : piece.stop]
            )
    own = scan(_decode_own(path, data, slices[0], plain))
    # the workers' summaries are gathered, and the file's context sent back, in a thread; this
    # process meanwhile reads its layers with the context of its own slice, kept when the
    # file's agrees on every pid of the slice
    context = _Context(own.summary, helpers, include_python)
    _, roles, threads = resolve([own.summary])
    mine = layers_of(own, roles, threads, include_python)
    out, roles_all, threads_all = context.result()
    if not _agrees(own.summary.pids, (roles, threads), (roles_all, threads_all)):
        mine = layers_of(own, roles_all, threads_all, include_python)
    del own
    layers = [mine] + [worker.result() for worker in helpers]
    if any(one is None for one in layers):
        return None
    return finish(out, layers)


class _Context:
    """The file's roles and thread names, resolved from every slice's summary in a thread and
    sent to the workers as soon as the last summary arrives."""

    def __init__(self, own: Any, helpers: list[Worker], include_python: bool) -> None:
        self.found: Any = None
        self.thread = threading.Thread(
            target=self._run, args=(own, helpers, include_python), daemon=True
        )
        self.thread.start()

    def _run(self, own: Any, helpers: list[Worker], include_python: bool) -> None:
        try:
            self.found = resolve([own] + [worker.receive() for worker in helpers])
            for worker in helpers:
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


def _decode_own(path: Path, data: Any, piece: Slice, plain: bool) -> list[Any]:
    """The events of this process's slice: from a private mapping of a plain file (no copy)
    or from the text of a gzip file."""
    if not plain:
        return decode_bytes(path, slice_text(data, piece))
    with mapped_slice(path, piece, first=True) as text:
        return decode_bytes(path, text)
