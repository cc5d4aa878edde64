"""The few SQL fragments that differ between the databases a store may live in, as one interface.

The Store writes its SQL once, with `?` parameters; each database's folder (sqlite/dialect.py,
postgres/dialect.py) says the fragments that differ: an upsert, a JSON field, a case-blind LIKE, an
ends-with test, a queue's row lock, many rows in one statement. How a change is seen, how the database
is opened and how a write waits are its backend's (backend.py).
"""

from __future__ import annotations


def marks(columns: int, rows: int) -> str:
    """`rows` rows of `columns` `?` parameters, as a VALUES list takes them."""
    row = f"({', '.join('?' * columns)})"
    return ", ".join([row] * rows)


class Dialect:
    """A database's words for what the databases say differently (every method a class's own)."""

    name = ""
    integrity_error: type = Exception  # what the database raises for a key that is stored already
    no_limit = ""  # LIMIT's word for no limit (an OFFSET without a LIMIT)
    like = "LIKE"  # a case-blind LIKE
    claim_rows = ""  # what the job queue's claim adds to its SELECT (a row lock), or nothing

    @staticmethod
    def upsert(table: str, columns, keys, rows: int = 1) -> str:
        """An INSERT of `rows` rows that replaces a stored row of the same `keys`."""
        raise NotImplementedError

    @classmethod
    def insert_rows(cls, table: str, columns, types, rows: list[tuple], replace_on=(), same=()) -> tuple[str, list]:
        """(sql, params) of one statement that inserts `rows` (their columns' SQL `types` for a server),
        replacing a stored row of the same key `replace_on` if given (else such a row is an IntegrityError).
        `same`: columns that usually hold one value in every row (a server may be sent it once)."""
        params = [value for row in rows for value in row]
        if replace_on:
            return cls.upsert(table, columns, replace_on, rows=len(rows)), params
        return f"INSERT INTO {table} ({', '.join(columns)}) VALUES {marks(len(columns), len(rows))}", params

    @staticmethod
    def insert_ignore(table: str, columns) -> str:
        """An INSERT of one row that leaves a stored row of the same key as it is."""
        raise NotImplementedError

    @staticmethod
    def json_text(column: str, key: str) -> str:
        """A JSON text column's field `key`, as text."""
        raise NotImplementedError

    @staticmethod
    def ends_with(column: str) -> str:
        """A test that `column` ends with the second parameter, whose length is the first."""
        raise NotImplementedError
