"""The store on a PostgreSQL server: a pooled connection held while the Store is open (server.py opens
the pool, connection.py writes on it), every write one transaction that also bumps the change counter
and waits lock_timeout, a read-only store's sessions read-only, and a run's writes sent without waiting
for their answer where they can go so (the handle's next call reads it first).
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import Callable

from dashbench.store import migrate, outage, retry
from dashbench.store.backend import Backend
from dashbench.store.errors import ReadOnlyError, StoreError
from dashbench.store.postgres import connection as pg_connection
from dashbench.store.postgres import server
from dashbench.store.postgres.dialect import POSTGRES


class PostgresBackend(Backend):
    dialect = POSTGRES
    is_server = True
    retries_writes = True

    def __init__(self, store):
        super().__init__(store)
        # A server's URL is kept here only; the store's `path` is what is shown (its password masked).
        self.url = store.path.url
        self.engine = None
        self.engine_key = None
        self.conn = None  # the pooled connection this store holds while open
        self.in_flight = None  # (what, write again) of a write sent to the server not yet answered (send_now)

    @classmethod
    def exists(cls, where) -> bool:
        return True  # the Store asks the server; a wrong address is its error

    @property
    def location(self):
        """The server's URL (a ServerURL: its .url has the password, handed on in the environment only)."""
        return self.store.path

    @property
    def log_folder(self) -> Path:
        return Path.home() / ".local" / "share" / "dashbench" / "logs"

    @property
    def answer_pending(self) -> bool:
        return self.in_flight is not None

    # -- opening ---------------------------------------------------------------------------------

    def open(self) -> tuple[int, int] | None:
        import psycopg

        store, shown = self.store, self.store.path
        try:
            self.engine_key, self.engine = server.acquire_engine(self.url, store.read_only, store.busy_timeout_s)
        except ValueError as exc:  # SQLAlchemy's reading of the URL (a port that is no number); ArgumentError too
            raise StoreError(f"db: the URL {shown} cannot be read: {exc}") from None
        try:
            with self.connection() as conn:
                try:
                    upgrade = server.open_schema(conn, self.url, shown, store.read_only)
                except psycopg.Error as exc:
                    raise server.refused(exc, self.url, shown) from None
            if not upgrade:
                return None
            try:
                return migrate.upgrade_postgres(self.url, shown, store.busy_timeout_s, say_wait=store._say_lock_wait)
            except ReadOnlyError as exc:
                if not isinstance(getattr(exc.__context__, "orig", None), psycopg.errors.InsufficientPrivilege):
                    raise
                role, _database = server._role_and_database(self.url)
                raise ReadOnlyError(
                    f"db: the role {role} may not create the store's tables in {shown}: "
                    f"make the store once with the owner's role (`dashbench store upgrade "
                    f"--db` its URL), or grant this one CREATE on the schema"
                ) from None
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        if self.engine is None:
            return
        if self.in_flight is not None:
            what = self.in_flight[0]
            try:
                self._answer_in_flight()
            except Exception as exc:  # closing after a failure: say it, do not hide the first one
                print(f"warning: cannot {what}: {exc}", file=sys.stderr)
        if self.conn is not None:
            with contextlib.suppress(Exception):
                pg_connection.give_back(self.conn)  # back to the pool
            self.conn = None
        self.engine = None
        server.release_engine(self.engine_key)

    def _checkout(self):
        """A pooled connection for this store; a server that refuses or cannot be reached is one line."""
        try:
            return pg_connection.checkout(self.engine, self.url, self.store.path, self.store.busy_timeout_s)
        except StoreError as exc:
            if exc.__context__ is None:
                raise
            raise server.refused(exc.__context__, self.url, self.store.path) from None

    def _on_server(self, ask: Callable, doing: str = "read"):
        """ask(connection), again once on a fresh connection where the server dropped this one since its
        last use (a restart, a dropped tunnel); a driver's error said as the store's one line (refused)."""
        import psycopg

        for attempt in (1, 2):
            with self.connection() as conn:
                try:
                    return ask(conn)
                except psycopg.Error as exc:
                    if attempt == 2 or not pg_connection.is_broken(conn):
                        error = server.refused(exc, self.url, self.store.path, doing)
                        if outage.is_outage(exc) and not isinstance(error, outage.StoreUnreachable):
                            error = outage.StoreUnreachable(str(error))  # one class the writers wait out
                        raise error from None

    @contextlib.contextmanager
    def connection(self, answered: bool = True):
        """One from the server's pool, with the answer to a write in flight read first (unless not
        `answered`: write_now's own)."""
        if self.engine is None:
            raise StoreError("the store is closed")
        if self.conn is None:
            self.conn = self._checkout()
        if self.in_flight is not None and answered:  # nothing else may use the connection before
            self._answer_in_flight()
        try:
            yield self.conn
        finally:
            if self.conn is not None and pg_connection.is_broken(self.conn):
                self._drop_conn()  # the next read or write takes a fresh one from the pool

    def _drop_conn(self) -> None:
        self.in_flight = None  # its answer went with the connection (the error that dropped it is raised)
        conn, self.conn = self.conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.raw.invalidate() if hasattr(conn.raw, "invalidate") else conn.raw.close()

    # -- reads -----------------------------------------------------------------------------------

    def read(self, sql: str, params) -> list[tuple]:
        return self._on_server(lambda conn: pg_connection.read(conn, sql, params, self.store._say_lock_wait))

    def schema_version(self) -> int:
        return self._on_server(lambda conn: server.version(conn)[0])

    def change_token(self) -> tuple:
        """The counter every write transaction bumps."""
        with self.store._lock:
            return ("postgresql", self.store.path, self._on_server(server.change_count))

    def upgrade(self) -> tuple[int, int]:
        store = self.store
        return migrate.upgrade_postgres(self.url, store.path, store.busy_timeout_s, say_wait=store._say_lock_wait)

    # -- writes ----------------------------------------------------------------------------------

    @contextlib.contextmanager
    def write(self, what: str, pipelined: bool = True):
        """`pipelined`: its statements are sent without waiting for each answer (connection.write),
        unless it COPYs."""
        with self.connection() as conn, pg_connection.write(conn, self.url, self.store.path, what, pipelined):
            yield conn

    def touch(self, conn) -> None:
        conn.execute(server.BUMP_CHANGES)  # the server checks the session and the role's grants

    def take_queue_turn(self, conn, host: str) -> None:
        """Pumps of one host take turns (an advisory lock per host); a pump skips the rows another
        host's pump holds (the dialect's claim_rows)."""
        conn.execute("SELECT pg_advisory_xact_lock(?)", (server.advisory_key("dashbench-queue:" + host),))

    def write_now(
        self, what: str, statements: list[tuple[str, list]], guarded: bool = False, also: list[tuple[str, list]] = ()
    ) -> bool:
        """One statement (connection.write_now), so a run's create, samples, heartbeat and end cost one
        round trip each; behind a write in flight in the same trip where it can go so."""
        if self.store.read_only:
            return super().write_now(what, statements, guarded, also)
        import psycopg

        shown = self.store.path
        with self.connection(answered=False) as conn:
            if self.in_flight is not None:  # in the same trip, behind it, if it can go so: both answers read
                try:
                    sent = pg_connection.send_now(conn, self.url, shown, what, statements, guarded, also)
                except BaseException:
                    self._drop_conn()  # cut off half sent: no one may read what follows
                    raise
                if sent:
                    try:
                        return self._answer_in_flight(behind=what) > 0
                    except psycopg.errors.InvalidSqlStatementName:  # discarded under us: prepared again below
                        pass
                else:
                    self._answer_in_flight()
            return pg_connection.write_now(conn, self.url, shown, what, statements, guarded, also)

    def send_now(self, what: str, statements: list[tuple[str, list]], again: Callable[[], None]) -> bool:
        """The statements sent without waiting for the answer, which this handle's next call reads first
        (raising a failure there); False where they cannot go so (a statement libpq cannot take as it is).
        `again` writes them the waiting way when the server refused them for what that way sorts out (a
        stored key, a lock in the way)."""
        if self.store.read_only:
            return False
        with self.connection() as conn:
            try:
                if not pg_connection.send_now(conn, self.url, self.store.path, what, statements):
                    return False
            except BaseException:
                if conn.driver.pgconn.pipeline_status:  # cut off half sent: no one may read what follows
                    self._drop_conn()
                raise
            self.in_flight = (what, again)
        return True

    def _answer_in_flight(self, behind: str | None = None) -> int:
        """Read the answer to the write in flight (a refusal that the waiting way sorts out: written again
        that way), and to the one sent `behind` it if any, whose row count this returns or error raises."""
        import psycopg

        what, again = self.in_flight
        self.in_flight = None
        answers = []
        for said in [what] if behind is None else [what, behind]:
            try:
                answers.append(pg_connection.answer(self.conn, self.url, self.store.path, said))
            except (psycopg.Error, StoreError) as exc:
                answers.append(exc)
                if pg_connection.is_broken(self.conn):
                    self._drop_conn()  # gone: the next call takes a fresh one
                    break
            except BaseException:
                self._drop_conn()  # cut off mid-answer: no one may read what follows
                raise
        first = answers[0]
        if (
            isinstance(first, (retry.Retryable, psycopg.errors.IntegrityError, psycopg.errors.InvalidSqlStatementName))
            and self.conn is not None
        ):
            again()
        elif isinstance(first, BaseException):
            raise first
        if behind is None:
            return 0
        if isinstance(answers[-1], BaseException) or len(answers) < 2:
            raise answers[-1]
        return answers[1]
