"""What differs between the two databases a store may live in, in one place: SQLite (a file path, the
embedded default) and PostgreSQL (a `postgresql+psycopg://` URL, a team's server).

The Store writes its SQL once, with `?` parameters; this module holds the few fragments that differ
(an upsert, a JSON field, a case-blind LIKE, an ends-with test, a queue's row lock). How a change is seen
(SQLite's `PRAGMA data_version`, watch.py; a counter row bumped in the same transaction as every change
on PostgreSQL) and how the server is opened are postgres.py's; how a write waits, pg_connection.py's. A URL's password
is never shown: `masked` is the only way a URL is written anywhere.
"""

from __future__ import annotations

import re
import sqlite3

# A scheme and "//": a server's address, not a file. Taken as a path it made folders named like the URL.
_URL = re.compile(r"^\s*([A-Za-z][A-Za-z0-9+.-]*)://")
# The schemes a store accepts: psycopg 3 is the one driver (plain postgresql:// means it too).
SCHEMES = ("postgresql+psycopg", "postgresql", "postgres")
_SCHEMES_SAID = "postgresql+psycopg://user@host:5432/db or a file path (SQLite)"


def url_scheme(text) -> str | None:
    """"postgresql+psycopg://" for a database URL, None for a path."""
    match = _URL.match(text) if isinstance(text, str) else None
    return match.group(1) + "://" if match else None


def is_server_url(text) -> bool:
    """Whether `text` names a PostgreSQL store (an accepted URL)."""
    scheme = url_scheme(text)
    return scheme is not None and scheme[:-3].lower() in SCHEMES


def url_refusal(text) -> str | None:
    """The words that refuse a database URL of another scheme, or None (a path, or an accepted URL)."""
    scheme = url_scheme(text)
    if scheme is None or is_server_url(text):
        return None
    return f"a database URL {scheme}… is not accepted; give {_SCHEMES_SAID}"


def masked(text) -> str:
    """A database URL with its password as ***: the only form a URL is shown, logged or stored in."""
    return _password_as(str(text), "***")


def without_password(text) -> str:
    """A database URL with no password in it (neither `user:password@` nor a `password=` parameter):
    what may travel to another host, whose libpq then reads the password from PGPASSWORD or ~/.pgpass
    (PGPASSFILE). A path, or a URL without one, is returned as it is."""
    return _password_as(str(text), None)


def _password_as(text: str, shown: str | None) -> str:
    """`text` with its password, in either place libpq takes one (`user:password@`, a `?password=`
    parameter), shown as `shown`, or dropped when None."""
    parts = _userinfo(text)
    if parts is not None and parts[2] is not None:
        head, user, _password_, host = parts
        text = f"{head}{user}{'' if shown is None else ':' + shown}@{host}"
    base, question, query = text.partition("?")
    if not question or url_scheme(text) is None:
        return text
    kept = [p if not _is_password_param(p) else None if shown is None else f"{p.split('=', 1)[0]}={shown}"
            for p in query.split("&")]
    kept = [p for p in kept if p is not None]
    return base + ("?" + "&".join(kept) if kept else "")


def _is_password_param(part: str) -> bool:
    return part.split("=", 1)[0].lower() == "password"


def _userinfo(text: str):
    """(scheme://, user, password or None, what follows the last @) of a URL with a user, else None. The
    LAST @: a password with an unescaped @ or / in it is still all password, never shown in part."""
    scheme = url_scheme(text)
    if scheme is None:
        return None
    start = text.index("://") + 3
    rest = text[start:]
    if "@" not in rest:
        return None
    userinfo, host = rest.rsplit("@", 1)
    user, colon, password = userinfo.partition(":")
    return text[:start], user, password if colon else None, host


class ServerURL(str):
    """A PostgreSQL URL whose text is the masked form (what any message, log or page shows of it) and
    whose `url` opens the database: --db, DASHBENCH_DB and the dashboard's settings hold one, so no
    f-string anywhere can print the password. str() of it is the masked text only."""

    def __new__(cls, url):
        full = str(getattr(url, "url", url)).strip()
        self = super().__new__(cls, masked(full))
        self.url = full
        return self


def scrub(message: str, url: str | None) -> str:
    """`message` with the URL's password (if any) replaced: a driver's error may quote what it was given."""
    if not url:
        return message
    password = _password(url)
    text = message.replace(url, masked(url))
    return text.replace(password, "***") if password else text


def _password(url: str) -> str | None:
    parts = _userinfo(url)
    if parts is not None and parts[2]:
        return parts[2]
    _base, question, query = url.partition("?")
    given = [p.split("=", 1)[1] for p in query.split("&") if question and "=" in p and _is_password_param(p)]
    return given[0] if given and given[0] else None


def _marks(columns: int, rows: int) -> str:
    row = f"({', '.join('?' * columns)})"
    return ", ".join([row] * rows)


def array_text(kind: str, values) -> str:
    """A column's values as PostgreSQL's text of an array of `kind` ('{1,2.5,NULL}', '{"a\\"b"}'): a
    fifth of the client's CPU that psycopg's array dumper takes for a batch of 100 samples (it looks up
    each element's dumper). Floats in Python's shortest exact form, which the server reads back exactly."""
    if kind == "text":
        quoted = {v: "NULL" if v is None else '"' + str(v).replace("\\", "\\\\").replace('"', '\\"') + '"'
                  for v in set(values)}  # a batch's run id, quoted once
        return "{" + ",".join(map(quoted.__getitem__, values)) + "}"
    number = float if kind in ("double precision", "real") else int
    if None not in values:
        return "{" + ",".join(map(repr, map(number, values))) + "}"
    return "{" + ",".join("NULL" if v is None else repr(number(v)) for v in values) + "}"


