"""The PostgreSQL store's connections and write transactions: a pooled psycopg connection that takes the
store's `?` SQL, and writes sent in psycopg's pipeline (a transaction that reads nothing costs one round
trip to the server, not one per statement), each bumping the change counter (server.py) before it
commits. A refused or failed write is one line naming the database."""

from __future__ import annotations

import contextlib
import functools

from dashbench.store import retry
from dashbench.store.errors import ReadOnlyError
from dashbench.store.outage import unreachable
from dashbench.store.postgres import direct as pg_direct
from dashbench.store.postgres.dialect import POSTGRES
from dashbench.store.postgres.server import BUMP_CHANGES, CHANGES_TABLE, error_line, is_busy_error, is_read_only_error

# A write transaction that changed nothing (the dashboard's queue pump on every rerun, with nothing to
# start) has no transaction id: it leaves the count, so the pages' cached reads stay valid.
BUMP_IF_CHANGED = BUMP_CHANGES + " AND txid_current_if_assigned() IS NOT NULL"


@functools.lru_cache(maxsize=256)
def _pg_sql(sql: str) -> str:
    # psycopg's parameters are %s: a literal % doubles. No statement of the store has a ? in a literal.
    return sql.replace("%", "%%").replace("?", "%s")


class PgConnection:
    """A psycopg connection (autocommit: the Store says BEGIN and COMMIT) that takes the store's `?` SQL."""

    dialect = POSTGRES

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
            self.executemany(
                f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})", rows
            )
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


def checkout(engine, url: str, shown: str, lock_timeout_s: float) -> PgConnection:
    """A connection from the pool, checked alive as it is taken (pool_pre_ping); give it back with
    `.raw.close()`. A Store holds one while it is open, as it holds its SQLite connection."""
    import psycopg
    import sqlalchemy as sa

    try:
        return PgConnection(engine.raw_connection(), lock_timeout_s)
    except (sa.exc.SQLAlchemyError, psycopg.Error, OSError) as exc:
        raise unreachable(exc, f"cannot open database {shown}: {error_line(exc, url)}") from None


def give_back(conn: PgConnection) -> None:
    """Return the connection to the pool with the engine's lock_timeout, as the next user expects it."""
    import psycopg

    if not is_broken(conn) and conn.lock_ms != conn.full_lock_ms:
        with contextlib.suppress(psycopg.Error):
            conn.set_lock_wait(conn.full_lock_ms)
    if is_broken(conn) or _hung_up(conn):  # the pool's reset would fail on it, and log a traceback
        with contextlib.suppress(Exception):
            conn.raw.invalidate()
        return
    conn.raw.close()


def _hung_up(conn: PgConnection) -> bool:
    """Whether the server closed this idle connection (a restart since its last use): its socket then reads
    as ready, at end of file. Asked without waiting; a notice waiting to be read also counts, harmlessly."""
    import select

    try:
        ready, _, _ = select.select([conn.driver.pgconn.socket], [], [], 0)
    except Exception:  # no socket left: gone
        return True
    return bool(ready)


def is_broken(conn: PgConnection) -> bool:
    """Whether the server is gone from this connection (a restart, a dropped tunnel): take another."""
    return conn.driver.closed or conn.driver.broken


def _lock_wait_ms(conn: PgConnection) -> int:
    # A retried call's first try waits briefly, so that a wait is said as it starts (retry.py).
    return int(retry.NOTICE_AFTER_S * 1000) if retry.first_try() else conn.full_lock_ms


@contextlib.contextmanager
def _sending(conn: PgConnection, url: str, shown: str, what: str, pipelined: bool):
    """What every write shares: the statements sent in psycopg's pipeline (`pipelined`; else one by one,
    as a COPY must be), after the session's lock wait (set only when it differs), all answered before
    this ends; a failure ends what is left of the transaction and is said in one line (_failed)."""
    try:
        # Leaving the pipeline sends its one Sync and waits for every answer (raising the first error):
        # a sync() of ours before it would cost a second round trip for nothing.
        with conn.driver.pipeline() if pipelined else contextlib.nullcontext() as pipeline:
            conn.pipeline = pipeline
            try:
                conn.set_lock_wait(_lock_wait_ms(conn))
                yield conn
            finally:
                conn.pipeline = None
    except BaseException as exc:
        _failed(conn, exc, url, shown, what)
        raise


@contextlib.contextmanager
def write(conn: PgConnection, url: str, shown: str, what: str, pipelined: bool = True):
    """One write transaction on `conn`, the change counter bumped in it; a refused or failed write is one
    line naming the database (ReadOnlyError for a read-only session or a role that may not write;
    retry.Retryable, a StoreBusyError, for another writer in the way). Its statements go in psycopg's
    pipeline: sent without waiting for each answer, so a transaction that reads nothing costs one round
    trip to the server, not one per statement. `pipelined=False` for a transaction that COPYs."""
    with _sending(conn, url, shown, what, pipelined):
        conn.execute("BEGIN")
        yield conn
        conn.execute(BUMP_IF_CHANGED)
        conn.execute("COMMIT")


