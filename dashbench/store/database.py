"""The results database: one SQLite file (WAL mode) that every run lands in and every view reads.

One writer and many readers at once is SQLite's WAL sweet spot: readers never block the writer,
and writers wait (busy timeout) instead of failing with "database is locked".
Read-only mode opens the file with the `mode=ro` URI, so no code path can change it; every
writing method also refuses up front with ReadOnlyError, which says so in words.
No TensorFlow here.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import math
import os
import re
import secrets
import socket
import sqlite3
import stat
import sys
import threading
import time
from pathlib import Path
from typing import Callable, Iterable, Iterator

import pandas as pd

from dashbench.result import RunResult, short_id  # noqa: F401  (short_id: re-exported)
from dashbench.store import browse, queries, schema, states, validate, watch
from dashbench.store.sidecars import tidy
from dashbench.store.states import TERMINAL
from dashbench.spec import RunSpec, check_id

# How long one write waits for another process's write lock (SQLite's busy timeout), and how long
# a store made with write_retry_s goes on trying after that, with backoff. Settable for tests and
# slow shared disks: DASHBENCH_BUSY_TIMEOUT_S.
BUSY_TIMEOUT_S = 30.0
BUSY_TIMEOUT_ENV = "DASHBENCH_BUSY_TIMEOUT_S"


def busy_timeout_s() -> float:
    text = os.environ.get(BUSY_TIMEOUT_ENV)
    if not text:
        return BUSY_TIMEOUT_S
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value <= 86400:
        raise StoreError(f"{BUSY_TIMEOUT_ENV}: {text!r} is not a number of seconds from 0 to 86400")
    return value


def _is_read_only_error(exc: sqlite3.Error) -> bool:
    name = getattr(exc, "sqlite_errorname", "") or ""
    return name.startswith("SQLITE_READONLY") or "readonly database" in str(exc)


def _is_busy_error(exc: sqlite3.Error) -> bool:
    name = getattr(exc, "sqlite_errorname", "") or ""
    return name.startswith("SQLITE_BUSY") or "database is locked" in str(exc)


class _RollBack(Exception):
    """Ends a write transaction that only checked something, undoing it."""


class StoreError(RuntimeError):
    """A problem with the database file itself, said in one line."""


class ReadOnlyError(StoreError):
    """A write was attempted on a store opened read-only, or on a file that cannot be written."""


class StoreBusyError(StoreError):
    """Another process held the write lock for longer than this store waits."""


def _say_lock_wait(path: Path) -> None:
    try:
        print(f"waiting for the database {path} (locked by another process) …", file=sys.stderr, flush=True)
    except (OSError, ValueError):  # no stderr left (a closed terminal): the wait goes on regardless
        pass


# Called as a write starts to wait for another process's write lock, so a command behind a long lock
# says so at once (as `waiting for the device …` does) rather than after the busy timeout, and a run
# process's log shows it. A module attribute so a caller can redirect it.
LOCK_WAIT_NOTICE: Callable[[Path], None] = _say_lock_wait


class SchemaVersionError(StoreError):
    """The file was written by a newer dashbench; it is left exactly as it is."""


class BundleError(StoreError):
    """An export bundle that cannot be imported; the message says which file and what is wrong."""


# A scheme and "//": a server's address (postgresql+psycopg://user@host/db), not a file. Taken as a
# path it made folders named like the URL in the working folder.
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")


def url_scheme(text) -> str | None:
    """"postgresql+psycopg://" for a database URL, None for a path. Only the scheme is ever shown:
    a URL may carry a password."""
    match = _URL.search(text) if isinstance(text, str) else None
    return match.group(0) if match else None


def url_refusal(text) -> str | None:
    """The words that refuse a database URL, or None for anything else."""
    if url_scheme(text) is None:
        return None
    return (f"a database URL ({url_scheme(text)}…) is not accepted; only SQLite file paths are, "
            f"for now (e.g. results.sqlite)")


def database_file_exists(path: str | os.PathLike) -> bool:
    """Whether a database file is at `path` (False: none yet). A folder, or a folder that cannot be
    looked into, is a StoreError naming it: never a traceback, never "read-only"."""
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


def default_db_path() -> Path:
    env = os.environ.get("DASHBENCH_DB")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".local" / "share" / "dashbench" / "dashbench.sqlite"


def this_host() -> str:
    return socket.gethostname()


def new_run_id() -> str:
    # Sortable by time and unique across machines, so bundles from many hosts merge without clashes.
    return f"{_dt.datetime.now(_dt.timezone.utc):%Y%m%d-%H%M%S}-{secrets.token_hex(4)}"


def new_sweep_id() -> str:
    # The CLI's sweeps and the Run page's share one format; views/compare tells sweeps apart by the tail.
    return "sweep-" + new_run_id()


def now() -> float:
    # Microsecond resolution, so a time survives the ISO text of an export bundle unchanged.
    return round(time.time(), 6)


def iso(epoch: float | None) -> str | None:
    if epoch is None:
        return None
    return _dt.datetime.fromtimestamp(epoch, _dt.timezone.utc).isoformat()


def pid_alive(pid: int | None, started_at: float | None = None) -> bool:
    """Whether `pid` is still the process that started the run (not a zombie, not a reused pid)."""
    if not pid:
        return False
    import psutil

    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return False
        # A process created after the run started is a reused pid, not our run.
        if started_at is not None and proc.create_time() > started_at + 2.0:
            return False
        return True
    except (psutil.NoSuchProcess, psutil.AccessDenied, ProcessLookupError):
        return False


def _spec_dict(spec: RunSpec | dict) -> dict:
    if isinstance(spec, RunSpec):
        return spec.to_dict()
    return RunSpec.from_dict(dict(spec)).to_dict()


class Store:
    """A handle on one results database. Thread-safe; also a context manager."""

    def __init__(self, path: str | os.PathLike | None = None, read_only: bool = False,
                 write_retry_s: float = 0.0):
        """`write_retry_s`: past the busy timeout, how long a write goes on trying to get the
        write lock (with backoff) before it fails; a run process sets it long, since its samples
        are in memory, while a page or a command fails fast and says the file is locked."""
        field, text = ("db", path) if path is not None else ("DASHBENCH_DB", os.environ.get("DASHBENCH_DB"))
        if url_refusal(text):
            raise StoreError(f"{field}: {url_refusal(text)}")
        self.path = Path(path).expanduser() if path is not None else default_db_path()
        self.read_only = read_only
        self.busy_timeout_s = busy_timeout_s()
        self.write_retry_s = float(write_retry_s)
        self._lock = threading.RLock()
        self._conn = self._open()

    # -- opening ---------------------------------------------------------------------------------

    def _open(self) -> sqlite3.Connection:
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
                if version < schema.SCHEMA_VERSION:
                    schema.migrate(conn, version)
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
                                   check_same_thread=False)
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
        with self._lock:
            return self._conn.execute("PRAGMA user_version").fetchone()[0]

    def close(self) -> None:
        with self._lock:
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
    def _write(self, what: str) -> Iterator[sqlite3.Connection]:
        """One write transaction. BEGIN IMMEDIATE takes the write lock up front, so two writers
        queue on the busy timeout instead of deadlocking half-way."""
        if self.read_only:
            raise ReadOnlyError(f"cannot {what}: the store {self.path} is open read-only")
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
                version = conn.execute("PRAGMA user_version").fetchone()[0]
                conn.execute(f"PRAGMA user_version = {int(version)}")
                raise _RollBack
        except _RollBack:
            pass

    def _read(self, sql: str, params: Iterable = ()) -> list[tuple]:
        with self._lock:
            if self._conn is None:
                raise StoreError("the store is closed")
            return self._conn.execute(sql, list(params)).fetchall()

    # -- run lifecycle ---------------------------------------------------------------------------

    def create_run(self, spec: RunSpec | dict, status: str = "running", sweep_id: str | None = None,
                   pid: int | None = None, host: str | None = None, run_id: str | None = None) -> str:
        if not states.allowed(None, status):
            raise ValueError(f"status: a new run is 'running' or 'queued', not {status!r}")
        spec_d = _spec_dict(spec)
        # Every way a run comes in checks ids as import does, so an exported run always imports.
        check_id("run_id", run_id, null=True)
        check_id("sweep_id", sweep_id, null=True)
        run_id = run_id or new_run_id()
        created = now()
        if status == "running":
            pid = os.getpid() if pid is None else pid
            host = host or this_host()
        elif pid is not None:
            # A queued run's pid is its owner (a `sweep` process): the run is cancelled with it,
            # by reconcile once the owner is gone, never started after it.
            host = host or this_host()
        run = {"run_id": run_id, "status": status, "spec": spec_d, "created_at": created,
               "started_at": created if status == "running" else None, "pid": pid, "host": host,
               "sweep_id": sweep_id}
        with self._write("create a run") as conn:
            try:
                _insert_run(conn, run)
            except sqlite3.IntegrityError:
                raise StoreError(f"run {run_id} already exists") from None
        return run_id

    def start_run(self, run_id: str, pid: int, host: str | None = None, log_path: str | None = None) -> None:
        """queued → running. Also accepts a row a job launcher already marked running for this process."""
        with self._write("start a run") as conn:
            row = conn.execute("SELECT status, started_at, log_path FROM runs WHERE run_id = ?", (run_id,)).fetchone()
            if row is None:
                raise StoreError(f"no run {run_id} in {self.path}")
            old, started_at, old_log_path = row
            if not states.allowed(old, "running"):
                raise StoreError(f"run {run_id} is {old}; only a queued run can start")
            _move(conn, run_id, "running", {
                "pid": pid, "host": host or this_host(), "started_at": now() if started_at is None else started_at,
                "log_path": old_log_path if log_path is None else log_path,
            })

    def add_samples(self, run_id: str, samples: list[dict]) -> None:
        if not samples:
            return
        rows = [
            (run_id, int(s["index"]), int(s["steps"]), float(s["duration_s"]),
             None if s.get("loss") is None else float(s["loss"]), int(bool(s.get("warmup", False))))
            for s in samples
        ]
        with self._write("add samples") as conn:
            conn.executemany(
                "INSERT OR REPLACE INTO samples (run_id, idx, steps, duration_s, loss, warmup) VALUES (?,?,?,?,?,?)",
                rows,
            )

    def set_phase(self, run_id: str, phase: str | None) -> None:
        with self._write("set a run's phase") as conn:
            conn.execute("UPDATE runs SET phase = ? WHERE run_id = ?", (phase, run_id))

    def finish_run(self, run_id: str, status: str, result: dict | None = None, error: str | None = None) -> bool:
        """Record the end. Returns False when the run had already ended (done/failed/cancelled)."""
        if status not in TERMINAL:
            raise ValueError(f"status: a run ends as one of {', '.join(TERMINAL)}, not {status!r}")
        with self._write("finish a run") as conn:
            row = conn.execute(
                "SELECT status, spec_json FROM runs JOIN run_blobs USING (run_id) WHERE run_id = ?", (run_id,)
            ).fetchone()
            if row is None:
                raise StoreError(f"no run {run_id} in {self.path}")
            if not states.allowed(row[0], status):
                return False
            values = {"finished_at": now(), "error": error, "phase": None}
            if result is not None:
                conn.execute("UPDATE run_blobs SET result_json = ? WHERE run_id = ?", (json.dumps(result), run_id))
                values.update(schema.flat_values(json.loads(row[1]), result))
            _move(conn, run_id, status, values)
        return True

    def finish_unreported(self, run_id: str, status: str, error: str) -> bool:
        """Record the end of a run that died before recording its own, as the process that launched
        it judged from the exit code. Returns False (and changes nothing) once the run has an end."""
        if status not in TERMINAL:
            raise ValueError(f"status: a run ends as one of {', '.join(TERMINAL)}, not {status!r}")
        with self._write("record a run's end") as conn:
            # Not over "interrupted" either: another process already judged this death.
            return _move(conn, run_id, status, {"error": error, "finished_at": now(), "phase": None},
                         only_from=states.ACTIVE)

    def request_cancel(self, run_id: str) -> str:
        """Mark a run to be cancelled. A queued run ends `cancelled` now; for a running one the
        caller signals the process, and the mark turns a silent death into `cancelled` too.
        Returns the run's status after the call."""
        with self._write("cancel a run") as conn:
            row = conn.execute("SELECT status FROM runs WHERE run_id = ?", (run_id,)).fetchone()
            if row is None:
                raise StoreError(f"no run {run_id} in {self.path}")
            if row[0] == "queued":
                _move(conn, run_id, "cancelled", {"finished_at": now(), "cancel_requested": int(now())})
                return "cancelled"
            if row[0] == "running":
                # The time of asking (not just a flag), so a run that ignores SIGTERM can be killed later.
                conn.execute("UPDATE runs SET cancel_requested = ? WHERE run_id = ?", (int(now()), run_id))
            return row[0]

    def cancel_asked(self, run_id: str) -> bool:
        """Whether a cancel was asked for this run (request_cancel): what a run process's guard
        polls, so a run whose engine ignores SIGTERM still ends `cancelled` in time."""
        rows = self._read("SELECT cancel_requested FROM runs WHERE run_id = ?", (run_id,))
        return bool(rows and rows[0][0])

    def reconcile(self, skip_pids: Iterable[int] = ()) -> int:
        """Runs marked running on this host whose process is gone become `interrupted` (or
        `cancelled` if a cancel was asked for). Their samples so far stay. Queued runs whose owner
        (the sweep process that queued them) is gone become `cancelled`. Returns how many.
        `skip_pids`: processes the caller launched itself and judges from their exit codes."""
        with self._write("reconcile runs") as conn:
            return _reconcile(conn, frozenset(skip_pids))

    # -- the job queue ---------------------------------------------------------------------------

    @contextlib.contextmanager
    def claim_queue(self, skip_pids: Iterable[int] = ()) -> Iterator["QueueClaim"]:
        """The job queue's turn: one write transaction that first reconciles this host's dead runs
        (all but `skip_pids`, the caller's own children, judged from their exit codes instead),
        then lets the caller claim queued runs. No other process can claim meanwhile, so two
        pumping sessions never start two runs on one device."""
        with self._write("start queued runs") as conn:
            _reconcile(conn, frozenset(skip_pids))
            claim = QueueClaim(conn, this_host())
            try:
                yield claim
            finally:
                claim._conn = None  # its reads and writes mean nothing outside the transaction

    def queue_position(self, run_id: str) -> int | None:
        """1 for the next run to start on its device, 2 behind it, ...; None if the run is not queued."""
        rows = self._read(
            "SELECT status, created_at, json_extract(spec_json, '$.device') FROM runs JOIN run_blobs USING (run_id)"
            " WHERE run_id = ?", (run_id,))
        if not rows or rows[0][0] != "queued":
            return None
        _status, created, device = rows[0]
        # Runs for "auto" may take any device, so they count as ahead on every one.
        ahead = self._read(
            "SELECT count(*) FROM runs JOIN run_blobs USING (run_id) WHERE status IN ('queued', 'running')"
            " AND created_at <= ? AND run_id != ? AND json_extract(spec_json, '$.device') IN (?, 'auto')",
            (created, run_id, device),
        )[0][0]
        return ahead + 1

    def delete_runs(self, run_ids: Iterable[str]) -> int:
        ids = list(run_ids)
        if not ids:
            return 0
        with self._write("delete runs") as conn:
            deleted = 0
            for chunk in _chunks(ids):
                marks = ",".join("?" * len(chunk))
                conn.execute(f"DELETE FROM samples WHERE run_id IN ({marks})", chunk)
                conn.execute(f"DELETE FROM run_blobs WHERE run_id IN ({marks})", chunk)
                deleted += conn.execute(f"DELETE FROM runs WHERE run_id IN ({marks})", chunk).rowcount
            return deleted

    # -- queries ---------------------------------------------------------------------------------

    def get_run(self, run_id: str) -> dict | None:
        """One run as a dict: RUN_FIELDS (times as ISO text) and LIVE_FIELDS; its "result" is a
        RunResult (None until the run is done). A stored run that cannot be read whole also has
        "unreadable": "field: why" (and the unreadable part empty)."""
        rows = self._read(f"{_RUN_SELECT} WHERE run_id = ?", (run_id,))
        if not rows:
            return None
        run = _run_dict(rows[0])
        # A result that is not what the engine writes (a hand edit, an older version) is left out
        # and named, so a page that shows this run still loads.
        try:
            if run["result"] is not None:
                RunResult.check(run["result"], finite=False)
            run["result"] = RunResult.from_dict(run["result"]) if run["result"] else None
        except (TypeError, ValueError) as exc:
            run["result"] = None
            run["unreadable"] = f"result.{exc}"
        return run

    def resolve_run_id(self, given: str) -> str:
        """A full run id from what a user types: the id, a unique prefix of it (after `list`), or the
        short form the dashboard shows ('#0e8b0a' or '0e8b0a': a unique ending)."""
        text = str(given).strip()
        if text.startswith("#"):
            rows = self._read("SELECT run_id FROM runs WHERE substr(run_id, -?) = ? LIMIT 2",
                              (len(text) - 1, text[1:]))
        else:
            rows = self._read("SELECT run_id FROM runs WHERE run_id >= ? AND run_id < ? LIMIT 2",
                              (text, text + "\U0010ffff"))
            if not rows and text:
                rows = self._read("SELECT run_id FROM runs WHERE substr(run_id, -?) = ? LIMIT 2", (len(text), text))
        if len(rows) == 1:
            return rows[0][0]
        if not rows:
            raise StoreError(f"run_id: no run {given!r} in {self.path}")
        raise StoreError(f"run_id: {given!r} matches several runs; give more characters")

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

    def run_ids(self, **filters) -> list[str]:
        """The ids of the runs that pass the filters (as runs(), limit included), newest first."""
        return browse.run_ids(self._read, **filters)

    def known_ids(self, run_ids) -> list[str]:
        """Those of these run ids that are stored, in the order given."""
        return browse.known_ids(self._read, run_ids)

    def change_token(self) -> tuple:
        """Changes whenever any connection commits to this database (watch.change_token)."""
        return watch.change_token(self.path)

    def count_runs(self, **filters) -> int:
        return queries.count_runs(self._read, **filters)

    def samples(self, run_id: str | list[str]) -> pd.DataFrame:
        """A run's samples (queries.SAMPLE_COLUMNS), or several runs' with a run_id column."""
        return queries.samples(self._read, run_id)

    def sample_buckets(self, run_id: str | list[str], buckets: int = queries.CHART_BUCKETS,
                       measured_only: bool = False) -> pd.DataFrame:
        """samples() for a chart: at most `buckets` rows per run and phase, summed in SQL (queries.sample_buckets)."""
        return queries.sample_buckets(self._read, run_id, buckets, measured_only)

    def distinct(self, column: str) -> list:
        """Distinct values of one filter column, for the dashboard's select boxes."""
        return queries.distinct(self._read, column)

    # -- whole runs out and in (export bundles) --------------------------------------------------

    def export_rows(self, **filters) -> list[dict]:
        """The runs matching `filters` (as runs()), oldest first, each as get_run's dict plus
        "samples": lists in queries.SAMPLE_COLUMNS order."""
        where, params, limit = queries.where_clause(filters)
        sql = f"{_RUN_SELECT}{where} ORDER BY created_at, run_id"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        runs = [_run_dict(row) for row in self._read(sql, params)]
        samples: dict[str, list] = {run["run_id"]: [] for run in runs}
        for chunk in _chunks(list(samples)):
            for run_id, idx, steps, duration_s, loss, warmup in self._read(
                f"SELECT run_id, idx, steps, duration_s, loss, warmup FROM samples WHERE run_id IN"
                f" ({','.join('?' * len(chunk))}) ORDER BY run_id, idx", chunk
            ):
                samples[run_id].append([idx, steps, duration_s, loss, bool(warmup)])
        for run in runs:
            run["samples"] = samples[run["run_id"]]
        return runs

    def import_rows(self, runs: Iterable[dict]) -> dict:
        """Add whole runs from elsewhere in ONE transaction; a run id already here is skipped.
        Each run: RUN_FIELDS with the times in epoch seconds and an ended status (states.IMPORTED),
        and "samples" as lists in queries.SAMPLE_COLUMNS order. Returns counts: runs_added,
        runs_skipped, samples_added, and runs_differing: for each skipped run whose stored copy differs
        from the one offered (same id, other content), "run_id: field" naming the first difference;
        the stored copy is kept as it is."""
        counts = {"runs_added": 0, "runs_skipped": 0, "samples_added": 0, "runs_differing": []}
        with self._write("import runs") as conn:
            for run in runs:
                if run["status"] not in states.IMPORTED:
                    raise ValueError(f"status: an imported run has ended ({', '.join(states.IMPORTED)}), "
                                     f"not {run['status']!r} (run {run['run_id']})")
                if conn.execute("SELECT 1 FROM runs WHERE run_id = ?", (run["run_id"],)).fetchone():
                    counts["runs_skipped"] += 1
                    difference = _first_difference(conn, run)
                    if difference is not None:
                        counts["runs_differing"].append(f"{run['run_id']}: {difference}")
                    continue
                _insert_run(conn, run)
                samples = run.get("samples") or []
                conn.executemany(
                    "INSERT INTO samples (run_id, idx, steps, duration_s, loss, warmup) VALUES (?,?,?,?,?,?)",
                    [(run["run_id"], idx, steps, duration_s, loss, int(bool(warmup)))
                     for idx, steps, duration_s, loss, warmup in samples],
                )
                counts["runs_added"] += 1
                counts["samples_added"] += len(samples)
        return counts

    # -- price overrides (read by dashbench.costs) -----------------------------------------------

    def price_overrides(self) -> list[dict]:
        cols = schema.PRICE_COLUMNS
        rows = self._read(f"SELECT {', '.join(cols)} FROM price_overrides ORDER BY key")
        out = []
        for row in rows:
            item = dict(zip(cols, row))
            item["unconfirmed"] = bool(item["unconfirmed"])
            out.append(item)
        return out

    def set_price_override(self, row: dict) -> None:
        unknown = sorted(set(row) - set(schema.PRICE_COLUMNS))
        if unknown:
            raise ValueError(f"{unknown[0]}: unknown price column; known: {', '.join(schema.PRICE_COLUMNS)}")
        for required in ("key", "device", "unit"):
            if not row.get(required):
                raise ValueError(f"{required}: is required for a price row")
        values = {c: row.get(c) for c in schema.PRICE_COLUMNS}
        values["unconfirmed"] = int(bool(values["unconfirmed"]))
        values["origin"] = "override"
        values["updated_at"] = now()
        with self._write("change a price") as conn:
            _insert(conn, "price_overrides", values, verb="INSERT OR REPLACE")

    def delete_price_override(self, key: str) -> bool:
        with self._write("delete a price") as conn:
            return conn.execute("DELETE FROM price_overrides WHERE key = ?", (key,)).rowcount > 0

    def reset_price_overrides(self) -> int:
        with self._write("reset prices") as conn:
            return conn.execute("DELETE FROM price_overrides").rowcount

    # -- calibrations (`dashbench doctor`) -------------------------------------------------------

    def add_calibration(self, row: dict) -> int:
        """Store one verdict of `dashbench doctor`: host, device, backend, verdict (ok | warning |
        error) are required; versions, peaks ({dtype: TFLOP/s}), reasons and detail are JSON."""
        for required in ("host", "device", "backend", "verdict"):
            if not row.get(required):
                raise ValueError(f"{required}: is required for a calibration row")
        if row["verdict"] not in ("ok", "warning", "error"):
            raise ValueError(f"verdict: {row['verdict']!r} is not one of ok, warning, error")
        ratio = row.get("stopwatch_ratio")
        values = {
            "created_at": row.get("created_at") or now(), "host": row["host"], "device": row["device"],
            "accelerator": row.get("accelerator"), "backend": row["backend"],
            "versions_json": json.dumps(row.get("versions") or {}),
            "peaks_json": json.dumps({k: float(v) for k, v in (row.get("peaks") or {}).items() if v is not None}),
            "stopwatch_ratio": None if ratio is None else float(ratio), "verdict": row["verdict"],
            "reasons_json": json.dumps(list(row.get("reasons") or [])),
            "detail_json": json.dumps(row.get("detail") or {}, default=str),
        }
        with self._write("store a calibration") as conn:
            _insert(conn, "calibrations", values)
            return conn.execute("SELECT last_insert_rowid()").fetchone()[0]

    def calibrations(self, host: str | None = None, device: str | None = None, backend: str | None = None,
                     limit: int | None = None) -> list[dict]:
        """Stored calibrations, newest first, optionally of one host, device kind and backend."""
        where, params = [], []
        for column, value in (("host", host), ("device", device), ("backend", backend)):
            if value is not None:
                where.append(f"{column} = ?")
                params.append(value)
        sql = f"SELECT id, {', '.join(schema.CALIBRATION_COLUMNS)} FROM calibrations"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY created_at DESC, id DESC"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        return [_calibration_dict(row) for row in self._read(sql, params)]

    def last_calibration(self, host: str, device: str | None = None, backend: str | None = None) -> dict | None:
        """The newest calibration of `host` (of one device kind and backend, when given), or None."""
        found = self.calibrations(host, device, backend, limit=1)
        return found[0] if found else None

    def best_cpu_peaks(self, host: str) -> dict[str, float]:
        """The best CPU matmul rate (TFLOP/s) this host's calibrations measured, per dtype, over
        every backend: the peak a CPU run on this host measures its MFU against. {} when none."""
        best: dict[str, float] = {}
        for row in self.calibrations(host, "cpu"):
            for dtype, value in row["peaks"].items():
                if isinstance(value, (int, float)) and value > 0 and value > best.get(dtype, 0.0):
                    best[dtype] = float(value)
        return best

    # -- the first CPU probe (the provisional peak before `doctor`) ------------------------------

    def first_cpu_peaks(self, host: str, backend: str) -> dict[str, float]:
        """The first CPU matmul rate (TFLOP/s) probed on `host` with `backend`, per dtype: the
        provisional peak its CPU runs share until a calibration exists. {} when none is stored."""
        rows = self._read("SELECT dtype, tflops FROM first_cpu_probes WHERE host = ? AND backend = ?",
                          (host, backend))
        return {dtype: float(tflops) for dtype, tflops in rows}

    def keep_first_cpu_peaks(self, host: str, backend: str, peaks: dict, run_id: str | None = None) -> dict[str, float]:
        """Store `peaks` ({dtype: TFLOP/s}) as the first probe of `host` on `backend` for each dtype
        that has none yet: a first probe stays, so every later run measures against the same peak.
        Returns the first probe as stored."""
        for dtype, value in peaks.items():
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value) \
                    or value <= 0:
                raise ValueError(f"peaks: {dtype} must be a positive TFLOP/s figure, got {value!r}")
        with self._write("store the first CPU probe") as conn:
            for dtype, value in peaks.items():
                conn.execute("INSERT OR IGNORE INTO first_cpu_probes (host, backend, dtype, tflops, created_at, "
                             "run_id) VALUES (?, ?, ?, ?, ?, ?)", (host, backend, str(dtype), float(value), now(), run_id))
        return self.first_cpu_peaks(host, backend)


