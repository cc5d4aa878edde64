"""SQLite's words for what the databases say differently (dialect.Dialect), and its connection class."""

from __future__ import annotations

import sqlite3

from dashbench.store.dialect import Dialect, marks


class SQLite(Dialect):
    name = "sqlite"
    integrity_error = sqlite3.IntegrityError
    no_limit = "-1"
    like = "LIKE"  # case-blind for ASCII already

    @staticmethod
    def upsert(table: str, columns, keys, rows: int = 1) -> str:
        return f"INSERT OR REPLACE INTO {table} ({', '.join(columns)}) VALUES {marks(len(columns), rows)}"

    @staticmethod
    def insert_ignore(table: str, columns) -> str:
        return f"INSERT OR IGNORE INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"

    @staticmethod
    def json_text(column: str, key: str) -> str:
        return f"json_extract({column}, '$.{key}')"

    @staticmethod
    def ends_with(column: str) -> str:
        return f"substr({column}, -?) = ?"

    # Rows the job queue claims: SQLite's BEGIN IMMEDIATE already keeps every other writer out.
    claim_rows = ""


SQLITE = SQLite()


class SQLiteConnection(sqlite3.Connection):
    """sqlite3's connection that knows its dialect, so code handed a connection writes the right SQL."""

    dialect = SQLITE

    def sync(self) -> None:
        """Every statement so far has been answered already (PgConnection's pipelined writes wait here)."""

    def insert_many(self, table: str, columns, rows) -> None:
        """Rows into a table, as fast as this database takes many (PgConnection: COPY)."""
        self.executemany(f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})", rows)
