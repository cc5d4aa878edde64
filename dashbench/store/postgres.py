"""The PostgreSQL side of the store: connections, the schema's creation, and write transactions.

SQLAlchemy 2's pool (`pool_pre_ping`: a connection is checked as it is taken, so a restarted server or a
dropped SSH tunnel costs a reconnect, not an error) around psycopg 3 in autocommit mode: the Store says
BEGIN and COMMIT itself, as it does on SQLite. A read-only store's sessions run with
`default_transaction_read_only`, so the server refuses any write, whatever a page tries; a role that may
only SELECT is refused the same way and said the same way (ReadOnlyError). Every write transaction bumps
one counter row before it commits: the change token the pages' cache is keyed on.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
import zlib

from dashbench.store import dialect, schema
from dashbench.store.errors import ReadOnlyError, SchemaVersionError, StoreBusyError, StoreError

# ------------------------------------------------------------------------------------

# The one row every write bumps in its own transaction: a reader that sees a new count sees the change.
CHANGES_TABLE = "dashbench_changes"
SCHEMA_TABLE = "dashbench_schema"
BUMP_CHANGES = f"UPDATE {CHANGES_TABLE} SET n = n + 1 WHERE id = 1"


@functools.lru_cache(maxsize=256)
def _pg_sql(sql: str) -> str:
    # psycopg's parameters are %s: a literal % doubles. No statement of the store has a ? in a literal.
    return sql.replace("%", "%%").replace("?", "%s")


class PgConnection:
    """A psycopg connection (autocommit: the Store says BEGIN and COMMIT) that takes the store's `?` SQL."""

    dialect = dialect.POSTGRES

    def __init__(self, raw):
        self.raw = raw  # SQLAlchemy's pooled DB-API connection
        self.driver = raw.driver_connection

    def execute(self, sql: str, params=()):
        cursor = self.driver.cursor()
        params = list(params)
        cursor.execute(_pg_sql(sql) if params else sql, params or None)
        return cursor

    def executemany(self, sql: str, rows):
        cursor = self.driver.cursor()
        cursor.executemany(_pg_sql(sql), list(rows))
        return cursor

    @property
    def in_transaction(self) -> bool:
        from psycopg.pq import TransactionStatus

        return self.driver.info.transaction_status != TransactionStatus.IDLE


_engines: dict = {}  # (url, read_only, lock timeout) -> [engine, Stores using it], least recently used first
_engines_lock = threading.Lock()
# Engines no open Store uses, kept with their idle connections so the next Store (the dashboard's next
# script run, the next command of a sweep) does not connect again; past these, the oldest is disposed.
KEEP_UNUSED = 2


def acquire_engine(url: str, read_only: bool, lock_timeout_s: float):
    """The process's SQLAlchemy engine for this URL and mode, shared by its open Stores: a small pool
    (at most 2 idle connections), kept for the next Store after the last one closes, and disposed when
    more than KEEP_UNUSED engines sit unused, so idle connections never pile up on the server."""
    key = (url, read_only, lock_timeout_s)
    with _engines_lock:
        entry = _engines.pop(key, None)
        if entry is not None:
            _engines[key] = entry  # most recently used last
        if entry is None:
            import sqlalchemy as sa

            options = f"-c lock_timeout={int(lock_timeout_s * 1000)}"
            if read_only:  # every transaction of these sessions is READ ONLY: the server refuses any write
                options += " -c default_transaction_read_only=on"
            engine = sa.create_engine(
                _driver_url(url), pool_pre_ping=True, pool_size=2, max_overflow=6, pool_recycle=1800,
                isolation_level="AUTOCOMMIT",
                connect_args={"options": options, "application_name": "dashbench", "connect_timeout": 10})
            entry = _engines[key] = [engine, 0]
        entry[1] += 1
        return key, entry[0]


def release_engine(key) -> None:
    with _engines_lock:
        entry = _engines.get(key)
        if entry is None:
            return
        entry[1] -= 1
        unused = [k for k, (_engine, users) in _engines.items() if users <= 0]
        for old in unused[:max(0, len(unused) - KEEP_UNUSED)]:
            _engines.pop(old)[0].dispose()


def _driver_url(url: str) -> str:
    _scheme, rest = url.strip().split("://", 1)
    return "postgresql+psycopg://" + rest


def _after_fork() -> None:
    # A child must not use the parent's sockets: its pools start empty (the parent's stay the parent's).
    for engine, _users in list(_engines.values()):
        engine.dispose(close=False)
    _engines.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


def advisory_key(text: str) -> int:
    """A stable 32-bit key for pg_advisory_xact_lock, from a name (a host's queue, the schema)."""
    return zlib.crc32(text.encode()) - 2**31


def is_read_only_error(exc) -> bool:
    """A write refused because the session is read-only or the role may not write."""
    import psycopg

    return isinstance(exc, (psycopg.errors.ReadOnlySqlTransaction, psycopg.errors.InsufficientPrivilege))


def is_busy_error(exc) -> bool:
    """Another writer in the way: its lock held past lock_timeout, or a deadlock or serialization
    failure the server broke by ending this transaction (nothing of it stored)."""
    import psycopg

    return isinstance(exc, (psycopg.errors.LockNotAvailable, psycopg.errors.QueryCanceled,
                            psycopg.errors.DeadlockDetected, psycopg.errors.SerializationFailure))