def _calibration_dict(row: tuple) -> dict:
    item = dict(zip(("id", *schema.CALIBRATION_COLUMNS), row))
    for column, default in (("versions_json", {}), ("peaks_json", {}), ("reasons_json", []), ("detail_json", {})):
        text = item.pop(column)
        try:
            value = json.loads(text) if text else default
        except ValueError:  # a damaged row reads as empty, never a crash
            value = default
        item[column[:-5]] = value if isinstance(value, type(default)) else default
    item["created"] = iso(item["created_at"])
    return item


class QueueClaim:
    """What the job queue reads and writes while it holds the queue (Store.claim_queue): the
    runs of this host, and the claims it makes. Usable only inside that `with` block."""

    def __init__(self, conn: sqlite3.Connection, host: str):
        self._conn = conn
        self.host = host

    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StoreError("the queue claim is over: use it inside `with store.claim_queue()`")
        return self._conn

    def running_specs(self) -> list[dict]:
        """The specs of the runs going on this host."""
        rows = self._db().execute(
            "SELECT spec_json FROM runs JOIN run_blobs USING (run_id) WHERE status = 'running' AND host = ?",
            (self.host,),
        ).fetchall()
        return [json.loads(spec_json) for (spec_json,) in rows]

    def queued(self) -> list[tuple[str, dict]]:
        """(run_id, spec) of the runs waiting for this host (or for any host), oldest first."""
        rows = self._db().execute(
            "SELECT run_id, spec_json FROM runs JOIN run_blobs USING (run_id)"
            " WHERE status = 'queued' AND (host = ? OR host IS NULL) ORDER BY created_at, run_id",
            (self.host,),
        ).fetchall()
        return [(run_id, json.loads(spec_json)) for run_id, spec_json in rows]

    def cancels_asked(self) -> list[dict]:
        """Runs going on this host that were asked to cancel: run_id, pid, started_at and asked_at
        (epoch seconds)."""
        rows = self._db().execute(
            "SELECT run_id, pid, started_at, cancel_requested FROM runs"
            " WHERE status = 'running' AND host = ? AND cancel_requested > 1",
            (self.host,),
        ).fetchall()
        return [{"run_id": run_id, "pid": pid, "started_at": started_at, "asked_at": asked_at}
                for run_id, pid, started_at, asked_at in rows]

    def started(self, run_id: str, pid: int, log_path: str) -> None:
        """queued → running, as the process `pid` that the caller launched for it."""
        if not _move(self._db(), run_id, "running", {"pid": pid, "host": self.host, "started_at": now(),
                                                      "log_path": log_path, "phase": "starting"},
                     only_from=("queued",)):
            raise StoreError(f"run {run_id} cannot start: it is no longer queued")

    def failed_to_start(self, run_id: str, error: str) -> None:
        """queued → failed: its process could not be launched."""
        _move(self._db(), run_id, "failed", {"finished_at": now(), "error": error}, only_from=("queued",))


