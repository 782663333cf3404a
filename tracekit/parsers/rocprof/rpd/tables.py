"""Bulk reads of the base tables of a rocmProfileData ``.rpd`` file, whatever its schema.

Only base tables are read (the views differ between versions). Schema generations:

* v1 (before Feb 2022, no ``schema_version`` tag): kernel and copy arguments hang off the op
  (``rocpd_kernelop`` / ``rocpd_copyop``, keyed by ``op_ptr_id``);
* v2 (``schema_version`` 2): arguments hang off the API call (``rocpd_kernelapi`` /
  ``rocpd_copyapi``, keyed by ``api_ptr_id``); ``rocpd_op`` still has ``completionSignal``;
* v3 (``schema_version`` 3, Feb 2026): ``rocpd_api`` gains ``domain_id``/``category_id`` and
  its ``args_id`` points into ``rocpd_ustring``.

The version is told from the tables and columns present (the tag only confirms it). Ids
carry a ``session << 32`` offset and roctx rows before v3 another ``1 << 31``: read as int64,
never assumed small or dense. Columns that real files fill with ``''`` although declared
integer (``width``, ``height``, ``codeObject_id`` …) are never read.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from tracekit.errors import TraceError
from tracekit.parsers.sqlite import SqliteSource

REQUIRED = ("rocpd_string", "rocpd_api", "rocpd_op")
_KERNEL_ARGS = (
    "stream",
    "gridX",
    "gridY",
    "gridZ",
    "workgroupX",
    "workgroupY",
    "workgroupZ",
    "groupSegmentSize",
    "privateSegmentSize",
)
_COPY_ARGS = ("stream", "size", "kind")


@dataclass
class RpdTables:
    """The rows of one ``.rpd`` file as polars frames (ids as int64)."""

    version: str
    metadata: dict[str, str]
    strings: pl.DataFrame  # id, string
    api: pl.DataFrame  # id pid tid start end name_id args (text) [domain_id]
    op: pl.DataFrame  # id gpu queue start end description_id type_id
    links: pl.DataFrame  # api_id op_id
    kernel_args: pl.DataFrame | None = None  # key + _KERNEL_ARGS (stream absent in v1)
    copy_args: pl.DataFrame | None = None  # key + _COPY_ARGS (stream absent in v1)
    args_key: str = "api_id"  # what kernel_args / copy_args are keyed by: api_id or op_id
    warnings: list[str] = field(default_factory=list)


def _present(db: SqliteSource, table: str, wanted: tuple[str, ...]) -> dict[str, str]:
    """The columns of ``wanted`` that ``table`` has -> their spelling there (SQLite names are
    case-insensitive: v1 spells ``gridz`` in lower case)."""
    have = {c.lower(): c for c in db.columns(table)}
    return {c: have[c.lower()] for c in wanted if c.lower() in have}


def _frame(db: SqliteSource, table: str, select: str, join: str = "") -> pl.DataFrame:
    return pl.from_arrow(db.scan(table, select, join))  # type: ignore[return-value]


def _version(db: SqliteSource, metadata: dict[str, str]) -> str:
    """``"1"``, ``"2"`` or ``"3"`` from the tables and columns present."""
    api_columns = set(db.columns("rocpd_api"))
    if "rocpd_ustring" in db.tables or "domain_id" in api_columns:
        return "3"
    if "rocpd_kernelapi" in db.tables or "rocpd_copyapi" in db.tables:
        return "2"
    if "rocpd_kernelop" in db.tables or "rocpd_copyop" in db.tables:
        return "1"
    return metadata.get("schema_version", "2").strip() or "2"


def _metadata(db: SqliteSource) -> dict[str, str]:
    if "rocpd_metadata" not in db.tables or not {"tag", "value"} <= set(
        db.columns("rocpd_metadata")
    ):
        return {}
    rows = db.con.execute('SELECT tag, value FROM "rocpd_metadata" ORDER BY id').fetchall()
    return {str(tag): str(value) for tag, value in rows}


def _args_text(db: SqliteSource, version: str) -> str:
    """The SQL join that gives each API row its ``args`` text."""
    table = "rocpd_ustring" if version == "3" and "rocpd_ustring" in db.tables else "rocpd_string"
    return f'LEFT JOIN "{table}" AS s ON s.id = t.args_id'


def read_tables(db: SqliteSource) -> RpdTables:
    """Every row table a timeline needs; one TraceError line when a required table is gone."""
    missing = [t for t in REQUIRED if t not in db.tables]
    if missing:
        raise TraceError(
            f"{db.path}: rocmProfileData file without table(s) {', '.join(missing)};"
            " pass the .rpd file the tracer wrote"
        )
    metadata = _metadata(db)
    version = _version(db, metadata)
    strings = _frame(db, "rocpd_string", "t.id AS id, t.string AS string")
    domain = ", t.domain_id AS domain_id" if "domain_id" in db.columns("rocpd_api") else ""
    api = _frame(
        db,
        "rocpd_api",
        "t.id AS id, t.pid AS pid, t.tid AS tid, t.start AS start, t.end AS end,"
        f" t.apiName_id AS name_id, s.string AS args{domain}",
        _args_text(db, version),
    )
    op = _frame(
        db,
        "rocpd_op",
        "t.id AS id, t.gpuId AS gpu, t.queueId AS queue, t.start AS start, t.end AS end,"
        " t.description_id AS description_id, t.opType_id AS type_id",
    )
    links = (
        _frame(db, "rocpd_api_ops", "t.api_id AS api_id, t.op_id AS op_id")
        if "rocpd_api_ops" in db.tables
        else pl.DataFrame(schema={"api_id": pl.Int64, "op_id": pl.Int64})
    )
    tables = RpdTables(version, metadata, strings, api, op, links)  # type: ignore[arg-type]
    if version == "1":
        tables.args_key = "op_id"
        tables.kernel_args = _args(db, "rocpd_kernelop", "op_ptr_id", _KERNEL_ARGS)
        tables.copy_args = _args(db, "rocpd_copyop", "op_ptr_id", _COPY_ARGS)
    else:
        tables.kernel_args = _args(db, "rocpd_kernelapi", "api_ptr_id", _KERNEL_ARGS)
        tables.copy_args = _args(db, "rocpd_copyapi", "api_ptr_id", _COPY_ARGS)
    if "rocpd_api_ops" not in db.tables:
        tables.warnings.append("no rocpd_api_ops table: device ops are not linked to API calls")
    return tables


def _args(db: SqliteSource, table: str, key: str, wanted: tuple[str, ...]) -> pl.DataFrame | None:
    """An argument table keyed by ``key`` (renamed ``api_id`` / ``op_id``), or None."""
    if table not in db.tables or key not in db.columns(table):
        return None
    columns = _present(db, table, wanted)
    target = "op_id" if key == "op_ptr_id" else "api_id"
    select = ", ".join([f't."{key}" AS {target}', *(f't."{c}" AS {a}' for a, c in columns.items())])
    return _frame(db, table, select)
