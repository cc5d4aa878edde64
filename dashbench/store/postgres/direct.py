"""A run's one-statement writes on PostgreSQL (connection.write_now) sent by libpq's own blocking call on a
statement prepared once per connection, past psycopg's cursor: psycopg's Python layer (its cursor, query
conversion, parameter dumpers, result generators and waits) costs the client several times the CPU of
PQexecPrepared per statement, and a run's create, samples and end are four such statements
(docs/history/performance.md).

Parameters go as text with the types psycopg would give them (a str or None untyped, for the server to
infer from its column; an int as bigint; a float as double precision, in Python's shortest exact form), so
the server reads the same values; any other kind of value, and every other statement, takes psycopg's path.
Errors are psycopg's own exception classes (psycopg.errors.error_from_result), so callers map them as before.
"""

from __future__ import annotations

import select
import weakref

# Per psycopg connection, its prepared statements (_Names). Bounded: past KEEP, a statement is sent
# unprepared (the store has a handful of such writes; a pooled connection lives long).
_prepared: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
KEEP = 32
_TEXT, _BIGINT, _DOUBLE = 0, 20, 701  # 0: untyped, as psycopg sends a str; the others are PostgreSQL's oids
_INVALID_STATEMENT_NAME = b"26000"  # a statement discarded under us (DISCARD ALL, a pooler): prepared again


def usable(driver) -> bool:
    """Whether this connection's text is UTF-8, as the parameters are written (else psycopg's path)."""
    return driver.info.encoding == "utf-8"


def typed(params) -> tuple[tuple, list] | None:
    """(the parameters' types, their text as bytes) for libpq, or None when one is of another kind."""
    types, values = [], []
    for value in params:
        kind = type(value)
        if value is None:
            types.append(_TEXT)
            values.append(None)
        elif kind is str and "\x00" not in value:  # libpq would cut the text there; psycopg refuses it
            types.append(_TEXT)
            values.append(value.encode())
        elif kind is int and -(2**63) <= value < 2**63:
            types.append(_BIGINT)
            values.append(b"%d" % value)
        elif kind is float:  # 'nan', 'inf' and '-inf' read back as themselves
            types.append(_DOUBLE)
            values.append(repr(value).encode())
        else:
            return None
    return tuple(types), values


def send(driver, sql: str, types: tuple, values: list) -> None:
    """Send one statement as execute() runs it, without waiting for its answer (libpq's pipeline mode: the
    connection stays in it until answer() has read every answer due). A run's samples go so while it
    trains, and the run's next write goes behind them; nothing else may use the connection meanwhile."""
    from psycopg import pq

    pgconn = driver.pgconn
    known = _prepared.setdefault(driver, _Names())
    key, fresh = (sql, types), False
    if pgconn.pipeline_status == pq.PipelineStatus.OFF:
        name = _name(driver, sql, types)  # prepared first, if new, while nothing is due
        pgconn.enter_pipeline_mode()
    else:  # answers are due: a new statement is prepared in the pipeline, answered with it
        name = known.names.get(key)
        if name is None and len(known.names) < KEEP:
            name, fresh = known.new_name(), True
            pgconn.send_prepare(name, _numbered(sql).encode(), types)
            known.names[key] = name
    if name is None:
        pgconn.send_query_params(_numbered(sql).encode(), values, types)
    else:
        pgconn.send_query_prepared(name, values)
    pgconn.pipeline_sync()
    known.due.append((key, fresh))
    while pgconn.flush() == 1:  # a nonblocking connection whose socket is full: wait until it takes the rest
        select.select([], [pgconn.socket], [])


