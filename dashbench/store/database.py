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
import os
import secrets
import socket
import sqlite3
import threading
import time
from pathlib import Path
from typing import Iterable, Iterator

import pandas as pd

from dashbench.store import queries, schema
from dashbench.store.schema import FINAL, STATUSES, TERMINAL
from dashbench.result import RunResult
from dashbench.spec import RunSpec

BUSY_TIMEOUT_S = 30.0


class StoreError(RuntimeError):
    """A problem with the database file itself, said in one line."""


class ReadOnlyError(StoreError):
    """A write was attempted on a store opened read-only."""


class SchemaVersionError(StoreError):
    """The file was written by a newer dashbench; it is left exactly as it is."""


class BundleError(StoreError):
    """An export bundle that cannot be imported; the message says which file and what is wrong."""


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

    def __init__(self, path: str | os.PathLike | None = None, read_only: bool = False):
        self.path = Path(path).expanduser() if path is not None else default_db_path()
        self.read_only = read_only
        self._lock = threading.RLock()
        self._conn = self._open()

    # -- opening ---------------------------------------------------------------------------------

    def _open(self) -> sqlite3.Connection:
        if self.read_only:
            if not self.path.exists():
                raise StoreError(f"no database at {self.path} (read-only mode cannot create one)")
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
                version = conn.execute("PRAGMA user_version").fetchone()[0]
            except sqlite3.OperationalError as exc:
                if not (self.read_only and self._wal_index_unavailable(exc)):
                    raise
                # A WAL database in a folder we cannot write (a read-only mount, another user's
                # files): SQLite cannot create its -shm index. With no pending WAL content the
                # main file is the whole database, so it can be read as immutable.
                conn.close()
                conn = self._connect(uri + "&immutable=1")
                version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version > schema.SCHEMA_VERSION:
                raise SchemaVersionError(
                    f"database {self.path} has schema v{version}, newer than this dashbench "
                    f"(v{schema.SCHEMA_VERSION}): upgrade dashbench to open it; the file was not changed"
                )
            conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
            conn.execute("PRAGMA foreign_keys = ON")
            if self.read_only:
                conn.execute("PRAGMA query_only = ON")
                if version == 0:
                    raise StoreError(f"database {self.path} is empty or not a dashbench database")
                if version < schema.SCHEMA_VERSION:
                    raise StoreError(f"database {self.path} has schema v{version}; open it once without "
                                     f"read-only to upgrade it to v{schema.SCHEMA_VERSION}")
            else:
                if version == 0 and self._has_tables(conn):
                    raise StoreError(f"{self.path} is an SQLite file but not a dashbench database")
                conn.execute("PRAGMA journal_mode = WAL")
                # WAL + NORMAL survives a killed process; only a power cut can lose the last commits.
                conn.execute("PRAGMA synchronous = NORMAL")
                if version < schema.SCHEMA_VERSION:
                    schema.migrate(conn, version)
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise StoreError(f"cannot read database {self.path}: {exc}{self._write_hint(exc)}") from None
        except BaseException:
            conn.close()
            raise
        return conn

    def _connect(self, uri: str) -> sqlite3.Connection:
        try:
            return sqlite3.connect(uri, uri=True, isolation_level=None, timeout=BUSY_TIMEOUT_S,
                                   check_same_thread=False)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open database {self.path}: {exc}{self._write_hint(exc)}") from None

    def _write_hint(self, exc: sqlite3.Error) -> str:
        if self.read_only or getattr(exc, "sqlite_errorname", "") not in ("SQLITE_CANTOPEN", "SQLITE_READONLY"):
            return ""
        return " (is the file or its folder read-only?)"

    def _wal_index_unavailable(self, exc: sqlite3.OperationalError) -> bool:
        if getattr(exc, "sqlite_errorname", "") != "SQLITE_CANTOPEN" or not self.path.is_file():
            return False
        wal = self.path.with_name(self.path.name + "-wal")
        try:
            return not wal.exists() or wal.stat().st_size == 0
        except OSError:
            return False

    @staticmethod
    def _has_tables(conn) -> bool:
        return conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] > 0

    @property
    def schema_version(self) -> int:
        with self._lock:
            return self._conn.execute("PRAGMA user_version").fetchone()[0]

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

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
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    def _read(self, sql: str, params: Iterable = ()) -> list[tuple]:
        with self._lock:
            if self._conn is None:
                raise StoreError("the store is closed")
            return self._conn.execute(sql, list(params)).fetchall()

    # -- run lifecycle ---------------------------------------------------------------------------

    def create_run(self, spec: RunSpec | dict, status: str = "running", sweep_id: str | None = None,
                   pid: int | None = None, host: str | None = None, run_id: str | None = None) -> str:
        if status not in ("running", "queued"):
            raise ValueError(f"status: a new run is 'running' or 'queued', not {status!r}")
        spec_d = _spec_dict(spec)
        run_id = run_id or new_run_id()
        created = now()
        if status == "running":
            pid = os.getpid() if pid is None else pid
            host = host or this_host()
        row = {
            "run_id": run_id, "status": status, "spec_json": json.dumps(spec_d), "created_at": created,
            "started_at": created if status == "running" else None, "pid": pid, "host": host,
            "sweep_id": sweep_id, "label": spec_d.get("label"), **schema.flat_values(spec_d, None),
        }
        with self._write("create a run") as conn:
            try:
                insert_run(conn, row)
            except sqlite3.IntegrityError:
                raise StoreError(f"run {run_id} already exists") from None
        return run_id

    def start_run(self, run_id: str, pid: int, host: str | None = None, log_path: str | None = None) -> None:
        """queued → running. Also accepts a row a job launcher already marked running for this process."""
        with self._write("start a run") as conn:
            row = conn.execute("SELECT status FROM runs WHERE run_id = ?", (run_id,)).fetchone()
            if row is None:
                raise StoreError(f"no run {run_id} in {self.path}")
            if row[0] not in ("queued", "running"):
                raise StoreError(f"run {run_id} is {row[0]}; only a queued run can start")
            conn.execute(
                "UPDATE runs SET status = 'running', pid = ?, host = ?, started_at = COALESCE(started_at, ?),"
                " log_path = COALESCE(?, log_path) WHERE run_id = ?",
                (pid, host or this_host(), now(), log_path, run_id),
            )

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
            if row[0] in FINAL:
                return False
            values = {"status": status, "finished_at": now(), "error": error, "phase": None}
            if result is not None:
                conn.execute("UPDATE run_blobs SET result_json = ? WHERE run_id = ?", (json.dumps(result), run_id))
                values.update(schema.flat_values(json.loads(row[1]), result))
            _update(conn, run_id, values)
        return True

    def request_cancel(self, run_id: str) -> str:
        """Mark a run to be cancelled. A queued run ends `cancelled` now; for a running one the
        caller signals the process, and the mark turns a silent death into `cancelled` too.
        Returns the run's status after the call."""
        with self._write("cancel a run") as conn:
            row = conn.execute("SELECT status FROM runs WHERE run_id = ?", (run_id,)).fetchone()
            if row is None:
                raise StoreError(f"no run {run_id} in {self.path}")
            if row[0] == "queued":
                _update(conn, run_id, {"status": "cancelled", "finished_at": now(), "cancel_requested": int(now())})
                return "cancelled"
            if row[0] == "running":
                # The time of asking (not just a flag), so a run that ignores SIGTERM can be killed later.
                conn.execute("UPDATE runs SET cancel_requested = ? WHERE run_id = ?", (int(now()), run_id))
            return row[0]

    def reconcile(self) -> int:
        """Runs marked running on this host whose process is gone become `interrupted` (or
        `cancelled` if a cancel was asked for). Their samples so far stay. Returns how many."""
        with self._write("reconcile runs") as conn:
            return reconcile_locked(conn)

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
        """One run in full; its "result" is a RunResult (None until the run is done)."""
        rows = self._read(
            "SELECT run_id, status, spec_json, result_json, error, created_at, started_at, finished_at, pid, host,"
            " sweep_id, label, phase, cancel_requested, log_path FROM runs JOIN run_blobs USING (run_id)"
            " WHERE run_id = ?",
            (run_id,),
        )
        if not rows:
            return None
        (run_id, status, spec_json, result_json, error, created, started, finished, pid, host, sweep_id, label,
         phase, cancel_requested, log_path) = rows[0]
        return {
            "run_id": run_id, "status": status, "spec": json.loads(spec_json),
            "result": RunResult.from_dict(json.loads(result_json)) if result_json else None, "error": error,
            "created_at": iso(created), "started_at": iso(started), "finished_at": iso(finished),
            "pid": pid, "host": host, "sweep_id": sweep_id, "label": label, "phase": phase,
            "cancel_requested": bool(cancel_requested), "log_path": log_path,
        }

    def resolve_run_id(self, prefix: str) -> str:
        """A full run id from a unique prefix (what a user types after `list`)."""
        rows = self._read("SELECT run_id FROM runs WHERE run_id >= ? AND run_id < ? LIMIT 2",
                          (prefix, prefix + "\U0010ffff"))
        if len(rows) == 1:
            return rows[0][0]
        if not rows:
            raise StoreError(f"run_id: no run {prefix!r} in {self.path}")
        raise StoreError(f"run_id: {prefix!r} matches several runs; give more characters")

    def runs(self, **filters) -> pd.DataFrame:
        """One row per run, newest first, flat columns (see queries.RUN_COLUMNS).

        Filters: model, device, accelerator, precision, batch_size, status, sweep_id, label, host,
        run_ids (each a value or a list of values), since, until (datetime, date, ISO text or epoch
        seconds; on created_at), limit."""
        return queries.runs(self._read, **filters)

    def count_runs(self, **filters) -> int:
        return queries.count_runs(self._read, **filters)

    def samples(self, run_id: str) -> pd.DataFrame:
        return queries.samples(self._read, run_id)

    def distinct(self, column: str) -> list:
        """Distinct values of one filter column, for the dashboard's select boxes."""
        return queries.distinct(self._read, column)

    # -- bundles ---------------------------------------------------------------------------------

    def export_bundle(self, path: str | os.PathLike, **filters) -> int:
        from dashbench.store import bundle

        return bundle.export_bundle(self, path, **filters)

    def import_bundles(self, paths: Iterable[str | os.PathLike]) -> dict:
        from dashbench.store import bundle

        return bundle.import_bundles(self, paths)

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


