"""The interface one database implements for the Store: what differs in opening it, holding its
connection, a write transaction, a read, a change token and a schema upgrade. The Store (database.py)
writes its SQL once and asks its backend for everything else; each database has a folder with its own
(sqlite/backend.py, postgres/backend.py), and registry.py picks one by the location's URL scheme.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Callable, Iterable, Iterator

from dashbench.store.dialect import Dialect


class Backend:
    """One open database of a Store. It reads the Store's settings (path, read_only, busy_timeout_s,
    write_retry_s) and says a lock wait through it (`store._say_lock_wait`); the Store holds its lock
    around every call."""

    dialect: Dialect
    # Whether the store lives on a server (the team store) rather than in a file beside this process.
    is_server = False
    # Whether a write that another writer got in the way of is tried again (retry.retried) rather than
    # waited for by the database itself.
    retries_writes = False

    def __init__(self, store):
        self.store = store

    @classmethod
    def exists(cls, where) -> bool:
        """Whether a database is at `where` (False: none yet, opening makes one)."""
        raise NotImplementedError

    def open(self) -> tuple[int, int] | None:
        """Open the database, made or upgraded to the schema's head unless read-only: (version before,
        after) when it upgraded the schema, else None. A failure is the store's one line."""
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    @property
    def location(self) -> str:
        """What opens this same store in another process (a run's, a check's)."""
        raise NotImplementedError

    @property
    def log_folder(self) -> Path:
        """Where the runs' and checks' logs of this store go."""
        raise NotImplementedError

    @property
    def answer_pending(self) -> bool:
        """Whether a write was sent without its answer read yet (send_now)."""
        return False

    @contextlib.contextmanager
    def connection(self, answered: bool = True) -> Iterator:
        """The connection for one read or one transaction."""
        raise NotImplementedError
        yield

    @contextlib.contextmanager
    def write(self, what: str, pipelined: bool = True) -> Iterator:
        """One write transaction, committed when the block ends and rolled back when it raises; a write
        the database refuses is one line (ReadOnlyError, StoreBusyError, StoreUnreachable)."""
        raise NotImplementedError
        yield

    def write_now(
        self, what: str, statements: list[tuple[str, list]], guarded: bool = False, also: list[tuple[str, list]] = ()
    ) -> bool:
        """Store._write_now's statements as one transaction (see there); this way fits any database."""
        with self.store._write(what) as conn:
            for sql, params in also:
                conn.execute(sql, params)
            for k, (sql, params) in enumerate(statements):
                if conn.execute(sql, params).rowcount == 0 and guarded and k == 0:
                    return False
        return True

    def send_now(self, what: str, statements: list[tuple[str, list]], again: Callable[[], None]) -> bool:
        """Send write_now's statements without waiting for the answer (False: this database cannot)."""
        return False

    def read(self, sql: str, params: Iterable) -> list[tuple]:
        raise NotImplementedError

    def schema_version(self) -> int:
        raise NotImplementedError

    def change_token(self) -> tuple:
        """Changes whenever any connection commits to this database."""
        raise NotImplementedError

    def touch(self, conn) -> None:
        """Write nothing that matters inside a write transaction that is then rolled back: whether the
        database takes a write at all (Store.check_writable)."""
        raise NotImplementedError

    def take_queue_turn(self, conn, host: str) -> None:
        """Inside the job queue's claim: wait for other pumps of this host to end theirs (where the write
        transaction alone does not keep them out)."""

    def upgrade(self) -> tuple[int, int]:
        """Take the open database to the schema's head (`dashbench store upgrade`): (version before, after)."""
        raise NotImplementedError
