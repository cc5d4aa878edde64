"""The store in an SQLite file (WAL mode, the embedded default): one connection per Store, through the raw
sqlite3 module (SQLAlchemy's layer over it costs the pages' reads and a run's writes more, see
docs/architecture-store.md).

One writer and many readers at once is SQLite's WAL sweet spot: readers never block the writer,
and writers wait (busy timeout) instead of failing with "database is locked". Read-only mode opens the
file with the `mode=ro` URI, so no code path can change it.
"""

from __future__ import annotations

import contextlib
import sqlite3
import stat
import time
from pathlib import Path

from dashbench.store import migrate, schema, watch
from dashbench.store.backend import Backend
from dashbench.store.errors import ReadOnlyError, SchemaVersionError, StoreBusyError, StoreError
from dashbench.store.sidecars import tidy
from dashbench.store.sqlite.dialect import SQLITE, SQLiteConnection


def _is_read_only_error(exc: sqlite3.Error) -> bool:
    name = getattr(exc, "sqlite_errorname", "") or ""
    return name.startswith("SQLITE_READONLY") or "readonly database" in str(exc)


def _is_busy_error(exc: sqlite3.Error) -> bool:
    name = getattr(exc, "sqlite_errorname", "") or ""
    return name.startswith("SQLITE_BUSY") or "database is locked" in str(exc)


