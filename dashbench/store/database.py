"""The results database and its connection: an SQLite file (WAL mode, the embedded default) or a
PostgreSQL server (a `postgresql+psycopg://` URL, a team's store), behind one Store.

One writer and many readers at once is SQLite's WAL sweet spot: readers never block the writer,
and writers wait (busy timeout) instead of failing with "database is locked". On PostgreSQL every
write is one transaction that also bumps the change counter (dialect.py), and waits lock_timeout.
Read-only mode opens the file with the `mode=ro` URI, or the server's session read-only, so no code
path can change it; every writing method also refuses up front with ReadOnlyError, which says so in words.
The Store is split by part: runs (runs.py), samples and bundles' rows (samples.py), the job queue
(queue.py), prices and calibrations (prices.py); this module opens, reads and holds the transactions.
No TensorFlow here.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import stat
import sys
import threading
import time
from pathlib import Path
from typing import Callable, Iterable, Iterator

import pandas as pd

from dashbench.store import browse, dialect, migrate, outage, queries, schema, watch
from dashbench.store.dialect import ServerURL, is_server_url, masked, url_refusal, url_scheme  # noqa: F401
from dashbench.store.errors import (BundleError, ReadOnlyError, RollBack, SchemaVersionError,  # noqa: F401
                                    StoreBusyError, StoreError)
from dashbench.store.ids import (env_seconds, iso, new_run_id, new_sweep_id, now, pid_alive,  # noqa: F401
                                 short_id, this_host)
from dashbench.store.prices import PricesPart
from dashbench.store.queue import QueueClaim, QueuePart  # noqa: F401  (QueueClaim: re-exported)
from dashbench.store.runs import RUN_FIELDS, LIVE_FIELDS, RunsPart, SpecMemo, _insert_run, _move  # noqa: F401
from dashbench.store.samples import SamplesPart
from dashbench.store.sidecars import tidy

_RollBack = RollBack

# How long one write waits for another process's write lock (SQLite's busy timeout, PostgreSQL's
# lock_timeout), and how long a store made with write_retry_s goes on trying after that, with backoff.
# Settable for tests and slow shared disks: DASHBENCH_BUSY_TIMEOUT_S.
BUSY_TIMEOUT_S = 30.0
BUSY_TIMEOUT_ENV = "DASHBENCH_BUSY_TIMEOUT_S"


def busy_timeout_s() -> float:
    return env_seconds(BUSY_TIMEOUT_ENV, BUSY_TIMEOUT_S, 0, 86400)


def _is_read_only_error(exc: sqlite3.Error) -> bool:
    name = getattr(exc, "sqlite_errorname", "") or ""
    return name.startswith("SQLITE_READONLY") or "readonly database" in str(exc)


def _is_busy_error(exc: sqlite3.Error) -> bool:
    name = getattr(exc, "sqlite_errorname", "") or ""
    return name.startswith("SQLITE_BUSY") or "database is locked" in str(exc)


def _say_lock_wait(path: Path) -> None:
    try:
        print(f"waiting for the database {path} (locked by another process) …", file=sys.stderr, flush=True)
    except (OSError, ValueError):  # no stderr left (a closed terminal): the wait goes on regardless
        pass


# Called as a write starts to wait for another process's write lock, so a command behind a long lock
# says so at once (as `waiting for the device …` does) rather than after the busy timeout, and a run
# process's log shows it. A module attribute so a caller can redirect it.
LOCK_WAIT_NOTICE: Callable[[Path], None] = _say_lock_wait


def database_file_exists(path: str | os.PathLike) -> bool:
    """Whether a database file is at `path` (False: none yet). A folder, or a folder that cannot be
    looked into, is a StoreError naming it: never a traceback, never "read-only". A PostgreSQL URL
    is a database that exists (the Store asks the server; a wrong address is its error)."""
    if is_server_url(path):
        return True
    path = Path(path).expanduser()
    try:
        mode = path.stat().st_mode
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError as exc:
        raise StoreError(f"db: cannot open database {path}: its folder cannot be read "
                         f"({exc.strerror or exc})") from None
    if stat.S_ISDIR(mode):
        raise StoreError(f"db: {path} is a folder, not a database file; give a file path "
                         f"(e.g. {path / 'dashbench.sqlite'})")
    return True


def location(text) -> "Path | ServerURL":
    """What --db or DASHBENCH_DB names: a PostgreSQL URL (a ServerURL: shown masked, never a Path,
    which would fold its "//") or a file path."""
    if isinstance(text, ServerURL) or is_server_url(text):
        return ServerURL(text)
    return Path(text).expanduser()


def default_db_path() -> "Path | ServerURL":
    env = os.environ.get("DASHBENCH_DB")
    if env:
        return location(env)
    return Path.home() / ".local" / "share" / "dashbench" / "dashbench.sqlite"


class Store(RunsPart, SamplesPart, QueuePart, PricesPart):
    """A handle on one results database. Thread-safe; also a context manager."""

    schema_upgrade = None  # (version before, after) when opening it upgraded the schema (migrate.py)

    def __init__(self, path: str | os.PathLike | None = None, read_only: bool = False,
                 write_retry_s: float = 0.0):
        """`write_retry_s`: past the busy timeout, how long a write goes on trying to get the
        write lock (with backoff) before it fails; a run process sets it long, since its samples
        are in memory, while a page or a command fails fast and says the file is locked."""
        field, text = ("db", path) if path is not None else ("DASHBENCH_DB", os.environ.get("DASHBENCH_DB"))
        if url_refusal(text):
            raise StoreError(f"{field}: {url_refusal(text)}")
        where = location(path) if path is not None else default_db_path()
        # A server's URL is kept here only; `path` is what is shown (the URL with its password masked).
        self._url = where.url if isinstance(where, ServerURL) else None
        self.path = where
        self.dialect = dialect.POSTGRES if self._url else dialect.SQLITE
        self.read_only = read_only
        self.busy_timeout_s = busy_timeout_s()
        self.write_retry_s = float(write_retry_s)
        self._lock = threading.RLock()
        self._conn = None
        self._engine = None
        self._server_conn = None  # the pooled connection this store holds while open (a server's)
        self._in_flight = None  # (what, write again) of a write sent to the server not yet answered (_send_now)
        self._specs = SpecMemo()  # the specs of the runs this handle started (finish_run reads none)
        if self._url:
            self._open_server()
        else:
            self._conn = self._open()

    @property
    def is_server(self) -> bool:
        """Whether this store lives on a PostgreSQL server (else in an SQLite file)."""
        return self._url is not None

    @property
    def answer_pending(self) -> bool:
        """Whether a write was sent to the server without its answer read yet (add_samples(wait=False))."""
        return self._in_flight is not None

    @property
    def location(self) -> "str | ServerURL":
        """What opens this same store in another process (a run's, a check's): the file's full path, or
        the server's URL (a ServerURL: its .url has the password, handed on in the environment only)."""
        return self.path if self._url else str(self.path.resolve())

    @property
    def log_folder(self) -> Path:
        """Where the runs' and checks' logs of this store go: beside the file, or this host's data folder."""
        if self._url:
            return Path.home() / ".local" / "share" / "dashbench" / "logs"
        return self.path.resolve().parent / "logs"

    def _open_server(self) -> None:
        import psycopg

        from dashbench.store.postgres import server as postgres

        try:
            self._engine_key, self._engine = postgres.acquire_engine(self._url, self.read_only, self.busy_timeout_s)
        except ValueError as exc:  # SQLAlchemy's reading of the URL (a port that is no number); ArgumentError too
            raise StoreError(f"db: the URL {self.path} cannot be read: {exc}") from None
        try:
            with self._connection() as conn:
                try:
                    upgrade = postgres.open_schema(conn, self._url, self.path, self.read_only)
                except psycopg.Error as exc:
                    raise postgres.refused(exc, self._url, self.path) from None
            if upgrade:
                try:
                    self.schema_upgrade = migrate.upgrade_postgres(self._url, self.path, self.busy_timeout_s,
                                                                     say_wait=self._say_lock_wait)
                except ReadOnlyError as exc:
                    if not isinstance(getattr(exc.__context__, "orig", None), psycopg.errors.InsufficientPrivilege):
                        raise
                    role, _database = postgres._role_and_database(self._url)
                    raise ReadOnlyError(f"db: the role {role} may not create the store's tables in {self.path}: "
                                        f"make the store once with the owner's role (`dashbench store upgrade "
                                        f"--db` its URL), or grant this one CREATE on the schema") from None
        except BaseException:
            self.close()
            raise

    def _checkout(self):
        """A pooled connection for this store; a server that refuses or cannot be reached is one line."""
        from dashbench.store.postgres import connection as pg_connection, server as postgres

        try:
            return pg_connection.checkout(self._engine, self._url, self.path, self.busy_timeout_s)
        except StoreError as exc:
            if exc.__context__ is None:
                raise
            raise postgres.refused(exc.__context__, self._url, self.path) from None

    def _on_server(self, ask: Callable, doing: str = "read"):
        """ask(connection), again once on a fresh connection where the server dropped this one since its
        last use (a restart, a dropped tunnel); a driver's error said as the store's one line (refused)."""
        import psycopg

        from dashbench.store.postgres import connection as pg_connection, server as postgres

        for attempt in (1, 2):
            with self._connection() as conn:
                try:
                    return ask(conn)
                except psycopg.Error as exc:
                    if attempt == 2 or not pg_connection.is_broken(conn):
                        error = postgres.refused(exc, self._url, self.path, doing)
                        if outage.is_outage(exc) and not isinstance(error, outage.StoreUnreachable):
                            error = outage.StoreUnreachable(str(error))  # one class the writers wait out
                        raise error from None

    @contextlib.contextmanager
    def _connection(self, answered: bool = True):
        """The connection for one read or one transaction: SQLite's one, or one from the server's pool,
        with the answer to a write in flight read first (unless not `answered`: _write_now's own)."""
        if self._engine is None:
            if self._conn is None:
                raise StoreError("the store is closed")
            yield self._conn
            return
        from dashbench.store.postgres import connection as pg_connection

        if self._server_conn is None:
            self._server_conn = self._checkout()
        if self._in_flight is not None and answered:  # nothing else may use the connection before
            self._answer_in_flight()
        try:
            yield self._server_conn
        finally:
            if self._server_conn is not None and pg_connection.is_broken(self._server_conn):
                self._drop_server_conn()  # the next read or write takes a fresh one from the pool

    def _send_now(self, what: str, statements: list[tuple[str, list]], again: Callable[[], None]) -> bool:
        """_write_now's statements sent to a server without waiting for the answer, which this handle's
        next call reads first (raising a failure there); False where they cannot go so (SQLite, a
        statement libpq cannot take as it is): write them the waiting way. `again` writes them the waiting
        way when the server refused them for what that way sorts out (a stored key, a lock in the way)."""
        if self._engine is None or self.read_only:
            return False
        from dashbench.store.postgres import connection as pg_connection

        with self._lock, self._connection() as conn:
            try:
                if not pg_connection.send_now(conn, self._url, self.path, what, statements):
                    return False
            except BaseException:
                if conn.driver.pgconn.pipeline_status:  # cut off half sent: no one may read what follows
                    self._drop_server_conn()
                raise
            self._in_flight = (what, again)
        return True

    def _answer_in_flight(self, behind: str | None = None) -> int:
        """Read the answer to the write in flight (a refusal that the waiting way sorts out: written again
        that way), and to the one sent `behind` it if any, whose row count this returns or error raises."""
        import psycopg

        from dashbench.store import retry
        from dashbench.store.postgres import connection as pg_connection

        what, again = self._in_flight
        self._in_flight = None
        answers = []
        for said in [what] if behind is None else [what, behind]:
            try:
                answers.append(pg_connection.answer(self._server_conn, self._url, self.path, said))
            except (psycopg.Error, StoreError) as exc:
                answers.append(exc)
                if pg_connection.is_broken(self._server_conn):
                    self._drop_server_conn()  # gone: the next call takes a fresh one
                    break
            except BaseException:
                self._drop_server_conn()  # cut off mid-answer: no one may read what follows
                raise
        first = answers[0]
        if isinstance(first, (retry.Retryable, psycopg.errors.IntegrityError,
                              psycopg.errors.InvalidSqlStatementName)) and self._server_conn is not None:
            again()
        elif isinstance(first, BaseException):
            raise first
        if behind is None:
            return 0
        if isinstance(answers[-1], BaseException) or len(answers) < 2:
            raise answers[-1]
        return answers[1]

    def _drop_server_conn(self) -> None:
        self._in_flight = None  # its answer went with the connection (the error that dropped it is raised)
        conn, self._server_conn = self._server_conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.raw.invalidate() if hasattr(conn.raw, "invalidate") else conn.raw.close()

    # -- opening ---------------------------------------------------------------------------------

    def _open(self) -> sqlite3.Connection:
        """The SQLite file, made or upgraded to the schema's head unless read-only."""
        exists = database_file_exists(self.path)
        if self.read_only:
            if not exists:
                raise StoreError(f"no database at {self.path} (read-only mode cannot create one)")
            # The file opened O_RDONLY: nothing in this process can write it. Its -wal/-shm files,
            # which such a reader cannot remove, are tidied on close (sidecars.tidy).
            uri = self.path.resolve().as_uri() + "?mode=ro"
        else:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreError(f"cannot create the folder of database {self.path}: "
                                 f"{exc.strerror or exc}") from None
            uri = self.path.resolve().as_uri() + "?mode=rwc"
        conn = self._connect(uri)
        try:
            # Read the version before anything that could write (even switching to WAL writes).
            try:
                version, tables = self._version_and_tables(conn)
            except sqlite3.OperationalError as exc:
                if not (self.read_only and self._wal_index_unavailable(exc)):
                    raise
                # A WAL database in a folder we cannot write (a read-only mount, another user's
                # files): SQLite cannot create its -shm index. With no pending WAL content the
                # main file is the whole database, so it can be read as immutable.
                conn.close()
                conn = self._connect(uri + "&immutable=1")
                version, tables = self._version_and_tables(conn)
            if version > schema.SCHEMA_VERSION:
                raise SchemaVersionError(
                    f"database {self.path} has schema v{version}, newer than this dashbench "
                    f"(v{schema.SCHEMA_VERSION}): upgrade dashbench to open it; the file was not changed"
                )
            conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_s * 1000)}")
            conn.execute("PRAGMA foreign_keys = ON")
            if self.read_only:
                if version == 0:
                    raise StoreError(f"database {self.path} is empty or not a dashbench database")
                if version < schema.SCHEMA_VERSION:
                    raise StoreError(f"database {self.path} has schema v{version}; open it once without "
                                     f"read-only to upgrade it to v{schema.SCHEMA_VERSION}")
            else:
                if version == 0 and tables:
                    raise StoreError(f"{self.path} is an SQLite file but not a dashbench database")
                self._use_wal(conn)
                # WAL + NORMAL survives a killed process; only a power cut can lose the last commits.
                conn.execute("PRAGMA synchronous = NORMAL")
                if version < schema.SCHEMA_VERSION:  # alembic's revisions, under the write lock
                    self.schema_upgrade = migrate.upgrade_sqlite(self.path, self.busy_timeout_s,
                                                                   say_wait=self._say_lock_wait)
        except sqlite3.DatabaseError as exc:
            conn.close()
            if not self.read_only and _is_read_only_error(exc):
                raise ReadOnlyError(self._not_writable("open it for writing")) from None
            raise StoreError(f"cannot read database {self.path}: {exc}{self._write_hint(exc)}") from None
        except BaseException:
            conn.close()
            raise
        return conn

    def _connect(self, uri: str) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(uri, uri=True, isolation_level=None, timeout=self.busy_timeout_s,
                                   check_same_thread=False, factory=dialect.SQLiteConnection)
            if self.read_only:  # before any statement; also said in words by ReadOnlyError
                conn.execute("PRAGMA query_only = ON")
            return conn
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open database {self.path}: {exc}{self._write_hint(exc)}") from None

    def _write_hint(self, exc: sqlite3.Error) -> str:
        if self.read_only or getattr(exc, "sqlite_errorname", "") not in ("SQLITE_CANTOPEN", "SQLITE_READONLY"):
            return ""
        return " (is the file or its folder read-only?)"

    def _not_writable(self, what: str) -> str:
        return (f"cannot {what}: database {self.path} is read-only (the file or its folder is not "
                f"writable for this user)")

    def _wal_index_unavailable(self, exc: sqlite3.OperationalError) -> bool:
        if (getattr(exc, "sqlite_errorname", "") not in ("SQLITE_CANTOPEN", "SQLITE_READONLY_DIRECTORY")
                or not self.path.is_file()):
            return False
        wal = self.path.with_name(self.path.name + "-wal")
        try:
            return not wal.exists() or wal.stat().st_size == 0
        except OSError:
            return False

    @staticmethod
    def _version_and_tables(conn) -> tuple[int, int]:
        # One statement, one snapshot: read apart, another process creating the schema between
        # the two reads made a fresh file look like a foreign one (version 0, tables present).
        return tuple(conn.execute(
            "SELECT user_version, (SELECT count(*) FROM sqlite_master) FROM pragma_user_version"
        ).fetchone())

    def _use_wal(self, conn) -> None:
        """Switch to WAL, waiting out other processes doing the same. SQLite answers 'locked' at
        once, without its busy handler, when the switch finds another connection reading the file
        (two processes opening a new database together), so the wait is ours."""
        deadline = time.monotonic() + self.busy_timeout_s
        pause = 0.005
        while True:
            try:
                conn.execute("PRAGMA journal_mode = WAL")
                return
            except sqlite3.OperationalError as exc:
                if getattr(exc, "sqlite_errorname", "") != "SQLITE_BUSY" or time.monotonic() > deadline:
                    raise
            time.sleep(pause)
            pause = min(pause * 2, 0.2)

    @property
    def schema_version(self) -> int:
        if self._engine is not None:
            from dashbench.store.postgres import server as postgres

            with self._lock:
                return self._on_server(lambda conn: postgres.version(conn)[0])
        with self._lock:
            return self._conn.execute("PRAGMA user_version").fetchone()[0]

    def close(self) -> None:
        with self._lock:
            if self._engine is not None:
                from dashbench.store.postgres import connection as pg_connection, server as postgres

                if self._in_flight is not None:
                    what = self._in_flight[0]
                    try:
                        self._answer_in_flight()
                    except Exception as exc:  # closing after a failure: say it, do not hide the first one
                        print(f"warning: cannot {what}: {exc}", file=sys.stderr)
                if self._server_conn is not None:
                    with contextlib.suppress(Exception):
                        pg_connection.give_back(self._server_conn)  # back to the pool
                    self._server_conn = None
                self._engine = None
                postgres.release_engine(self._engine_key)
            if self._conn is not None:
                self._conn.close()
                self._conn = None
                if self.read_only:
                    tidy(self.path)

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Store({str(self.path)!r}, read_only={self.read_only})"

    # -- transactions ----------------------------------------------------------------------------

    @contextlib.contextmanager
    def _write(self, what: str, pipelined: bool = True) -> Iterator[sqlite3.Connection]:
        """One write transaction. BEGIN IMMEDIATE takes the write lock up front, so two writers
        queue on the busy timeout instead of deadlocking half-way. `pipelined`: on a server, its
        statements are sent without waiting for each answer (pg_connection.write), unless it COPYs."""
        if self.read_only:
            raise ReadOnlyError(f"cannot {what}: the store {self.path} is open read-only")
        if self._engine is not None:
            from dashbench.store.postgres import connection as pg_connection

            with self._lock, self._connection() as conn, pg_connection.write(conn, self._url, self.path, what,
                                                                             pipelined):
                yield conn
            return
        with self._lock:
            if self._conn is None:
                raise StoreError("the store is closed")
            try:
                self._begin_immediate()
                try:
                    yield self._conn
                except BaseException:
                    if self._conn.in_transaction:
                        self._conn.execute("ROLLBACK")
                    raise
                try:
                    self._conn.execute("COMMIT")
                except sqlite3.Error:
                    # A COMMIT that failed (a full disk, a file-size limit) may leave the transaction
                    # open, holding the write lock and its rows: end it, so nothing of it lands.
                    if self._conn.in_transaction:
                        with contextlib.suppress(sqlite3.Error):
                            self._conn.execute("ROLLBACK")
                    raise
            except sqlite3.OperationalError as exc:
                # A file that cannot be written (permissions, a read-only mount) is said in one
                # line naming the file, wherever the write was; never an SQLite traceback.
                if _is_read_only_error(exc):
                    raise ReadOnlyError(self._not_writable(what)) from None
                if _is_busy_error(exc):
                    raise StoreBusyError(f"cannot {what}: database {self.path} is locked by another "
                                         f"process (waited {self.busy_timeout_s:g} s)") from None
                raise

    def _write_now(self, what: str, statements: list[tuple[str, list]], guarded: bool = False,
                   also: list[tuple[str, list]] = ()) -> bool:
        """Writes that read nothing, (sql, params) each, as one transaction: on a server one statement
        (pg_connection.write_now), so a run's create, samples, heartbeat and end cost one round trip each.
        `guarded`: the statements after the first are made only if the first changes a row (each ends in
        its WHERE clause); returns whether it did (True when not guarded). `also`: statements made in the
        same transaction whatever the guard found (a run's last samples, written with its end)."""
        if self._engine is None or self.read_only:
            with self._write(what) as conn:
                for sql, params in also:
                    conn.execute(sql, params)
                for k, (sql, params) in enumerate(statements):
                    if conn.execute(sql, params).rowcount == 0 and guarded and k == 0:
                        return False
            return True
        import psycopg

        from dashbench.store.postgres import connection as pg_connection

        with self._lock, self._connection(answered=False) as conn:
            if self._in_flight is not None:  # in the same trip, behind it, if it can go so: both answers read
                try:
                    sent = pg_connection.send_now(conn, self._url, self.path, what, statements, guarded, also)
                except BaseException:
                    self._drop_server_conn()  # cut off half sent: no one may read what follows
                    raise
                if sent:
                    try:
                        return self._answer_in_flight(behind=what) > 0
                    except psycopg.errors.InvalidSqlStatementName:  # discarded under us: prepared again below
                        pass
                else:
                    self._answer_in_flight()
            return pg_connection.write_now(conn, self._url, self.path, what, statements, guarded, also)

    def _say_lock_wait(self) -> None:
        LOCK_WAIT_NOTICE(self.path)

    def _begin_immediate(self) -> None:
        """BEGIN IMMEDIATE, tried again with backoff while another process holds the write lock
        past the busy timeout: a run whose samples are in memory keeps them (up to write_retry_s).
        Tried once without waiting first, so that a wait is said as it starts (LOCK_WAIT_NOTICE)."""
        deadline = time.monotonic() + self.write_retry_s
        pause = 0.05
        if self._begin_at_once():
            return
        LOCK_WAIT_NOTICE(self.path)
        while True:
            try:
                self._conn.execute("BEGIN IMMEDIATE")
                return
            except sqlite3.OperationalError as exc:
                if not _is_busy_error(exc) or time.monotonic() >= deadline:
                    raise
            time.sleep(min(pause, max(0.0, deadline - time.monotonic())))
            pause = min(pause * 2, 2.0)

    def _begin_at_once(self) -> bool:
        """BEGIN IMMEDIATE if no other process holds the write lock (True), without SQLite's busy wait."""
        self._conn.execute("PRAGMA busy_timeout = 0")
        try:
            self._conn.execute("BEGIN IMMEDIATE")
            return True
        except sqlite3.OperationalError as exc:
            if not _is_busy_error(exc):
                raise
            return False
        finally:
            self._conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_s * 1000)}")

    def check_writable(self, what: str = "write to it") -> None:
        """Raise ReadOnlyError unless this store can be written: a write that is rolled back
        (what `run` and `sweep` check before anything starts, so no run begins to fail later)."""
        try:
            with self._write(what) as conn:
                if self._engine is not None:  # the server checks the session and the role's grants
                    from dashbench.store.postgres import server as postgres

                    conn.execute(postgres.BUMP_CHANGES)
                    raise _RollBack
                version = conn.execute("PRAGMA user_version").fetchone()[0]
                conn.execute(f"PRAGMA user_version = {int(version)}")
                raise _RollBack
        except _RollBack:
            pass

    def _read(self, sql: str, params: Iterable = ()) -> list[tuple]:
        with self._lock:
            if self._engine is not None:
                return self._read_server(sql, params)
            if self._conn is None:
                raise StoreError("the store is closed")
            return self._conn.execute(sql, list(params)).fetchall()

    def _read_server(self, sql: str, params: Iterable) -> list[tuple]:
        from dashbench.store.postgres import connection as pg_connection

        return self._on_server(lambda conn: pg_connection.read(conn, sql, params, self._say_lock_wait))

    def runs(self, **filters) -> pd.DataFrame:
        """One row per run, newest first, flat columns (see queries.RUN_COLUMNS).

        Filters: model, device, backend, accelerator, precision, batch_size, status, sweep_id, label, host,
        run_ids (each a value or a list of values), search (a substring of id, label, host, model, …),
        since, until (datetime, date, ISO text or epoch seconds; on created_at), limit. Paging and
        order: offset, order_by (a queries.SORT_COLUMNS name), descending."""
        return queries.runs(self._read, **filters)

    def facets(self) -> dict[str, list]:
        """Distinct values of the pages' filter columns (browse.FACET_COLUMNS)."""
        return browse.facets(self._read)

    def newest_model(self) -> str | None:
        return browse.newest_model(self._read)

    def newest_per_setup(self, limit: int = 12, scan: int = 500, **filters) -> tuple[list[str], int]:
        """The newest run of each setup among the newest `scan` matching runs (browse.newest_per_setup)."""
        return browse.newest_per_setup(self._read, limit=limit, scan=scan, **filters)

    def newest_setups(self, statuses=(), limit: int = 12, scan: int = 100, **filters) -> list[tuple[str, str]]:
        """(run id, model) of the newest run of each setup in these statuses (browse.newest_setups)."""
        return browse.newest_setups(self._read, statuses=statuses, limit=limit, scan=scan, **filters)

    def run_ids(self, **filters) -> list[str]:
        """The ids of the runs that pass the filters (as runs(), limit included), newest first."""
        return browse.run_ids(self._read, **filters)

    def known_ids(self, run_ids) -> list[str]:
        """Those of these run ids that are stored, in the order given."""
        return browse.known_ids(self._read, run_ids)

    def change_token(self) -> tuple:
        """Changes whenever any connection commits to this database (watch.change_token; on a server,
        the counter every write transaction bumps)."""
        if self._engine is not None:
            from dashbench.store.postgres import server as postgres

            with self._lock:
                return ("postgresql", self.path, self._on_server(postgres.change_count))
        return watch.change_token(self.path)

    def count_runs(self, **filters) -> int:
        return queries.count_runs(self._read, **filters)

    def distinct(self, column: str) -> list:
        """Distinct values of one filter column, for the dashboard's select boxes."""
        return queries.distinct(self._read, column)

