"""Timeline metadata of the AMD readers: the skeleton every one starts from, and one shape of
device entry, whatever the output tells about its GPUs."""

from __future__ import annotations

from typing import Any

from tracekit.timeline import empty_meta


def skeleton(fmt: str, source: str, producer: str, **more: Any) -> dict[str, Any]:
    """Metadata with ``format``, ``source`` and a ``producer`` entry named ``producer``
    (version unknown; ``more`` adds to it)."""
    meta = empty_meta()
    meta["format"] = fmt
    meta["source"] = source
    meta["producer"] = {"name": producer, "version": None, **more}
    return meta


def device(
    index: Any, name: Any = None, cores: Any = None, memory: Any = None, **more: Any
) -> dict[str, Any]:
    """One ``meta["devices"]`` entry of an AMD GPU (``more``: ``arch``, ``node_id`` …)."""
    return {"index": index, "name": name, "vendor": "AMD", "cores": cores, "memory": memory, **more}