class SQLiteBackend(Backend):
    dialect = SQLITE

    def __init__(self, store):
        super().__init__(store)
        self.conn: SQLiteConnection | None = None

    @classmethod
    def exists(cls, where) -> bool:
        """A folder, or a folder that cannot be looked into, is a StoreError naming it: never a
        traceback, never "read-only"."""
        path = Path(where).expanduser()
        try:
            mode = path.stat().st_mode
        except (FileNotFoundError, NotADirectoryError):
            return False
        except OSError as exc:
            raise StoreError(
                f"db: cannot open database {path}: its folder cannot be read ({exc.strerror or exc})"
            ) from None
        if stat.S_ISDIR(mode):
            raise StoreError(
                f"db: {path} is a folder, not a database file; give a file path (e.g. {path / 'dashbench.sqlite'})"
            )
        return True

    @property
    def location(self) -> str:
        return str(self.store.path.resolve())

    @property
    def log_folder(self) -> Path:
        return self.store.path.resolve().parent / "logs"

    # -- opening ---------------------------------------------------------------------------------

    def open(self) -> tuple[int, int] | None:
        """The SQLite file, made or upgraded to the schema's head unless read-only."""
        store, path, upgrade = self.store, self.store.path, None
        exists = self.exists(path)
        if store.read_only:
            if not exists:
                raise StoreError(f"no database at {path} (read-only mode cannot create one)")
            # The file opened O_RDONLY: nothing in this process can write it. Its -wal/-shm files,
            # which such a reader cannot remove, are tidied on close (sidecars.tidy).
            uri = path.resolve().as_uri() + "?mode=ro"
        else:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreError(f"cannot create the folder of database {path}: {exc.strerror or exc}") from None
            uri = path.resolve().as_uri() + "?mode=rwc"
        conn = self._connect(uri)
        try:
            # Read the version before anything that could write (even switching to WAL writes).
            try:
                version, tables = self._version_and_tables(conn)
            except sqlite3.OperationalError as exc:
                if not (store.read_only and self._wal_index_unavailable(exc)):
                    raise
                # A WAL database in a folder we cannot write (a read-only mount, another user's
                # files): SQLite cannot create its -shm index. With no pending WAL content the
                # main file is the whole database, so it can be read as immutable.
                conn.close()
                conn = self._connect(uri + "&immutable=1")
                version, tables = self._version_and_tables(conn)
            if version > schema.SCHEMA_VERSION:
                raise SchemaVersionError(
                    f"database {path} has schema v{version}, newer than this dashbench "
                    f"(v{schema.SCHEMA_VERSION}): upgrade dashbench to open it; the file was not changed"
                )
            conn.execute(f"PRAGMA busy_timeout = {int(store.busy_timeout_s * 1000)}")
            conn.execute("PRAGMA foreign_keys = ON")
            if store.read_only:
                if version == 0:
                    raise StoreError(f"database {path} is empty or not a dashbench database")
                if version < schema.SCHEMA_VERSION:
                    raise StoreError(
                        f"database {path} has schema v{version}; open it once without "
                        f"read-only to upgrade it to v{schema.SCHEMA_VERSION}"
                    )
            else:
                if version == 0 and tables:
                    raise StoreError(f"{path} is an SQLite file but not a dashbench database")
                self._use_wal(conn)
                # WAL + NORMAL survives a killed process; only a power cut can lose the last commits.
                conn.execute("PRAGMA synchronous = NORMAL")
                if version < schema.SCHEMA_VERSION:  # alembic's revisions, under the write lock
                    upgrade = migrate.upgrade_sqlite(path, store.busy_timeout_s, say_wait=store._say_lock_wait)
        except sqlite3.DatabaseError as exc:
            conn.close()
            if not store.read_only and _is_read_only_error(exc):
                raise ReadOnlyError(self._not_writable("open it for writing")) from None
            raise StoreError(f"cannot read database {path}: {exc}{self._write_hint(exc)}") from None
        except BaseException:
            conn.close()
            raise
        self.conn = conn
        return upgrade

    def _connect(self, uri: str) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(
                uri,
                uri=True,
                isolation_level=None,
                timeout=self.store.busy_timeout_s,
                check_same_thread=False,
                factory=SQLiteConnection,
            )
            if self.store.read_only:  # before any statement; also said in words by ReadOnlyError
                conn.execute("PRAGMA query_only = ON")
            return conn
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open database {self.store.path}: {exc}{self._write_hint(exc)}") from None

    def _write_hint(self, exc: sqlite3.Error) -> str:
        if self.store.read_only or getattr(exc, "sqlite_errorname", "") not in ("SQLITE_CANTOPEN", "SQLITE_READONLY"):
            return ""
        return " (is the file or its folder read-only?)"

    def _not_writable(self, what: str) -> str:
        return (
            f"cannot {what}: database {self.store.path} is read-only (the file or its folder is not "
            f"writable for this user)"
        )

    def _wal_index_unavailable(self, exc: sqlite3.OperationalError) -> bool:
        path = self.store.path
        if (
            getattr(exc, "sqlite_errorname", "") not in ("SQLITE_CANTOPEN", "SQLITE_READONLY_DIRECTORY")
            or not path.is_file()
        ):
            return False
        wal = path.with_name(path.name + "-wal")
        try:
            return not wal.exists() or wal.stat().st_size == 0
        except OSError:
            return False

    @staticmethod
    def _version_and_tables(conn) -> tuple[int, int]:
        # One statement, one snapshot: read apart, another process creating the schema between
        # the two reads made a fresh file look like a foreign one (version 0, tables present).
        return tuple(
            conn.execute(
                "SELECT user_version, (SELECT count(*) FROM sqlite_master) FROM pragma_user_version"
            ).fetchone()
        )

    def _use_wal(self, conn) -> None:
        """Switch to WAL, waiting out other processes doing the same. SQLite answers 'locked' at
        once, without its busy handler, when the switch finds another connection reading the file
        (two processes opening a new database together), so the wait is ours."""
        deadline = time.monotonic() + self.store.busy_timeout_s
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

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None
            if self.store.read_only:
                tidy(self.store.path)

    # -- reads and transactions ------------------------------------------------------------------

    def _open_conn(self) -> SQLiteConnection:
        if self.conn is None:
            raise StoreError("the store is closed")
        return self.conn

    @contextlib.contextmanager
    def connection(self, answered: bool = True):
        yield self._open_conn()

    def read(self, sql: str, params) -> list[tuple]:
        return self._open_conn().execute(sql, list(params)).fetchall()

    def schema_version(self) -> int:
        return self._open_conn().execute("PRAGMA user_version").fetchone()[0]

    def change_token(self) -> tuple:
        return watch.change_token(self.store.path)

    def touch(self, conn) -> None:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        conn.execute(f"PRAGMA user_version = {int(version)}")

    def upgrade(self) -> tuple[int, int]:
        store = self.store
        try:
            return migrate.upgrade_sqlite(store.path, store.busy_timeout_s, say_wait=store._say_lock_wait)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot upgrade database {store.path}: {exc}") from None

    @contextlib.contextmanager
    def write(self, what: str, pipelined: bool = True):
        """BEGIN IMMEDIATE takes the write lock up front, so two writers queue on the busy timeout
        instead of deadlocking half-way."""
        conn = self._open_conn()
        try:
            self._begin_immediate(conn)
            try:
                yield conn
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            try:
                conn.execute("COMMIT")
            except sqlite3.Error:
                # A COMMIT that failed (a full disk, a file-size limit) may leave the transaction
                # open, holding the write lock and its rows: end it, so nothing of it lands.
                if conn.in_transaction:
                    with contextlib.suppress(sqlite3.Error):
                        conn.execute("ROLLBACK")
                raise
        except sqlite3.OperationalError as exc:
            # A file that cannot be written (permissions, a read-only mount) is said in one
            # line naming the file, wherever the write was; never an SQLite traceback.
            if _is_read_only_error(exc):
                raise ReadOnlyError(self._not_writable(what)) from None
            if _is_busy_error(exc):
                raise StoreBusyError(
                    f"cannot {what}: database {self.store.path} is locked by another "
                    f"process (waited {self.store.busy_timeout_s:g} s)"
                ) from None
            raise

    def _begin_immediate(self, conn) -> None:
        """BEGIN IMMEDIATE, tried again with backoff while another process holds the write lock
        past the busy timeout: a run whose samples are in memory keeps them (up to write_retry_s).
        Tried once without waiting first, so that a wait is said as it starts (LOCK_WAIT_NOTICE)."""
        deadline = time.monotonic() + self.store.write_retry_s
        pause = 0.05
        if self._begin_at_once(conn):
            return
        self.store._say_lock_wait()
        while True:
            try:
                conn.execute("BEGIN IMMEDIATE")
                return
            except sqlite3.OperationalError as exc:
                if not _is_busy_error(exc) or time.monotonic() >= deadline:
                    raise
            time.sleep(min(pause, max(0.0, deadline - time.monotonic())))
            pause = min(pause * 2, 2.0)

    def _begin_at_once(self, conn) -> bool:
        """BEGIN IMMEDIATE if no other process holds the write lock (True), without SQLite's busy wait."""
        conn.execute("PRAGMA busy_timeout = 0")
        try:
            conn.execute("BEGIN IMMEDIATE")
            return True
        except sqlite3.OperationalError as exc:
            if not _is_busy_error(exc):
                raise
            return False
        finally:
            conn.execute(f"PRAGMA busy_timeout = {int(self.store.busy_timeout_s * 1000)}")