# -- helpers shared with bundle.py and jobs.py ---------------------------------------------------


def reconcile_locked(conn: sqlite3.Connection, skip_pids: frozenset = frozenset()) -> int:
    """reconcile() inside a write transaction the caller already holds. `skip_pids`: processes the
    caller launched itself and will judge from their exit codes."""
    rows = conn.execute(
        "SELECT run_id, pid, started_at, cancel_requested FROM runs WHERE status = 'running' AND host = ?",
        (this_host(),),
    ).fetchall()
    changed = 0
    for run_id, pid, started_at, cancel_requested in rows:
        if pid in skip_pids or pid_alive(pid, started_at):
            continue
        status = "cancelled" if cancel_requested else "interrupted"
        _update(conn, run_id, {
            "status": status, "finished_at": now(), "phase": None,
            "error": f"run process (pid {pid}) ended without recording a result",
        })
        changed += 1
    return changed


def insert_run(conn, values: dict) -> None:
    """One run row; its spec/result JSON go to run_blobs."""
    values = dict(values)
    blob = (values["run_id"], values.pop("spec_json"), values.pop("result_json", None))
    _insert(conn, "runs", values)
    conn.execute("INSERT INTO run_blobs (run_id, spec_json, result_json) VALUES (?, ?, ?)", blob)


def _insert(conn, table: str, values: dict, verb: str = "INSERT") -> None:
    names = ", ".join(values)
    marks = ", ".join("?" * len(values))
    conn.execute(f"{verb} INTO {table} ({names}) VALUES ({marks})", list(values.values()))


def _update(conn, run_id: str, values: dict) -> None:
    assignments = ", ".join(f"{name} = ?" for name in values)
    conn.execute(f"UPDATE runs SET {assignments} WHERE run_id = ?", [*values.values(), run_id])


def _chunks(items: list, size: int = 500) -> Iterator[list]:
    for start in range(0, len(items), size):
        yield items[start:start + size]