# -- a run as a dict (get_run, export_rows, import_rows) ------------------------------------------

# The fields of a run as stored and exported, and their SQL columns (runs JOIN run_blobs).
RUN_FIELDS = ("run_id", "status", "spec", "result", "error", "created_at", "started_at", "finished_at",
              "pid", "host", "sweep_id", "label")
# What only a run going here has: its phase, whether a cancel was asked, its process's log.
LIVE_FIELDS = ("phase", "cancel_requested", "log_path")
_JSON_COLUMNS = {"spec": "spec_json", "result": "result_json"}
_RUN_SELECT = (f"SELECT {', '.join(_JSON_COLUMNS.get(f, f) for f in RUN_FIELDS + LIVE_FIELDS)}"
               " FROM runs JOIN run_blobs USING (run_id)")


def _run_dict(row: tuple) -> dict:
    """A row of _RUN_SELECT as a run dict: JSON parsed, times as ISO text."""
    run = dict(zip(RUN_FIELDS + LIVE_FIELDS, row))
    for name, empty in (("spec", {}), ("result", None)):
        try:
            run[name] = json.loads(run[name]) if run[name] else empty
        except (TypeError, ValueError):
            # Named, not raised: one damaged row must not stop the others from being read.
            run[name] = empty
            run["unreadable"] = f"{name}: not JSON"
    for name in ("created_at", "started_at", "finished_at"):
        try:
            run[name] = iso(run[name])
        except (TypeError, ValueError, OverflowError, OSError):
            run["unreadable"] = f"{name}: not a time ({run[name]!r})"
            run[name] = None
    run["cancel_requested"] = bool(run["cancel_requested"])
    return run