class SQLite:
    """SQLite's words for what the two databases say differently."""

    name = "sqlite"
    integrity_error = sqlite3.IntegrityError
    no_limit = "-1"
    like = "LIKE"  # case-blind for ASCII already

    @staticmethod
    def upsert(table: str, columns, keys, rows: int = 1) -> str:
        """An INSERT of `rows` rows that replaces a stored row of the same `keys`."""
        return f"INSERT OR REPLACE INTO {table} ({', '.join(columns)}) VALUES {_marks(len(columns), rows)}"

    @classmethod
    def insert_rows(cls, table: str, columns, types, rows: list[tuple], replace_on=(), same=()) -> tuple[str, list]:
        """(sql, params) of one statement that inserts `rows` (their columns' SQL `types` for a server),
        replacing a stored row of the same key `replace_on` if given (else such a row is an IntegrityError).
        `same`: columns that usually hold one value in every row (a server may be sent it once)."""
        params = [value for row in rows for value in row]
        if replace_on:
            return cls.upsert(table, columns, replace_on, rows=len(rows)), params
        return f"INSERT INTO {table} ({', '.join(columns)}) VALUES {_marks(len(columns), len(rows))}", params

    @staticmethod
    def insert_ignore(table: str, columns) -> str:
        return f"INSERT OR IGNORE INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"

    @staticmethod
    def json_text(column: str, key: str) -> str:
        return f"json_extract({column}, '$.{key}')"

    @staticmethod
    def ends_with(column: str) -> str:
        """A test that `column` ends with the second parameter, whose length is the first."""
        return f"substr({column}, -?) = ?"

    # Rows the job queue claims: SQLite's BEGIN IMMEDIATE already keeps every other writer out.
    claim_rows = ""


class Postgres(SQLite):
    name = "postgresql"
    no_limit = "ALL"
    like = "ILIKE"

    @property
    def integrity_error(self):
        import psycopg

        return psycopg.errors.IntegrityError

    @staticmethod
    def upsert(table: str, columns, keys, rows: int = 1) -> str:
        update = ", ".join(f"{c} = EXCLUDED.{c}" for c in columns if c not in keys)
        return (f"INSERT INTO {table} ({', '.join(columns)}) VALUES {_marks(len(columns), rows)}"
                f" ON CONFLICT ({', '.join(keys)}) DO UPDATE SET {update}")

    @classmethod
    def insert_rows(cls, table: str, columns, types, rows: list[tuple], replace_on=(), same=()) -> tuple[str, list]:
        if len(rows) == 1:
            return super().insert_rows(table, columns, types, rows, replace_on)
        # One array per column: a parameter each, whatever the rows (a statement of 600 parameters costs
        # psycopg more to convert than the server takes to run it), written as the array's text here. A
        # column of `same` whose rows all hold one value (a batch's run id) goes as that one value: the
        # server then copies one datum per row instead of reading an array of them, a third less of its
        # time for a batch of samples (the samples_need_runs check among it, migration 0011).
        values = list(zip(*rows))
        one = [name in same and len(set(column)) == 1 for name, column in zip(columns, values)]
        if all(one):  # unnest needs an array
            one[-1] = False
        arrays = [k for k in range(len(columns)) if not one[k]]
        picked = ", ".join(f"?::{types[k]}" if one[k] else f"u.c{k}" for k in range(len(columns)))
        sql = (f"INSERT INTO {table} ({', '.join(columns)}) SELECT {picked} FROM unnest("
               f"{', '.join(f'?::{types[k]}[]' for k in arrays)}) AS u({', '.join(f'c{k}' for k in arrays)})")
        if replace_on:
            update = ", ".join(f"{c} = EXCLUDED.{c}" for c in columns if c not in replace_on)
            sql += f" ON CONFLICT ({', '.join(replace_on)}) DO UPDATE SET {update}"
        return sql, ([values[k][0] for k in range(len(columns)) if one[k]]
                     + [array_text(types[k], values[k]) for k in arrays])

    @staticmethod
    def insert_ignore(table: str, columns) -> str:
        return (f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"
                " ON CONFLICT DO NOTHING")

    @staticmethod
    def json_text(column: str, key: str) -> str:
        return f"({column}::json ->> '{key}')"

    @staticmethod
    def ends_with(column: str) -> str:
        return f"right({column}, ?) = ?"

    # A host's pump skips runs another host's pump has claimed in its open transaction, never waits on them.
    claim_rows = " FOR UPDATE OF runs SKIP LOCKED"


SQLITE = SQLite()
POSTGRES = Postgres()


class SQLiteConnection(sqlite3.Connection):
    """sqlite3's connection that knows its dialect, so code handed a connection writes the right SQL."""

    dialect = SQLITE

    def sync(self) -> None:
        """Every statement so far has been answered already (PgConnection's pipelined writes wait here)."""

    def insert_many(self, table: str, columns, rows) -> None:
        """Rows into a table, as fast as this database takes many (PgConnection: COPY)."""
        self.executemany(f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})",
                         rows)
