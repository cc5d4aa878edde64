"""The PostgreSQL side of the store: connections, the schema's check, and write transactions.

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

from dashbench.store import dialect, retry, schema
from dashbench.store.errors import ReadOnlyError, SchemaVersionError, StoreError

# ------------------------------------------------------------------------------------

# The one row every write bumps in its own transaction: a reader that sees a new count sees the change.
CHANGES_TABLE = "dashbench_changes"
SCHEMA_TABLE = "dashbench_schema"
BUMP_CHANGES = f"UPDATE {CHANGES_TABLE} SET n = n + 1 WHERE id = 1"
# A write transaction that changed nothing (the dashboard's queue pump on every rerun, with nothing to
# start) has no transaction id: it leaves the count, so the pages' cached reads stay valid.
BUMP_IF_CHANGED = BUMP_CHANGES + " AND txid_current_if_assigned() IS NOT NULL"


@functools.lru_cache(maxsize=256)
def _pg_sql(sql: str) -> str:
    # psycopg's parameters are %s: a literal % doubles. No statement of the store has a ? in a literal.
    return sql.replace("%", "%%").replace("?", "%s")


class PgConnection:
    """A psycopg connection (autocommit: the Store says BEGIN and COMMIT) that takes the store's `?` SQL."""

    dialect = dialect.POSTGRES

    def __init__(self, raw, lock_timeout_s: float):
        self.raw = raw  # SQLAlchemy's pooled DB-API connection
        self.driver = raw.driver_connection
        self.pipeline = None  # psycopg's pipeline while a write transaction is open (write())
        self.full_lock_ms = int(lock_timeout_s * 1000)  # the engine's lock_timeout, the store's busy timeout
        # The session's now: UNKNOWN until this object sets it (a pooled session may come back with the
        # brief wait another Store left on it) or after a failed write.
        self.lock_ms = UNKNOWN

    def set_lock_wait(self, ms: int) -> None:
        """The session's lock_timeout, set (pipelined with what follows) only when it differs."""
        if ms != self.lock_ms:
            self.lock_ms = UNKNOWN  # a set_config in a transaction that fails is undone with it
            self.execute("SELECT set_config('lock_timeout', ?, false)", (f"{ms}ms",))
            self.lock_ms = ms

    def execute(self, sql: str, params=()):
        cursor = self.driver.cursor()
        params = list(params)
        cursor.execute(_pg_sql(sql) if params else sql, params or None)
        return cursor if self.pipeline is None else _Piped(cursor, self.pipeline)

    def executemany(self, sql: str, rows):
        cursor = self.driver.cursor()
        cursor.executemany(_pg_sql(sql), list(rows))
        return cursor

    def insert_many(self, table: str, columns, rows) -> None:
        """Rows into a table by COPY: one stream, no statement per row (an import of 100k runs' samples).
        Pipelined writes cannot COPY: they insert row by row (executemany)."""
        if self.pipeline is not None:
            self.executemany(f"INSERT INTO {table} ({', '.join(columns)}) VALUES "
                             f"({', '.join('?' * len(columns))})", rows)
            return
        with self.driver.cursor().copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)

    def sync(self) -> None:
        """Have the server answer every statement sent so far: an error among them is raised here (a
        pipelined write's statements are answered together at its end otherwise)."""
        if self.pipeline is not None:
            self.pipeline.sync()

    @property
    def in_transaction(self) -> bool:
        from psycopg.pq import TransactionStatus

        return self.driver.info.transaction_status != TransactionStatus.IDLE


UNKNOWN = -1


class _Piped:
    """A cursor of a pipelined write: fetching waits for the server's answer (psycopg flushes the
    pipeline), and so does the row count, which the store's status moves read."""

    def __init__(self, cursor, pipeline):
        self._cursor, self._pipeline = cursor, pipeline

    @property
    def rowcount(self) -> int:
        if self._cursor.pgresult is None:
            self._pipeline.sync()
        return self._cursor.rowcount

    def fetchone(self):
        return self._cursor.fetchone()

    def fetchall(self):
        return self._cursor.fetchall()

    def __iter__(self):
        return iter(self._cursor.fetchall())


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
    line = dialect.scrub(text[0] if text else type(exc).__name__, url)
    if url and any(words in line for words in _AUTH_FAILED) and dialect.without_password(url) == url:
        line += f" ({PASSWORD_HINT})"
    return line