# -- SQL on a connection inside a write transaction the Store holds --------------------------------


def _insert_run(conn, run: dict) -> None:
    """One run (RUN_FIELDS with epoch times; absent ones empty): its row in runs, its JSON in run_blobs."""
    spec, result = run["spec"], run.get("result")
    values = {name: run.get(name) for name in RUN_FIELDS if name not in _JSON_COLUMNS}
    values["label"] = run.get("label", spec.get("label"))
    values.update(schema.flat_values(spec, result))
    _insert(conn, "runs", values)
    conn.execute("INSERT INTO run_blobs (run_id, spec_json, result_json) VALUES (?, ?, ?)",
                 (run["run_id"], json.dumps(spec), None if result is None else json.dumps(result)))


def _first_difference(conn, run: dict) -> str | None:
    """The first field in which the stored run `run["run_id"]` differs from `run` (an import's
    form: epoch times, samples as lists), or None when they are the same run."""
    row = conn.execute(f"{_RUN_SELECT} WHERE run_id = ?", (run["run_id"],)).fetchone()
    stored = dict(zip(RUN_FIELDS + LIVE_FIELDS, row))
    for name in ("spec", "result"):
        try:
            stored[name] = json.loads(stored[name]) if stored[name] else None
        except (TypeError, ValueError):
            pass
    for name in ("status", "spec", "result", "error", "host", "sweep_id", "label"):
        offered = run.get(name, run["spec"].get("label") if name == "label" else None)
        if _normal(stored.get(name)) != _normal(offered):
            return name
    for name in ("created_at", "started_at", "finished_at"):
        mine, theirs = stored.get(name), run.get(name)
        if (mine is None) != (theirs is None) or (mine is not None and abs(float(mine) - float(theirs)) > 1e-3):
            return name
    rows = conn.execute("SELECT idx, steps, duration_s, loss, warmup FROM samples WHERE run_id = ? ORDER BY idx",
                        (run["run_id"],)).fetchall()
    offered = sorted((int(i), int(st), float(d), None if lo is None else float(lo), bool(w))
                     for i, st, d, lo, w in run.get("samples") or [])
    if [(i, st, d, lo, bool(w)) for i, st, d, lo, w in rows] != offered:
        return "samples"
    return None


