"""Running the store's alembic revisions (dashbench/store/migrations/): no alembic.ini, alembic is handed an
open connection inside one transaction that holds the store's migration lock, so a reader (or a crash)
sees the old schema or the new one, and two processes opening an old store at once never both migrate:
SQLite's write lock (BEGIN IMMEDIATE) or PostgreSQL's advisory lock is taken first, the version read
again under it, and the second process finds the work done.

The version every dashbench reads stays where it was before alembic (PRAGMA user_version on SQLite, the
`dashbench_schema` row on PostgreSQL) and is written in the same transaction as the steps; alembic's
`alembic_version` row follows it: a store from before alembic (or one whose row says otherwise) is
stamped at its number, then upgraded.

    python -m dashbench.store.migrate revision "what the change does"   # the next revision's file
"""

from __future__ import annotations

import contextlib
import functools
import sqlite3
import sys
import threading
import time
from pathlib import Path
from typing import Callable

from dashbench.store import migrations, retry, sidecars
from dashbench.store.errors import ReadOnlyError, SchemaVersionError, StoreBusyError, StoreError
from dashbench.store.postgres import server as postgres

LOCK_NAME = "dashbench-schema"  # the advisory lock's name on PostgreSQL (as before alembic)
POSTGRES_FIRST = 9  # PostgreSQL stores began at v9: revision 0001 makes v9's layout there


def _config(connection):
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(migrations.FOLDER))
    config.set_main_option("path_separator", "os")
    config.attributes["connection"] = connection
    return config


@functools.lru_cache(maxsize=4)
def _script(folder: str):
    """alembic's view of the revision files, loaded once per process (a store is opened many times)."""
    from alembic.script import ScriptDirectory

    return ScriptDirectory(folder)


def _steps(connection, number: int, target: int) -> None:
    """Inside the caller's transaction and lock: alembic's row set to `number`, then the revisions to `target`."""
    import sqlalchemy as sa
    from alembic.runtime.environment import EnvironmentContext
    from alembic.runtime.migration import MigrationContext

    from dashbench.store.migrations import env

    script = _script(str(migrations.FOLDER))
    want = migrations.revision_id(number)
    context = MigrationContext.configure(connection)
    if context.get_current_heads() != ((want,) if want else ()):
        if sa.inspect(connection).has_table("alembic_version"):
            connection.exec_driver_sql("DELETE FROM alembic_version")
        if want:
            context.stamp(script, want)
    if target > number:
        destination = migrations.revision_id(target)
        # What `alembic upgrade` does, with the revisions kept loaded: env.py's run() on our connection.
        with EnvironmentContext(
            _config(connection),
            script,
            destination_rev=destination,
            fn=lambda revision, _context: script._upgrade_revs(destination, revision),
        ):
            env.run(connection)


def _newer(shown, number: int) -> SchemaVersionError:
    head = migrations.head_number()
    return SchemaVersionError(
        f"database {shown} has schema v{number}, newer than this dashbench (v{head}): "
        f"upgrade dashbench to open it; it was not changed"
    )


# -- SQLite ----------------------------------------------------------------------------------------


_sqlite_file = threading.local()  # (path, busy timeout, say_wait) of the file upgrade_sqlite works on here


