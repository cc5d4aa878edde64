"""The results database, behind one Store: an SQLite file (the embedded default) or a PostgreSQL server
(a `postgresql+psycopg://` URL, a team's store). The Store writes its SQL once and holds its lock around
every call; what differs between the databases (opening, connections, transactions, change tokens) is
its backend's (backend.py; sqlite/, postgres/), picked by the location's URL scheme (registry.py).

Read-only mode opens the database so that no code path can change it; every writing method also refuses
up front with ReadOnlyError, which says so in words. The Store is split by part: runs (runs.py), samples
and bundles' rows (samples.py), the job queue (queue.py), prices and calibrations (prices.py); this module
opens, reads and holds the transactions. No TensorFlow here.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from pathlib import Path
from typing import Callable, Iterable, Iterator

import pandas as pd

from dashbench.store import browse, queries, registry
from dashbench.store.errors import BundleError, ReadOnlyError, RollBack, SchemaVersionError, StoreBusyError, StoreError  # noqa: F401
from dashbench.store.ids import env_seconds, iso, new_run_id, new_sweep_id, now, pid_alive, short_id, this_host  # noqa: F401
from dashbench.store.prices import PricesPart
from dashbench.store.queue import QueueClaim, QueuePart  # noqa: F401  (QueueClaim: re-exported)
from dashbench.store.registry import database_file_exists, default_db_path, is_server_url, location, url_refusal  # noqa: F401
from dashbench.store.runs import LIVE_FIELDS, RUN_FIELDS, RunsPart, SpecMemo, _insert_run, _move  # noqa: F401
from dashbench.store.samples import SamplesPart
from dashbench.store.urls import ServerURL, masked, url_scheme  # noqa: F401

_RollBack = RollBack

# How long one write waits for another process's write lock (SQLite's busy timeout, PostgreSQL's
# lock_timeout), and how long a store made with write_retry_s goes on trying after that, with backoff.
# Settable for tests and slow shared disks: DASHBENCH_BUSY_TIMEOUT_S.
BUSY_TIMEOUT_S = 30.0
BUSY_TIMEOUT_ENV = "DASHBENCH_BUSY_TIMEOUT_S"


def busy_timeout_s() -> float:
    return env_seconds(BUSY_TIMEOUT_ENV, BUSY_TIMEOUT_S, 0, 86400)


def _say_lock_wait(path: Path) -> None:
    try:
        print(f"waiting for the database {path} (locked by another process) …", file=sys.stderr, flush=True)
    except (OSError, ValueError):  # no stderr left (a closed terminal): the wait goes on regardless
        pass


# Called as a write starts to wait for another process's write lock, so a command behind a long lock
# says so at once (as `waiting for the device …` does) rather than after the busy timeout, and a run
# process's log shows it. A module attribute so a caller can redirect it.
LOCK_WAIT_NOTICE: Callable[[Path], None] = _say_lock_wait


class Store(RunsPart, SamplesPart, QueuePart, PricesPart):
    """A handle on one results database. Thread-safe; also a context manager."""

    schema_upgrade = None  # (version before, after) when opening it upgraded the schema (migrate.py)

    def __init__(self, path: str | os.PathLike | None = None, read_only: bool = False, write_retry_s: float = 0.0):
        """`write_retry_s`: past the busy timeout, how long a write goes on trying to get the
        write lock (with backoff) before it fails; a run process sets it long, since its samples
        are in memory, while a page or a command fails fast and says the file is locked."""
        field, text = ("db", path) if path is not None else ("DASHBENCH_DB", os.environ.get("DASHBENCH_DB"))
        if url_refusal(text):
            raise StoreError(f"{field}: {url_refusal(text)}")
        self.path = location(path) if path is not None else default_db_path()
        self.read_only = read_only
        self.busy_timeout_s = busy_timeout_s()
        self.write_retry_s = float(write_retry_s)
        self._lock = threading.RLock()
        self._specs = SpecMemo()  # the specs of the runs this handle started (finish_run reads none)
        self._db = registry.backend_for(self.path)(self)
        self.dialect = self._db.dialect
        upgrade = self._db.open()
        if upgrade is not None:
            self.schema_upgrade = upgrade

    @property
    def is_server(self) -> bool:
        """Whether this store lives on a server (the team store), else in a file beside this process."""
        return self._db.is_server

    @property
    def answer_pending(self) -> bool:
        """Whether a write was sent to the server without its answer read yet (add_samples(wait=False))."""
        return self._db.answer_pending

    @property
    def location(self) -> "str | ServerURL":
        """What opens this same store in another process (a run's, a check's): the file's full path, or
        the server's URL (a ServerURL: its .url has the password, handed on in the environment only)."""
        return self._db.location

    @property
    def log_folder(self) -> Path:
        """Where the runs' and checks' logs of this store go: beside the file, or this host's data folder."""
        return self._db.log_folder

    @property
    def schema_version(self) -> int:
        with self._lock:
            return self._db.schema_version()

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Store({str(self.path)!r}, read_only={self.read_only})"

    # -- transactions ----------------------------------------------------------------------------

    @contextlib.contextmanager
    def _connection(self, answered: bool = True):
        """The connection for one read or one transaction (the backend's)."""
        with self._db.connection(answered) as conn:
            yield conn

    @contextlib.contextmanager
    def _write(self, what: str, pipelined: bool = True) -> Iterator:
        """One write transaction, committed as the block ends (backend.Backend.write). `pipelined`: on a
        server, its statements are sent without waiting for each answer, unless it COPYs."""
        if self.read_only:
            raise ReadOnlyError(f"cannot {what}: the store {self.path} is open read-only")
        with self._lock, self._db.write(what, pipelined) as conn:
            yield conn

    def _write_now(
        self, what: str, statements: list[tuple[str, list]], guarded: bool = False, also: list[tuple[str, list]] = ()
    ) -> bool:
        """Writes that read nothing, (sql, params) each, as one transaction: on a server one statement,
        so a run's create, samples, heartbeat and end cost one round trip each.
        `guarded`: the statements after the first are made only if the first changes a row (each ends in
        its WHERE clause); returns whether it did (True when not guarded). `also`: statements made in the
        same transaction whatever the guard found (a run's last samples, written with its end)."""
        with self._lock:
            return self._db.write_now(what, statements, guarded, also)

    def _send_now(self, what: str, statements: list[tuple[str, list]], again: Callable[[], None]) -> bool:
        """_write_now's statements sent without waiting for the answer, which this handle's next call
        reads first (raising a failure there); False where they cannot go so (SQLite, a statement libpq
        cannot take as it is): write them the waiting way. `again` writes them the waiting way when the
        server refused them for what that way sorts out (a stored key, a lock in the way)."""
        with self._lock:
            return self._db.send_now(what, statements, again)

    def _say_lock_wait(self) -> None:
        LOCK_WAIT_NOTICE(self.path)

    def check_writable(self, what: str = "write to it") -> None:
        """Raise ReadOnlyError unless this store can be written: a write that is rolled back
        (what `run` and `sweep` check before anything starts, so no run begins to fail later)."""
        try:
            with self._write(what) as conn:
                self._db.touch(conn)  # on a server, the server checks the session and the role's grants
                raise _RollBack
        except _RollBack:
            pass

    def _read(self, sql: str, params: Iterable = ()) -> list[tuple]:
        with self._lock:
            return self._db.read(sql, params)

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
        return self._db.change_token()

    def count_runs(self, **filters) -> int:
        return queries.count_runs(self._read, **filters)

    def distinct(self, column: str) -> list:
        """Distinct values of one filter column, for the dashboard's select boxes."""
        return queries.distinct(self._read, column)