def answer(driver) -> int:
    """Wait for the answer of the oldest statement send() sent, leaving pipeline mode after the last one
    due; its row count, as execute() returns it. A failure raises psycopg's error (a prepared statement
    discarded under us: its name is forgotten, so the caller's next try prepares it again)."""
    from psycopg import pq

    pgconn, known = driver.pgconn, _prepared[driver]
    rows, failed, results = 0, None, 0
    while True:
        while pgconn.is_busy():
            select.select([pgconn.socket], [], [])
            pgconn.consume_input()
        result = pgconn.get_result()
        if result is None:  # the end of one statement's results
            continue
        if result.status == pq.ExecStatus.PIPELINE_SYNC:
            break
        results += 1
        if result.status in (pq.ExecStatus.COMMAND_OK, pq.ExecStatus.TUPLES_OK):
            rows = int(result.command_tuples or 0)
        elif failed is None:
            failed, failed_first = result, results == 1
    key, fresh = known.due.pop(0)
    if not known.due:
        pgconn.exit_pipeline_mode()
    if failed is not None:
        if (fresh and failed_first) or failed.error_field(pq.DiagnosticField.SQLSTATE) == _INVALID_STATEMENT_NAME:
            known.names.pop(key, None)  # prepared again by the next try (under a new name)
        _check(failed, driver)
    return rows


def due(driver) -> int:
    """How many statements send() sent on this connection whose answers are not read yet."""
    known = _prepared.get(driver)
    return 0 if known is None else len(known.due)


def _name(driver, sql: str, types: tuple) -> bytes | None:
    """The name of this statement prepared on this connection (prepared now if new), or None past KEEP."""
    known = _prepared.setdefault(driver, _Names())
    name = known.names.get((sql, types))
    if name is None and len(known.names) < KEEP:
        name = known.new_name()
        _check(driver.pgconn.prepare(name, _numbered(sql).encode(), types), driver)
        known.names[(sql, types)] = name
    return name


def execute(driver, sql: str, types: tuple, values: list) -> int:
    """Run one statement of the store's `?` SQL on a psycopg connection in autocommit, waiting for it with
    the GIL released; its row count (a RETURNING statement's rows). A failure raises psycopg's error."""
    from psycopg import pq

    pgconn = driver.pgconn
    known = _prepared.setdefault(driver, _Names())
    key = (sql, types)
    for attempt in (1, 2):
        name = _name(driver, sql, types)
        if name is None:
            result = pgconn.exec_params(_numbered(sql).encode(), values, types)
        else:
            result = pgconn.exec_prepared(name, values)
        if (
            attempt == 1
            and name is not None
            and result.status == pq.ExecStatus.FATAL_ERROR
            and result.error_field(pq.DiagnosticField.SQLSTATE) == _INVALID_STATEMENT_NAME
        ):
            del known.names[key]  # prepared again under a new name: a name is never used twice
            continue
        _check(result, driver)
        return int(result.command_tuples or 0)
    raise AssertionError("not reached: the second attempt returns or raises")


class _Names:
    """One connection's prepared statements: {(SQL, types): name}, names numbered, never given twice."""

    def __init__(self):
        self.names: dict = {}
        self.made = 0
        self.due: list = []  # ((SQL, types), prepared with it) of each statement send() sent, not answered yet

    def new_name(self) -> bytes:
        self.made += 1
        return b"dashbench_%d" % self.made


def _check(result, driver) -> None:
    from psycopg import errors, pq

    if result.status in (pq.ExecStatus.COMMAND_OK, pq.ExecStatus.TUPLES_OK):
        return
    if driver.pgconn.status == pq.ConnStatus.BAD:  # the server or the wire gone: psycopg says it so too
        raise errors.OperationalError(pq.error_message(result, encoding=driver.info.encoding))
    raise errors.error_from_result(result, encoding=driver.info.encoding)


_numbered_cache: dict[str, str] = {}


def _numbered(sql: str) -> str:
    """The store's `?` parameters as libpq's $1, $2, …: no statement of the store has a ? in a literal."""
    text = _numbered_cache.get(sql)
    if text is None:
        parts = sql.split("?")
        text = parts[0] + "".join(f"${k}{part}" for k, part in enumerate(parts[1:], start=1))
        if len(_numbered_cache) < 256:
            _numbered_cache[sql] = text
    return text