def _normal(value):
    """A value as JSON would give it back (tuples as lists), so a stored copy and a bundle's compare."""
    return json.loads(json.dumps(value, default=str)) if value is not None else None


def _move(conn, run_id: str, status: str, values: dict | None = None, only_from: Iterable[str] | None = None) -> bool:
    """The one write of a run's status (with other columns), made only if states.MOVES allows it
    from the status the run has now (and that status is in `only_from`, if given). Returns whether
    it was made."""
    values = {"status": status, **(values or {})}
    if "error" in values:  # every end written goes through here: the runner's, the guard's, the reaper's
        values["error"] = validate.clipped_error(values["error"])
    assignments = ", ".join(f"{name} = ?" for name in values)
    olds = [old for old in states.sources(status) if only_from is None or old in only_from]
    cursor = conn.execute(
        f"UPDATE runs SET {assignments} WHERE run_id = ? AND status IN ({','.join('?' * len(olds))})",
        [*values.values(), run_id, *olds],
    )
    return cursor.rowcount > 0


def _reconcile(conn: sqlite3.Connection, skip_pids: frozenset) -> int:
    """Store.reconcile inside a write transaction the caller holds."""
    rows = conn.execute(
        "SELECT run_id, pid, started_at, cancel_requested FROM runs WHERE status = 'running' AND host = ?",
        (this_host(),),
    ).fetchall()
    changed = 0
    for run_id, pid, started_at, cancel_requested in rows:
        if pid in skip_pids or pid_alive(pid, started_at):
            continue
        changed += _move(conn, run_id, "cancelled" if cancel_requested else "interrupted", {
            "finished_at": now(), "phase": None, "error": f"run process (pid {pid}) ended without recording a result",
        })
    # Queued runs with an owner (the `sweep` process that queued them) go when their owner goes:
    # a sweep killed (SIGKILL, a lost SSH session) leaves no point for a later page load to start.
    owned = conn.execute(
        "SELECT run_id, pid, created_at, sweep_id FROM runs WHERE status = 'queued' AND pid IS NOT NULL AND host = ?",
        (this_host(),),
    ).fetchall()
    for run_id, pid, created_at, sweep_id in owned:
        if pid in skip_pids or pid_alive(pid, created_at):
            continue
        what = f"sweep {sweep_id}" if sweep_id else "the process that queued it"
        changed += _move(conn, run_id, "cancelled", {
            "finished_at": now(), "phase": None, "cancel_requested": int(now()),
            "error": f"cancelled with {what}: its process (pid {pid}) ended before this run started",
        }, only_from=("queued",))
    return changed


def _insert(conn, table: str, values: dict, verb: str = "INSERT") -> None:
    names = ", ".join(values)
    marks = ", ".join("?" * len(values))
    conn.execute(f"{verb} INTO {table} ({names}) VALUES ({marks})", list(values.values()))


def _chunks(items: list, size: int = 500) -> Iterator[list]:
    for start in range(0, len(items), size):
        yield items[start:start + size]

