"""Bulk reads of one Ascend SQLite export (:class:`DbReader`): tables by the columns wanted
(alternative names allowed), ids resolved to text through ``STRING_IDS`` and the ``ENUM_*``
tables. A file without ``TASK`` is refused."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from tracekit.errors import TraceError
from tracekit.parsers.sqlite import SqliteSource


class DbReader:
    """Bulk reads of one export, strings resolved by joins on ``STRING_IDS``."""

    def __init__(self, path: Path) -> None:
        try:
            self.src = SqliteSource(path)
        except Exception as exc:  # sqlite3.DatabaseError and friends: one line
            raise TraceError(
                f"{path}: not a readable SQLite file ({exc}); export it again"
            ) from exc
        self.path = path
        if "TASK" not in self.src.tables:
            tables = ", ".join(sorted(self.src.tables)[:6]) or "none"
            raise TraceError(
                f"{path}: Ascend db without a TASK table (tables: {tables}); it holds no device "
                "tasks: export with msprof --export=on --type=db or torch_npu ExportType.Db again"
            )
        self.strings = self._strings()

    def close(self) -> None:
        self.src.close()

    def has(self, table: str) -> bool:
        return table in self.src.tables

    def cols(self, table: str) -> tuple[str, ...]:
        return self.src.columns(table)

    def frame(
        self, table: str, wanted: list[str], aliases: dict[str, str] | None = None
    ) -> pl.DataFrame | None:
        """The ``wanted`` columns the table has (``aliases`` map alternative names), or None."""
        if not self.has(table):
            return None
        present = set(self.cols(table))
        select = []
        for name in wanted:
            column = next(
                (
                    c
                    for c in (name, *(aliases or {}).get(name, "").split("|"))
                    if c and c in present
                ),
                None,
            )
            if column is not None:
                select.append(f'"{column}" AS "{name}"')
        if not select:
            return None
        return pl.from_arrow(self.src.scan(table, ", ".join(select)))  # type: ignore[return-value]

    def _strings(self) -> pl.DataFrame:
        frame = self.frame("STRING_IDS", ["id", "value"])
        if frame is None:
            return pl.DataFrame(schema={"id": pl.Int64, "value": pl.String})
        return frame.select(pl.col("id").cast(pl.Int64), pl.col("value").cast(pl.String))

    def enum(self, table: str) -> pl.DataFrame | None:
        frame = self.frame(table, ["id", "name"])
        return (
            None
            if frame is None
            else frame.select(pl.col("id").cast(pl.Int64), pl.col("name").cast(pl.String))
        )

    def resolve(
        self, frame: pl.DataFrame, columns: dict[str, str], table: str = "STRING_IDS"
    ) -> pl.DataFrame:
        """Replace id ``columns`` (source -> target name) by their strings."""
        values = self.strings if table == "STRING_IDS" else self.enum(table)
        for column, target in columns.items():
            if column not in frame.columns:
                continue
            if values is None:  # no enum table: keep the id as text
                frame = frame.with_columns(pl.col(column).cast(pl.String).alias(target))
                continue
            lookup = values.rename({values.columns[0]: "_id", values.columns[1]: target})
            ids = frame[column].cast(pl.Int64).alias("_id")
            frame = frame.drop([c for c in {column, target} if c in frame.columns]).with_columns(
                ids
            )
            frame = frame.join(lookup, on="_id", how="left", maintain_order="left").drop("_id")
        return frame
