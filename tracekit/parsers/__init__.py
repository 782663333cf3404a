"""Parser registry: one package per profiler family, each exposing :class:`Parser` objects.

The families share a small toolkit: :mod:`.probe` (what sniffers look at), :mod:`.io`
(gzip, mapping, whole-file text), :mod:`.convert` (Python values to Arrow columns),
:mod:`.name_pool` and :mod:`.assemble` (one route to the events table), :mod:`.sqlite`,
:mod:`.slices` and :mod:`.workers` (large JSON decoded by several processes). No family
imports another's modules.
"""

from __future__ import annotations

from tracekit.parsers.base import Parser


def registry() -> list[Parser]:
    """All built-in parsers, most specific first."""
    from tracekit.parsers import kineto, mindie, msprof, nsys, perfetto, rocprof, saved

    return [
        nsys.SQLITE,
        rocprof.RPD,
        rocprof.ROCPD,
        *rocprof.LEGACY_PARSERS,
        nsys.REPORT,
        perfetto.PERFETTO,
        rocprof.ROCPROFV3_JSON,
        rocprof.ROCPROFV3_CSV,
        rocprof.RPD_JSON,
        mindie.MINDIE,
        msprof.MSPROF_DB,
        msprof.MSPROF,
        kineto.KINETO,
        saved.PARQUET,
        saved.ARROW,
    ]
