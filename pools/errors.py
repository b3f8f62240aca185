"""The one error type for bad pool input: it names where the problem is and what was expected."""

from __future__ import annotations


class PoolError(ValueError):
    """Bad pool input; the message names the file, table, row or id, field and expectation."""

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        table: str | None = None,
        row: int | str | None = None,
        field: str | None = None,
        column: str | None = None,
    ) -> None:
        parts = []
        if file is not None:
            parts.append(str(file))
        if table is not None:
            parts.append(f"table {table}")
        if row is not None:
            parts.append(f"row {row}")
        if field is not None:
            parts.append(f"field {field!r}")
        if column is not None:  # a column of a foreign table (CSV, Parquet) or a field path of a JSON record
            parts.append(f"column {column!r}")
        where = ", ".join(parts)
        super().__init__(f"{where}: {message}" if where else message)
        self.file, self.table, self.row, self.field, self.column = file, table, row, field, column