# What libpq says when the server wants a password it was not given, or was given a wrong one.
_AUTH_FAILED = ("no password supplied", "password authentication failed")
# A URL without a password (a cluster run's: the password never travels with a job) leaves it to libpq.
PASSWORD_HINT = ("the URL has no password: libpq reads it from ~/.pgpass on this host, the file "
                 "$PGPASSFILE names, or $PGPASSWORD")


def checkout(engine, url: str, shown: str, lock_timeout_s: float) -> PgConnection:
    """A connection from the pool, checked alive as it is taken (pool_pre_ping); give it back with
    `.raw.close()`. A Store holds one while it is open, as it holds its SQLite connection."""
    import psycopg
    import sqlalchemy as sa

    try:
        return PgConnection(engine.raw_connection(), lock_timeout_s)
    except (sa.exc.SQLAlchemyError, psycopg.Error, OSError) as exc:
        raise StoreError(f"cannot open database {shown}: {one_line(exc, url)}") from None


def give_back(conn: PgConnection) -> None:
    """Return the connection to the pool with the engine's lock_timeout, as the next user expects it."""
    import psycopg

    if not is_broken(conn) and conn.lock_ms != conn.full_lock_ms:
        with contextlib.suppress(psycopg.Error):
            conn.set_lock_wait(conn.full_lock_ms)
    conn.raw.close()


def is_broken(conn: PgConnection) -> bool:
    """Whether the server is gone from this connection (a restart, a dropped tunnel): take another."""
    return conn.driver.closed or conn.driver.broken


def _lock_wait_ms(conn: PgConnection) -> int:
    # A retried call's first try waits briefly, so that a wait is said as it starts (retry.py).
    return int(retry.NOTICE_AFTER_S * 1000) if retry.first_try() else conn.full_lock_ms


@contextlib.contextmanager
def write(conn: PgConnection, url: str, shown: str, what: str, pipelined: bool = True):
    """One write transaction on `conn`, the change counter bumped in it; a refused or failed write is one
    line naming the database (ReadOnlyError for a read-only session or a role that may not write;
    retry.Retryable, a StoreBusyError, for another writer in the way). Its statements go in psycopg's
    pipeline: sent without waiting for each answer, so a transaction that reads nothing costs one round
    trip to the server, not one per statement. `pipelined=False` for a transaction that COPYs."""
    try:
        with conn.driver.pipeline() if pipelined else contextlib.nullcontext() as pipeline:
            conn.pipeline = pipeline
            try:
                conn.set_lock_wait(_lock_wait_ms(conn))
                conn.execute("BEGIN")
                yield conn
                conn.execute(BUMP_IF_CHANGED)
                conn.execute("COMMIT")
                conn.sync()
            finally:
                conn.pipeline = None
    except BaseException as exc:
        _failed(conn, exc, url, shown, what)
        raise


def write_now(conn: PgConnection, url: str, shown: str, what: str, statements) -> None:
    """Writes that read nothing ((sql, params) each), with the change counter's bump, as ONE statement
    (data-modifying WITH parts) in its own transaction: a run's samples and heartbeat cost one round
    trip, as a commit costs on SQLite."""
    parts = [f"w{k} AS ({sql} RETURNING 1)" for k, (sql, _params) in enumerate(statements)]
    params = [value for _sql, values in statements for value in values]
    # The parts of a WITH run in no set order; the counter's row is locked last, as in every other write,
    # by bumping it by a sum that needs them all done first (a lock taken in another order could deadlock).
    done = " UNION ALL ".join(f"SELECT 1 FROM w{k}" for k in range(len(statements)))
    bump = f"UPDATE {CHANGES_TABLE} SET n = n + 1 + 0 * (SELECT count(*) FROM ({done}) AS done) WHERE id = 1"
    try:
        ms = _lock_wait_ms(conn)
        if ms == conn.lock_ms:
            conn.execute(f"WITH {', '.join(parts)} {bump}", params)
        else:
            with conn.driver.pipeline() as pipeline:
                conn.pipeline = pipeline
                try:
                    conn.set_lock_wait(ms)
                    conn.execute(f"WITH {', '.join(parts)} {bump}", params)
                    pipeline.sync()
                finally:
                    conn.pipeline = None
    except BaseException as exc:
        _failed(conn, exc, url, shown, what)
        raise


