"""Writing a timeline out: Parquet, Arrow IPC (metadata preserved) or a Perfetto trace."""

from __future__ import annotations

from pathlib import Path

import pyarrow.feather as feather
import pyarrow.parquet as pq

from tracekit.errors import TraceError
from tracekit.pftrace import SUFFIXES as PERFETTO_SUFFIXES
from tracekit.timeline import Timeline

ARROW_SUFFIXES = (".arrow", ".feather", ".ipc")


def check_output(path: str | Path) -> Path:
    """Refuse (TraceError) an output name :func:`save` cannot write; return it."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in (".parquet", *ARROW_SUFFIXES, *PERFETTO_SUFFIXES):
        raise TraceError(
            f"{path}: unknown output type '{suffix}'; use a .parquet or .arrow file name"
            " (.pftrace for the Perfetto UI)"
        )
    if not path.parent.is_dir():
        raise TraceError(f"{path}: folder {path.parent} does not exist; create it first")
    return path


def save(timeline: Timeline, path: str | Path) -> Path:
    """Write ``timeline`` to Parquet (``.parquet``), Arrow IPC (``.arrow``/``.feather``) or a
    Perfetto trace (``.pftrace``/``.perfetto-trace``, for ui.perfetto.dev); return the path."""
    path = check_output(path)
    try:
        if path.suffix.lower() in PERFETTO_SUFFIXES:
            from tracekit.export.pftrace import write_pftrace  # protobuf classes: on demand

            write_pftrace(timeline, path)
        elif path.suffix.lower() == ".parquet":
            pq.write_table(timeline.events, path, compression="zstd")
        else:
            feather.write_feather(timeline.events, path, compression="zstd")
    except OSError as exc:
        raise TraceError(f"{path}: cannot write ({exc.strerror or exc})") from exc
    return path


__all__ = ["check_output", "save"]