def one_line(exc: BaseException, url: str | None) -> str:
    """A driver's error as one line, the URL's password never in it."""
    text = str(getattr(exc, "orig", None) or exc).strip().splitlines()
    return dialect.scrub(text[0] if text else type(exc).__name__, url)


def checkout(engine, url: str, shown: str) -> PgConnection:
    """A connection from the pool, checked alive as it is taken (pool_pre_ping); give it back with
    `.raw.close()`. A Store holds one while it is open, as it holds its SQLite connection."""
    import psycopg
    import sqlalchemy as sa

    try:
        return PgConnection(engine.raw_connection())
    except (sa.exc.SQLAlchemyError, psycopg.Error, OSError) as exc:
        raise StoreError(f"cannot open database {shown}: {one_line(exc, url)}") from None


def is_broken(conn: PgConnection) -> bool:
    """Whether the server is gone from this connection (a restart, a dropped tunnel): take another."""
    return conn.driver.closed or conn.driver.broken


@contextlib.contextmanager
def write(conn: PgConnection, url: str, shown: str, what: str):
    """One write transaction on `conn`, the change counter bumped in it; a refused or failed write is one
    line naming the database (ReadOnlyError for a read-only session or a role that may not write)."""
    import psycopg

    try:
        conn.execute("BEGIN")
        try:
            yield conn
            conn.execute(BUMP_CHANGES)
        except BaseException:
            if conn.in_transaction:
                with contextlib.suppress(psycopg.Error):
                    conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
    except psycopg.Error as exc:
        if conn.in_transaction:
            with contextlib.suppress(psycopg.Error):
                conn.execute("ROLLBACK")
        if is_read_only_error(exc):
            raise ReadOnlyError(f"cannot {what}: database {shown} is read-only for this session or role "
                                f"({one_line(exc, url)})") from None
        if is_busy_error(exc):
            raise StoreBusyError(f"cannot {what}: database {shown} is locked by another writer "
                                 f"({one_line(exc, url)})") from None
        if isinstance(exc, (psycopg.OperationalError, psycopg.errors.InFailedSqlTransaction)):
            raise StoreError(f"cannot {what}: database {shown}: {one_line(exc, url)}") from None
        raise


def version(conn: PgConnection) -> tuple[int, int]:
    """(schema version, 0 when this is no store; tables in the current schema): one statement."""
    row = conn.execute(
        f"SELECT to_regclass('{SCHEMA_TABLE}') IS NOT NULL,"
        " (SELECT count(*) FROM pg_tables WHERE schemaname = current_schema())").fetchone()
    if not row[0]:
        return 0, row[1]
    return conn.execute(f"SELECT max(version) FROM {SCHEMA_TABLE}").fetchone()[0] or 0, row[1]


def open_schema(conn: PgConnection, url: str, shown: str, read_only: bool) -> None:
    """Check the database is a store this code reads; create an empty one at the head. Two processes
    opening a new database at once: an advisory lock lets one create it, the other then finds it made."""
    current, tables = version(conn)
    if current > schema.SCHEMA_VERSION:
        raise SchemaVersionError(f"database {shown} has schema v{current}, newer than this dashbench "
                                 f"(v{schema.SCHEMA_VERSION}): upgrade dashbench to open it; it was not changed")
    if current == schema.SCHEMA_VERSION:
        if not read_only and not conn.execute("SELECT has_table_privilege('runs', 'INSERT')").fetchone()[0]:
            # A results server's SELECT-only role: said at once, not by the first page that tries to write.
            role = conn.execute("SELECT current_user").fetchone()[0]
            raise ReadOnlyError(f"database {shown} is read-only for role {role} (it may only SELECT): open it "
                                f"read-only (--read-only, or DASHBENCH_READ_ONLY=1 for the dashboard)")
        return
    if read_only:
        raise StoreError(f"database {shown} is empty or not a dashbench database (read-only mode cannot "
                         f"create one)" if current == 0 else
                         f"database {shown} has schema v{current}; run `dashbench store upgrade` first")
    with write(conn, url, shown, "create the store's tables") as tx:
        tx.execute("SELECT pg_advisory_xact_lock(?)", (advisory_key("dashbench-schema"),))
        current, tables = version(tx)
        if current == 0 and tables:
            raise StoreError(f"database {shown} holds tables but is not a dashbench database")
        if current == 0:
            for statement in schema.postgres_ddl():
                tx.execute(statement)
            tx.execute(f"CREATE TABLE {CHANGES_TABLE} (id INTEGER PRIMARY KEY, n BIGINT NOT NULL)")
            tx.execute(f"INSERT INTO {CHANGES_TABLE} VALUES (1, 0)")
            tx.execute(f"CREATE TABLE {SCHEMA_TABLE} (version INTEGER NOT NULL)")
            tx.execute(f"INSERT INTO {SCHEMA_TABLE} VALUES ({schema.SCHEMA_VERSION})")
        elif current < schema.SCHEMA_VERSION:
            raise StoreError(f"database {shown} has schema v{current}: this dashbench has no step from it")


def change_count(conn: PgConnection) -> int:
    return conn.execute(f"SELECT n FROM {CHANGES_TABLE} WHERE id = 1").fetchone()[0]
