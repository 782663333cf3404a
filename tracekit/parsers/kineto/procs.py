"""The processes that decode slices of a large Kineto trace, seen from the process that
starts them (:class:`SliceWorker`), and the file their tables come back in.

A worker (:mod:`.worker`) reads the trace file itself, in parallel with this process, so that
only a byte range is sent to it; it writes its table to a file (Arrow IPC, the repairs and
warnings in the schema metadata), not to a pipe, so that it never waits for this busy process.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa

from tracekit.parsers.kineto import chunks
from tracekit.parsers.kineto.chunks import Slice, SliceResult

MODULE = "tracekit.parsers.kineto.worker"  # the worker's entry point
META_KEY = b"tracekit-slice"


class SliceWorker(chunks.Worker):
    """The parent's handle on one worker: start it, assign it a slice, collect its table."""

    def __init__(self, path: Path) -> None:
        super().__init__(MODULE, str(path), answers=False)
        self.output: Path | None = None

    def assign(self, piece: Slice, options: dict[str, Any]) -> None:
        """Tell the worker which slice of the file's text to decode, with which options."""
        try:
            handle, name = tempfile.mkstemp(prefix="tracekit-slice-", suffix=".arrow")
            os.close(handle)
            self.output = Path(name)
            header = {**options, "start": piece.start, "stop": piece.stop, "out": name}
            self.process.stdin.write(json.dumps(header).encode() + b"\n")  # type: ignore[union-attr]
            self.process.stdin.close()  # type: ignore[union-attr]
        except OSError:
            self._remove()  # no temporary file, or the worker died: result() says None

    def result(self) -> SliceResult | None:
        """The worker's table, or None when it failed. The table maps the worker's file, which
        is removed at once (on Windows, where a mapped file cannot be removed, it is read)."""
        if self.output is None or self.process.wait() != 0:
            return None
        try:
            name = str(self.output)
            with pa.memory_map(name) if os.name != "nt" else pa.OSFile(name) as source:
                table = pa.ipc.open_file(source).read_all()
        except (OSError, pa.ArrowInvalid):
            return None
        finally:
            self._remove()
        extra = json.loads((table.schema.metadata or {}).get(META_KEY, b"{}"))
        table = table.replace_schema_metadata(None)
        repairs = Counter({tuple(k.split("\0")): v for k, v in extra.get("repairs", {}).items()})
        return SliceResult(table, repairs, Counter(extra.get("unknown", {})),
                           extra.get("warnings", []))  # fmt: skip

    def stop(self) -> None:
        """End the process and remove its file."""
        super().stop()
        self._remove()

    def _remove(self) -> None:
        if self.output is not None:
            with contextlib.suppress(OSError):
                self.output.unlink()
            self.output = None


def write_result(path: Path, result: SliceResult) -> None:
    """A worker's answer: its table as an Arrow IPC file, the rest in schema metadata."""
    extra = {
        "repairs": {"\0".join(k): v for k, v in result.repairs.items()},
        "unknown": dict(result.unknown),
        "warnings": result.warnings,
    }
    table = result.table.replace_schema_metadata({META_KEY: json.dumps(extra)})
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