def write_now(conn: PgConnection, url: str, shown: str, what: str, statements, guarded: bool = False, also=()) -> bool:
    """Writes that read nothing ((sql, params) each), with the change counter's bump, as ONE statement
    (data-modifying WITH parts) in its own transaction: a run's create, samples, heartbeat and end cost
    one round trip each, as a commit costs on SQLite. `guarded`: the parts after the first, and the bump,
    are made only if the first changes a row (each part ends in its WHERE clause, which the condition
    joins); returns whether it did (True when not guarded). `also`: parts made whatever the guard found
    (the bump then always)."""
    sql = _one_statement(tuple(sql for sql, _params in statements), guarded, tuple(sql for sql, _params in also))
    params = [value for _sql, values in [*statements, *also] for value in values]
    if _lock_wait_ms(conn) == conn.lock_ms and pg_direct.usable(conn.driver):
        typed = pg_direct.typed(params)
        if typed is not None:  # the usual case: libpq's own call, no psycopg cursor (direct.py)
            try:
                return pg_direct.execute(conn.driver, sql, *typed) > 0
            except BaseException as exc:
                _failed(conn, exc, url, shown, what)
                raise
    # The pipeline only when the lock wait must be set first: the two statements then go in one trip.
    with _sending(conn, url, shown, what, pipelined=_lock_wait_ms(conn) != conn.lock_ms):
        cursor = conn.execute(sql, params)
    return cursor.rowcount > 0


def send_now(conn: PgConnection, url: str, shown: str, what: str, statements, guarded: bool = False, also=()) -> bool:
    """write_now's statement sent without waiting for its answer (pg_direct.send; answer() reads it), where
    it can go by libpq as it is; False where it must go the waiting way."""
    if _lock_wait_ms(conn) != conn.lock_ms or not pg_direct.usable(conn.driver):
        return False
    typed = pg_direct.typed([value for _sql, values in [*statements, *also] for value in values])
    if typed is None:
        return False
    sql = _one_statement(tuple(sql for sql, _params in statements), guarded, tuple(sql for sql, _params in also))
    try:
        pg_direct.send(conn.driver, sql, *typed)
    except BaseException as exc:
        _failed(conn, exc, url, shown, what)
        raise
    return True


def answer(conn: PgConnection, url: str, shown: str, what: str) -> int:
    """The answer to the oldest statement send_now sent (its row count); a failure said as write_now says it."""
    try:
        return pg_direct.answer(conn.driver)
    except BaseException as exc:
        _failed(conn, exc, url, shown, what)
        raise


@functools.lru_cache(maxsize=64)
def _one_statement(sqls: tuple[str, ...], guarded: bool, also: tuple[str, ...] = ()) -> str:
    """write_now's statement for these parts' SQL (built once: a run's writes are a handful of shapes)."""
    # All parts see the statement's snapshot, not each other's rows: a guarded part reads its guard's
    # RETURNING, so it is made exactly when the guard's row was (after the row lock's recheck too).
    guard = " AND EXISTS (SELECT 1 FROM w0)" if guarded else ""
    parts = [f"w{k} AS ({sql}{guard if k else ''} RETURNING 1)" for k, sql in enumerate(sqls)]
    parts += [f"w{k} AS ({sql} RETURNING 1)" for k, sql in enumerate(also, start=len(sqls))]
    # The parts of a WITH run in no set order; the counter's row is locked last, as in every other write,
    # by bumping it by a sum that needs them all done first (a lock taken in another order could deadlock).
    done = " UNION ALL ".join(f"SELECT 1 FROM w{k}" for k in range(len(sqls) + len(also)))
    bump = f"UPDATE {CHANGES_TABLE} SET n = n + 1 + 0 * (SELECT count(*) FROM ({done}) AS done) WHERE id = 1"
    if not also:
        return f"WITH {', '.join(parts)} {bump}{guard} RETURNING 1"
    # Made whatever the guard finds, the bump is a part too (every part of a WITH runs to its end, read or
    # not); the rows answered say whether the guard's row changed.
    return f"WITH {', '.join(parts)}, bump AS ({bump} RETURNING 1) SELECT 1 FROM {'w0' if guarded else 'bump'}"


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
        raise ReadOnlyError(
            f"cannot {what}: database {shown} is read-only for this session or role ({error_line(exc, url)})"
        ) from None
    if is_busy_error(exc):
        waited = isinstance(exc, (psycopg.errors.LockNotAvailable, psycopg.errors.QueryCanceled))
        kind = "lock" if waited else "conflict"
        raise retry.Retryable(
            f"cannot {what}: database {shown} is locked by another writer ({error_line(exc, url)})", kind
        ) from None
    if isinstance(exc, (psycopg.OperationalError, psycopg.errors.InFailedSqlTransaction)):
        raise unreachable(exc, f"cannot {what}: database {shown}: {error_line(exc, url)}") from None


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
