"""Which AMD SQLite output a file is, told by its table names; the three rules exclude each
other: a rocmProfileData ``.rpd`` (``rocpd_api`` and ``rocpd_op``), a rocprofiler-sdk rocpd
database (``rocpd_string*`` / ``rocpd_metadata*`` tables, none of the ``.rpd`` pair) and a
legacy rocprof ``results.db`` (HIP, HSA, OPS, COPY, KERN, rocTX; no ``rocpd_`` table)."""

from __future__ import annotations

RPD_TABLES = frozenset({"rocpd_api", "rocpd_op"})
ROCPD_STRING, ROCPD_META = "rocpd_string", "rocpd_metadata"
RESULTS_TABLES = ("HIP", "HSA", "OPS", "COPY", "KERN", "rocTX")


def is_rpd(tables: frozenset[str]) -> bool:
    """Whether SQLite table names are those of a rocmProfileData file."""
    return tables >= RPD_TABLES


def is_rocpd(tables: frozenset[str]) -> bool:
    """rocpd string or metadata tables (any schema version), and not a ``.rpd`` file."""
    return not is_rpd(tables) and any(t.startswith((ROCPD_STRING, ROCPD_META)) for t in tables)


def is_results_db(tables: frozenset[str]) -> bool:
    """The table set that rocprof's tblextr.py writes (and no rocpd or nsys tables)."""
    if any(t.startswith("rocpd_") for t in tables) or "StringIds" in tables:
        return False
    return bool(set(RESULTS_TABLES[:5]) & tables)