def _connect_sqlite():
    # The driver leaves transactions alone; the "begin" hook says BEGIN IMMEDIATE. Foreign keys are off
    # for the steps (a table rebuild drops and renames tables), checked before the commit.
    path, busy_timeout_s, _say_wait = _sqlite_file.target
    conn = sqlite3.connect(path, timeout=busy_timeout_s, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA foreign_keys = OFF")
    return conn


@functools.lru_cache(maxsize=1)
def _sqlite_engine():
    """One engine for every file (no pool: a connection per upgrade), so SQLAlchemy compiles alembic's
    statements once per process, not once per store made."""
    import sqlalchemy as sa

    engine = sa.create_engine("sqlite://", creator=_connect_sqlite, poolclass=sa.NullPool)
    # SQLAlchemy's recipe for SQLite transactions: the write lock up front, so two migrating processes
    # queue on it instead of both reading the old version.
    sa.event.listen(engine, "begin", lambda conn: _begin_immediate(conn.connection.dbapi_connection))
    return engine


def _begin_immediate(raw: sqlite3.Connection) -> None:
    """BEGIN IMMEDIATE; while another process holds the write lock (its own migration, a long write) for
    more than NOTICE_AFTER_S, the wait is said as on PostgreSQL ("waiting for the database …"), then waited
    for up to the busy timeout in all. sqlite3's errors are raised as they are."""
    _path, busy_timeout_s, say_wait = _sqlite_file.target
    first_s = min(retry.NOTICE_AFTER_S, busy_timeout_s)
    raw.execute(f"PRAGMA busy_timeout = {int(first_s * 1000)}")
    try:
        raw.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as exc:
        busy = (getattr(exc, "sqlite_errorname", "") or "").startswith("SQLITE_BUSY") or "locked" in str(exc)
        if not busy or say_wait is None or busy_timeout_s <= first_s:
            raise
        say_wait()
        raw.execute(f"PRAGMA busy_timeout = {int((busy_timeout_s - first_s) * 1000)}")
        raw.execute("BEGIN IMMEDIATE")
    finally:
        raw.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")


def upgrade_sqlite(
    path, busy_timeout_s: float = 30.0, to: int | None = None, say_wait: Callable[[], None] | None = None
) -> tuple[int, int]:
    """Take the SQLite file at `path` to schema `to` (the head): (version before, version after); the two
    are equal when another process got there first. `say_wait()` is called once if the write lock is not
    had within NOTICE_AFTER_S (the Store passes its "waiting for the database …" line). Raises sqlite3's
    errors as they are (the Store says them in its words), SchemaVersionError for a file newer than the code."""
    import sqlalchemy as sa

    target = migrations.head_number() if to is None else int(to)
    _sqlite_file.target = (str(Path(path)), busy_timeout_s, say_wait)
    try:
        with _sqlite_engine().connect() as conn:
            with conn.begin():
                before = conn.exec_driver_sql("PRAGMA user_version").scalar()
                if before > migrations.head_number():
                    raise _newer(path, before)
                after = max(before, target)
                _steps(conn, before, after)
                broken = conn.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
                if broken:
                    raise sqlite3.IntegrityError(f"migration broke references: {broken[:3]}")
                if after != before:
                    conn.exec_driver_sql(f"PRAGMA user_version = {int(after)}")
            return before, after
    except sa.exc.DBAPIError as exc:
        raise exc.orig from None
    finally:
        _sqlite_file.target = None


def upgraded_copy(path, folder) -> Path | None:
    """A copy of the SQLite store at `path`, taken to the head in `folder`, when `path` holds an older
    schema; None when it does not (at the head, newer, not a store: opening it says so). The file is only
    read, as a read-only Store reads it, and no -wal or -shm is left beside it: a store moved into the
    team's keeps the version it had for whoever still runs an older dashbench on it."""
    source = Path(path)
    try:
        conn = sqlite3.connect(f"{source.resolve().as_uri()}?mode=ro", uri=True, timeout=30.0)
    except sqlite3.Error:
        return None  # the Store names the reason when it opens the file
    try:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if not 0 < version < migrations.head_number():
            return None
        copy = Path(folder) / source.name
        with contextlib.closing(sqlite3.connect(copy)) as target:
            conn.backup(target)  # one consistent snapshot, WAL content included, written page by page
    except sqlite3.Error as exc:
        raise StoreError(f"cannot read database {source}: {exc}") from None
    finally:
        conn.close()
        sidecars.tidy(source)
    try:
        upgrade_sqlite(copy)
    except sqlite3.Error as exc:
        raise StoreError(f"cannot upgrade a copy of database {source} (v{version}): {exc}") from None
    return copy


# -- PostgreSQL ------------------------------------------------------------------------------------


def upgrade_postgres(
    url: str, shown, lock_timeout_s: float = 30.0, to: int | None = None, say_wait: Callable[[], None] | None = None
) -> tuple[int, int]:
    """Make the database at `url` a store at the head, or take it there: (version before, after), 0 before
    for an empty database. Under an advisory lock held to the commit, `say_wait()` called once if another
    process holds it past NOTICE_AFTER_S; errors are one line naming `shown` (the URL as shown: its password
    never)."""
    import psycopg
    import sqlalchemy as sa

    target = migrations.head_number() if to is None else int(to)
    engine = sa.create_engine(
        postgres._driver_url(url),
        poolclass=sa.NullPool,
        connect_args={
            "options": f"-c lock_timeout={int(lock_timeout_s * 1000)}",
            "application_name": "dashbench",
            "connect_timeout": 10,
        },
    )
    try:
        with engine.connect() as conn, conn.begin():
            _advisory_lock(conn, postgres.advisory_key(LOCK_NAME), say_wait)
            found, tables = conn.exec_driver_sql(
                f"SELECT to_regclass('{postgres.SCHEMA_TABLE}') IS NOT NULL, (SELECT count(*) FROM pg_tables"
                " WHERE schemaname = current_schema() AND tablename != 'alembic_version')"
            ).one()
            before = (
                conn.exec_driver_sql(f"SELECT max(version) FROM {postgres.SCHEMA_TABLE}").scalar() or 0 if found else 0
            )
            if before == 0 and tables:
                raise StoreError(f"database {shown} holds tables but is not a dashbench database")
            if before > migrations.head_number():
                raise _newer(shown, before)
            if 0 < before < POSTGRES_FIRST:
                raise StoreError(f"database {shown} has schema v{before}: this dashbench has no step from it")
            after = max(before, target)
            _steps(conn, before, after)
            if after != before:
                conn.exec_driver_sql(f"UPDATE {postgres.SCHEMA_TABLE} SET version = {int(after)}")
                conn.exec_driver_sql(postgres.BUMP_CHANGES)  # the pages' cache: the columns changed
            return before, after
    except sa.exc.DBAPIError as exc:
        error = exc.orig
        if isinstance(error, psycopg.Error) and postgres.is_read_only_error(error):
            raise ReadOnlyError(
                f"cannot upgrade the schema: database {shown} is read-only for this session "
                f"or role ({postgres.error_line(error, url)})"
            ) from None
        if isinstance(error, psycopg.Error) and postgres.is_busy_error(error):
            raise StoreBusyError(
                f"cannot upgrade the schema: database {shown} is locked by another process "
                f"({postgres.error_line(error, url)})"
            ) from None
        raise StoreError(f"cannot upgrade the schema of database {shown}: {postgres.error_line(exc, url)}") from None
    finally:
        engine.dispose()


def _advisory_lock(conn, key: int, say_wait: Callable[[], None] | None) -> None:
    """The transaction's advisory lock: tried without waiting for NOTICE_AFTER_S (a failed wait would end
    the transaction), then, said, waited for up to lock_timeout."""
    deadline = time.monotonic() + retry.NOTICE_AFTER_S
    while not conn.exec_driver_sql("SELECT pg_try_advisory_xact_lock(%s)", (key,)).scalar():
        if time.monotonic() >= deadline:
            if say_wait is not None:
                say_wait()
            conn.exec_driver_sql("SELECT pg_advisory_xact_lock(%s)", (key,))
            return
        time.sleep(0.05)


def upgrade_store(store) -> tuple[int, int]:
    """Take an open Store's database to the head (it is there already unless another process went back):
    what `dashbench store upgrade` runs after opening it; a store from before alembic is stamped."""
    return store._db.upgrade()


# -- the next revision -----------------------------------------------------------------------------


def new_revision(message: str) -> Path:
    """Write versions/NNNN_<message>.py for schema v(head + 1) from script.py.mako: the one file a schema
    change adds."""
    import re

    from alembic import command

    number = migrations.head_number() + 1
    slug = re.sub(r"\W+", "_", message.lower()).strip("_")[:40] or "step"
    config = _config(None)
    config.set_main_option("file_template", "%%(rev)s_" + slug)
    script = command.revision(config, message=message, rev_id=migrations.revision_id(number))
    return Path(script.path)


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] != "revision" or not argv[1].strip():
        print('usage: python -m dashbench.store.migrate revision "what the change does"', file=sys.stderr)
        return 2
    print(new_revision(argv[1]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
