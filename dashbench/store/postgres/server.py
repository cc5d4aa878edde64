"""The PostgreSQL side of the store, opening it: the process's engines (SQLAlchemy's pool), the schema's
check, the change counter and the schema tables, the advisory lock's key, and how a driver's error is said.
Its connections and write transactions are connection.py's, the Store's calls backend.py's; migrate.py upgrades the schema.

SQLAlchemy 2's pool (`pool_pre_ping`: a connection is checked as it is taken, so a restarted server or a
dropped SSH tunnel costs a reconnect, not an error) around psycopg 3 in autocommit mode: the Store says
BEGIN and COMMIT itself, as it does on SQLite. A read-only store's sessions run with
`default_transaction_read_only`, so the server refuses any write, whatever a page tries; a role that may
only SELECT is refused the same way and said the same way (ReadOnlyError). Every write transaction bumps
one counter row before it commits: the change token the pages' cache is keyed on.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import zlib

from dashbench.store import schema, urls
from dashbench.store.errors import ReadOnlyError, SchemaVersionError, StoreError, StoreUnreachable

# The one row every write bumps in its own transaction: a reader that sees a new count sees the change.
CHANGES_TABLE = "dashbench_changes"
SCHEMA_TABLE = "dashbench_schema"
BUMP_CHANGES = f"UPDATE {CHANGES_TABLE} SET n = n + 1 WHERE id = 1"


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

            _quiet_pool_log()
            options = f"-c lock_timeout={int(lock_timeout_s * 1000)}"
            if read_only:  # every transaction of these sessions is READ ONLY: the server refuses any write
                options += " -c default_transaction_read_only=on"
            engine = sa.create_engine(
                _driver_url(url),
                pool_pre_ping=True,
                pool_size=2,
                max_overflow=6,
                pool_recycle=1800,
                isolation_level="AUTOCOMMIT",
                connect_args={"options": options, "application_name": "dashbench", "connect_timeout": 10},
            )
            entry = _engines[key] = [engine, 0]
        entry[1] += 1
        return key, entry[0]


def _quiet_pool_log() -> None:
    # The pool logs a connection it could not reset or close (a server that restarted under it) with its
    # traceback, which Python's last-resort handler printed on the user's terminal: the Store says what
    # went wrong in its own one line, so the pool's record goes nowhere.
    pool_log = logging.getLogger("sqlalchemy.pool")
    if not pool_log.handlers:
        pool_log.addHandler(logging.NullHandler())
    pool_log.propagate = False


def release_engine(key) -> None:
    with _engines_lock:
        entry = _engines.get(key)
        if entry is None:
            return
        entry[1] -= 1
        unused = [k for k, (_engine, users) in _engines.items() if users <= 0]
        for old in unused[: max(0, len(unused) - KEEP_UNUSED)]:
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

    return isinstance(
        exc,
        (
            psycopg.errors.LockNotAvailable,
            psycopg.errors.QueryCanceled,
            psycopg.errors.DeadlockDetected,
            psycopg.errors.SerializationFailure,
        ),
    )


def error_line(exc: BaseException, url: str | None) -> str:
    """A driver's error as one line, the URL's password never in it."""
    text = str(getattr(exc, "orig", None) or exc).strip().splitlines()
    line = urls.scrub(text[0] if text else type(exc).__name__, url)
    if url and any(words in line for words in _AUTH_FAILED) and urls.without_password(url) == url:
        line += f" ({PASSWORD_HINT})"
    return line


# What libpq says when the server wants a password it was not given, or was given a wrong one.
_AUTH_FAILED = ("no password supplied", "password authentication failed")
# A URL without a password (a cluster run's: the password never travels with a job) leaves it to libpq.
PASSWORD_HINT = (
    "the URL has no password: libpq reads it from ~/.pgpass on this host, the file $PGPASSFILE names, or $PGPASSWORD"
)


# What a server that is not there now says (down, restarting, a dropped link): the same call may work later.
_UNREACHABLE_WORDS = (
    "connection refused",
    "could not connect",
    "timeout expired",
    "timed out",
    "no route to host",
    "network is unreachable",
    "server closed the connection",
    "connection is lost",
    "terminating connection",
    "the database system is",
    "consuming input failed",
    "connection reset",
    "could not receive data",
    "could not send data",
    "ssl syscall error",
    "failed to resolve host",
    "connection not open",
    "connection is closed",
    "sending query failed",
)
_LIBPQ_PREFIX = re.compile(
    r'^(?:connection (?:failed|is bad): )?(?:connection to server (?:at|on socket) "[^"]*"'
    r"(?: \([^)]*\))?(?:, port \d+)? failed: )?(?:FATAL: +)?"
)
SSL_MODES = "disable, allow, prefer, require, verify-ca, verify-full"


def refused(exc: BaseException, url: str | None, shown, doing: str = "open") -> StoreError:
    """The driver's error `exc` (met opening or reading the store) as the store's one `db: …` line naming
    what is missing and the way out: StoreUnreachable for a server not there now, ReadOnlyError for a
    role that may read but not write, StoreError otherwise. `doing`: "open" or "read", for the rest."""
    import psycopg

    exc = getattr(exc, "orig", None) or exc  # SQLAlchemy's wrapper: the driver's error inside it
    reason = _LIBPQ_PREFIX.sub("", error_line(exc, url))
    low = reason.lower()
    role, database = _role_and_database(url)
    if isinstance(
        exc, (psycopg.errors.AdminShutdown, psycopg.errors.CannotConnectNow, psycopg.errors.CrashShutdown)
    ) or any(words in low for words in _UNREACHABLE_WORDS):
        return StoreUnreachable(f"db: the server of {shown} is unreachable ({reason}); try again once it answers")
    denied = re.search(r'permission denied for (table|relation|sequence|view|schema|database) "?([^"\s]+)"?', reason)
    if denied and denied.group(1) == "database":
        return StoreError(
            f"db: the role {role} may not connect to {shown}: grant it CONNECT (GRANT CONNECT ON "
            f"DATABASE {database} TO {role}), or use the writer's role"
        )
    if denied and denied.group(1) == "schema":
        return StoreError(
            f"db: the role {role} may not use schema {denied.group(2)} in {shown}: grant it "
            f"pg_read_all_data, or use the writer's role"
        )
    if denied:
        return StoreError(
            f"db: the role {role} cannot read {denied.group(2)} in {shown}: grant it "
            f"pg_read_all_data, or use the writer's role"
        )
    if isinstance(exc, psycopg.errors.ReadOnlySqlTransaction):
        return ReadOnlyError(f"db: database {shown} is read-only for this session ({reason})")
    sslmode = re.search(r'invalid sslmode value: "([^"]*)"', reason)
    if sslmode:
        return StoreError(f'db: the URL\'s sslmode "{sslmode.group(1)}" is not one of {SSL_MODES}')
    option = re.search(r'invalid connection option "([^"]*)"', reason)
    if option:
        return StoreError(
            f'db: the URL\'s "{option.group(1)}" is not a libpq connection parameter (such as '
            f"sslmode, connect_timeout, application_name)"
        )
    return StoreError(f"db: cannot {doing} database {shown}: {reason}")


def _role_and_database(url: str | None) -> tuple[str, str]:
    """The role and database a URL names; the role libpq takes when it names none (PGUSER, else the login)."""
    import getpass

    try:
        from sqlalchemy.engine import make_url

        parsed = make_url(url)
        role, database = parsed.username, parsed.database
    except Exception:  # noqa: BLE001 - a URL SQLAlchemy cannot read: its own error says so
        role = database = None
    if not role:
        try:
            role = os.environ.get("PGUSER") or getpass.getuser()
        except Exception:  # noqa: BLE001 - no login name to be found
            role = "of this login"
    return role, database or role


def version(conn) -> tuple[int, int]:
    """(schema version, 0 when this is no store; tables in the current schema): one statement."""
    row = conn.execute(
        f"SELECT to_regclass('{SCHEMA_TABLE}') IS NOT NULL,"
        " (SELECT count(*) FROM pg_tables WHERE schemaname = current_schema())"
    ).fetchone()
    if not row[0]:
        return 0, row[1]
    return conn.execute(f"SELECT max(version) FROM {SCHEMA_TABLE}").fetchone()[0] or 0, row[1]


def open_schema(conn, url: str, shown: str, read_only: bool) -> bool:
    """Check the database is a store this code reads: True when it must be made a store or upgraded
    (migrate.upgrade_postgres, under an advisory lock: of two processes opening it at once, one does it
    and the other finds it done)."""
    current, _tables = version(conn)
    if current > schema.SCHEMA_VERSION:
        raise SchemaVersionError(
            f"db: database {shown} has schema v{current}, newer than this dashbench "
            f"(v{schema.SCHEMA_VERSION}): upgrade dashbench to open it; it was not changed"
        )
    if current == schema.SCHEMA_VERSION:
        if not read_only and not conn.execute("SELECT has_table_privilege('runs', 'INSERT')").fetchone()[0]:
            # A results server's SELECT-only role: said at once, not by the first page that tries to write.
            role = conn.execute("SELECT current_user").fetchone()[0]
            raise ReadOnlyError(
                f"db: database {shown} is read-only for role {role} (it may only SELECT): open it "
                f"read-only (--read-only, or DASHBENCH_READ_ONLY=1 for the dashboard)"
            )
        return False
    if read_only:
        raise StoreError(
            f"db: database {shown} is empty or not a dashbench database (read-only mode cannot create one)"
            if current == 0
            else f"db: database {shown} has schema v{current}; run `dashbench store upgrade` first"
        )
    return True


def change_count(conn) -> int:
    return conn.execute(f"SELECT n FROM {CHANGES_TABLE} WHERE id = 1").fetchone()[0]