def _failed(conn: PgConnection, exc: BaseException, url: str, shown: str, what: str) -> None:
    """End what is left of a failed write and raise its one line (returns for an error that is not the
    driver's, which its caller raises as it is)."""
    import psycopg

    conn.lock_ms = UNKNOWN
    if not is_broken(conn) and conn.in_transaction:
        with contextlib.suppress(psycopg.Error):
            conn.execute("ROLLBACK")
    if not isinstance(exc, psycopg.Error):
        return
    if is_read_only_error(exc):
        raise ReadOnlyError(f"cannot {what}: database {shown} is read-only for this session or role "
                            f"({one_line(exc, url)})") from None
    if is_busy_error(exc):
        waited = isinstance(exc, (psycopg.errors.LockNotAvailable, psycopg.errors.QueryCanceled))
        kind = "lock" if waited else "conflict"
        raise retry.Retryable(f"cannot {what}: database {shown} is locked by another writer "
                              f"({one_line(exc, url)})", kind) from None
    if isinstance(exc, (psycopg.OperationalError, psycopg.errors.InFailedSqlTransaction)):
        raise StoreError(f"cannot {what}: database {shown}: {one_line(exc, url)}") from None


def read(conn: PgConnection, sql: str, params, say_wait) -> list[tuple]:
    """A read's rows. A read waits for a lock only behind a schema change (another process upgrading
    the store): past the brief wait of a session whose writes just waited briefly, it is said
    (`say_wait`) and waited for as long as the store waits."""
    import psycopg

    try:
        return conn.execute(sql, params).fetchall()
    except psycopg.errors.LockNotAvailable:
        if conn.lock_ms == conn.full_lock_ms:
            raise
    say_wait()
    conn.set_lock_wait(conn.full_lock_ms)
    return conn.execute(sql, params).fetchall()


def version(conn: PgConnection) -> tuple[int, int]:
    """(schema version, 0 when this is no store; tables in the current schema): one statement."""
    row = conn.execute(
        f"SELECT to_regclass('{SCHEMA_TABLE}') IS NOT NULL,"
        " (SELECT count(*) FROM pg_tables WHERE schemaname = current_schema())").fetchone()
    if not row[0]:
        return 0, row[1]
    return conn.execute(f"SELECT max(version) FROM {SCHEMA_TABLE}").fetchone()[0] or 0, row[1]


def open_schema(conn: PgConnection, url: str, shown: str, read_only: bool) -> bool:
    """Check the database is a store this code reads: True when it must be made a store or upgraded
    (migrate.upgrade_postgres, under an advisory lock: of two processes opening it at once, one does it
    and the other finds it done)."""
    current, _tables = version(conn)
    if current > schema.SCHEMA_VERSION:
        raise SchemaVersionError(f"database {shown} has schema v{current}, newer than this dashbench "
                                 f"(v{schema.SCHEMA_VERSION}): upgrade dashbench to open it; it was not changed")
    if current == schema.SCHEMA_VERSION:
        if not read_only and not conn.execute("SELECT has_table_privilege('runs', 'INSERT')").fetchone()[0]:
            # A results server's SELECT-only role: said at once, not by the first page that tries to write.
            role = conn.execute("SELECT current_user").fetchone()[0]
            raise ReadOnlyError(f"database {shown} is read-only for role {role} (it may only SELECT): open it "
                                f"read-only (--read-only, or DASHBENCH_READ_ONLY=1 for the dashboard)")
        return False
    if read_only:
        raise StoreError(f"database {shown} is empty or not a dashbench database (read-only mode cannot "
                         f"create one)" if current == 0 else
                         f"database {shown} has schema v{current}; run `dashbench store upgrade` first")
    return True


def change_count(conn: PgConnection) -> int:
    return conn.execute(f"SELECT n FROM {CHANGES_TABLE} WHERE id = 1").fetchone()[0]
