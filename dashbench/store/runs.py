"""A run's life in the store: created, started, its phase and heartbeat, ended, cancelled, deleted; read
back whole (get_run) or by a typed id. The Store mixes this part in; the functions below the class write
on a connection inside a write transaction the Store holds (the queue and the bundles use them too)."""

from __future__ import annotations

import json
import os
import threading
from typing import Iterable, Iterator

from dashbench.core.spec import RunSpec, check_id, check_texts
from dashbench.results.result import RunResult
from dashbench.store import schema, states, validate
from dashbench.store.errors import StoreError
from dashbench.store.ids import iso, new_run_id, now, this_host
from dashbench.store.retry import retried
from dashbench.store.states import TERMINAL


class RunsPart:
    """The Store's run lifecycle (mixed into Store, which provides _write, _read and path)."""

    @retried
    def create_run(
        self,
        spec: RunSpec,
        status: str = "running",
        sweep_id: str | None = None,
        pid: int | None = None,
        host: str | None = None,
        run_id: str | None = None,
    ) -> str:
        if not states.allowed(None, status):
            raise ValueError(f"status: a new run is 'running' or 'queued', not {status!r}")
        spec_d = spec.to_dict()
        # Every way a run comes in checks ids and text as import does, so an exported run always imports (the
        # rest of the spec was checked where it was made).
        check_texts(spec)
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
        run = {
            "run_id": run_id,
            "status": status,
            "spec": spec_d,
            "created_at": created,
            "started_at": created if status == "running" else None,
            "pid": pid,
            "host": host,
            "sweep_id": sweep_id,
        }
        # On a server one statement, one round trip (a run's two rows, the change counter's bump).
        try:
            self._write_now("create a run", _run_inserts(run))
        except self.dialect.integrity_error:
            raise StoreError(f"run {run_id} already exists") from None
        self._specs.put(run_id, spec_d)
        return run_id

    @retried
    def start_run(self, run_id: str, pid: int, host: str | None = None, log_path: str | None = None) -> None:
        """queued → running. Also accepts a row a job launcher already marked running for this process."""
        values = {"pid": pid, "host": host or this_host(), "started_at": now(), "heartbeat_at": now()}
        if log_path is not None:
            values["log_path"] = log_path
        # Guarded, not read first: on a server one statement, one round trip; why it was refused is
        # read only then.
        if self._write_now(
            "start a run", [_move_sql(run_id, "running", values, keep_stored=("started_at",))], guarded=True
        ):
            return
        rows = self._read("SELECT status FROM runs WHERE run_id = ?", (run_id,))
        if not rows:
            raise StoreError(f"no run {run_id} in {self.path}")
        raise StoreError(f"run {run_id} is {rows[0][0]}; only a queued run can start")

    @retried
    def set_phase(self, run_id: str, phase: str | None) -> None:
        self._write_now(
            "set a run's phase",
            [("UPDATE runs SET phase = ?, heartbeat_at = ? WHERE run_id = ?", [phase, now(), run_id])],
        )

    @retried
    def heartbeat(self, run_id: str) -> None:
        """Say that this running run is alive: a run on another host whose heartbeat lapsed
        (queue.HEARTBEAT_LAPSE_S) is presumed dead by the next pump or reconcile anywhere."""
        self._write_now(
            "record a run's heartbeat",
            [("UPDATE runs SET heartbeat_at = ? WHERE run_id = ? AND status = 'running'", [now(), run_id])],
        )

    @retried
    def finish_run(
        self,
        run_id: str,
        status: str,
        result: dict | None = None,
        error: str | None = None,
        samples: list[dict] | None = None,
        finished_at: float | None = None,
    ) -> bool:
        """Record the end. Returns False when the run had already ended (done/failed/cancelled).
        `samples`: the run's last ones (add_samples' events), stored in the same transaction, and stored
        even when the run had already ended, as add_samples would have. `finished_at`: when it ended, if
        not now (an end that waited out an outage of the store)."""
        if status not in TERMINAL:
            raise ValueError(f"status: a run ends as one of {', '.join(TERMINAL)}, not {status!r}")
        also = []
        if samples:
            insert = self._samples_insert(self._sample_rows(run_id, samples))  # SamplesPart's
            if insert is None:
                self.add_samples(run_id, samples)
            else:
                also = [insert]
        values = {"finished_at": finished_at or now(), "error": error, "phase": None}
        if result is not None:
            # A spec never changes once stored: this handle's own runs' are known, others' read first.
            spec = self._specs.get(run_id)
            if spec is None:
                rows = self._read("SELECT spec_json FROM run_blobs WHERE run_id = ?", (run_id,))
                if not rows:
                    raise StoreError(f"no run {run_id} in {self.path}")
                spec = json.loads(rows[0][0])
            values.update(schema.flat_values(spec, result))
        # The move guards the result's write (made only with it), nothing read: on a server one
        # statement, one round trip.
        statements = [_move_sql(run_id, status, values)]
        if result is not None:
            statements.append(("UPDATE run_blobs SET result_json = ? WHERE run_id = ?", [json.dumps(result), run_id]))
        try:
            moved = self._write_now("finish a run", statements, guarded=True, also=also)
        except self.dialect.integrity_error:
            if not also:
                raise
            # An index stored already (the batch sent again), or no such run: add_samples sorts out
            # both (it replaces the rows, or says the run is missing); then the end alone.
            self.add_samples(run_id, samples)
            return self.finish_run(run_id, status, result, error, finished_at=finished_at)
        if moved:
            self._specs.pop(run_id)
            return True
        if not self._read("SELECT 1 FROM runs WHERE run_id = ?", (run_id,)):
            raise StoreError(f"no run {run_id} in {self.path}")
        return False

    @retried
    def finish_unreported(self, run_id: str, status: str, error: str) -> bool:
        """Record the end of a run that died before recording its own, as the process that launched
        it judged from the exit code. Returns False (and changes nothing) once the run has an end."""
        if status not in TERMINAL:
            raise ValueError(f"status: a run ends as one of {', '.join(TERMINAL)}, not {status!r}")
        with self._write("record a run's end") as conn:
            # Not over "interrupted" either: another process already judged this death.
            return _move(
                conn, run_id, status, {"error": error, "finished_at": now(), "phase": None}, only_from=states.ACTIVE
            )

    @retried
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

    @retried
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
            rows = self._read(
                f"SELECT run_id FROM runs WHERE {self.dialect.ends_with('run_id')} LIMIT 2", (len(text) - 1, text[1:])
            )
        else:
            rows = self._read(
                "SELECT run_id FROM runs WHERE run_id >= ? AND run_id < ? LIMIT 2", (text, text + "\U0010ffff")
            )
            if not rows and text:
                rows = self._read(
                    f"SELECT run_id FROM runs WHERE {self.dialect.ends_with('run_id')} LIMIT 2", (len(text), text)
                )
        if len(rows) == 1:
            return rows[0][0]
        if not rows:
            raise StoreError(f"run_id: no run {given!r} in {self.path}")
        raise StoreError(f"run_id: {given!r} matches several runs; give more characters")


# -- a run as a dict (get_run, export_rows, import_rows) ------------------------------------------

# The fields of a run as stored and exported, and their SQL columns (runs JOIN run_blobs).
RUN_FIELDS = (
    "run_id",
    "status",
    "spec",
    "result",
    "error",
    "created_at",
    "started_at",
    "finished_at",
    "pid",
    "host",
    "sweep_id",
    "label",
)
# What only a run going here has: its phase, whether a cancel was asked, its process's log.
LIVE_FIELDS = ("phase", "cancel_requested", "log_path")
_JSON_COLUMNS = {"spec": "spec_json", "result": "result_json"}
_RUN_SELECT = (
    f"SELECT {', '.join(_JSON_COLUMNS.get(f, f) for f in RUN_FIELDS + LIVE_FIELDS)}"
    " FROM runs JOIN run_blobs USING (run_id)"
)


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
    _insert_runs(conn, [run])


def _insert_runs(conn, runs: list[dict]) -> None:
    """Runs as _insert_run takes them, each table's rows in one executemany (pipelined on a server)."""
    by_columns: dict[tuple, list] = {}
    blobs = []
    for run in runs:
        values, blob = _run_rows(run)
        by_columns.setdefault(tuple(values), []).append(tuple(values.values()))
        blobs.append(blob)
    for columns, rows in by_columns.items():
        conn.insert_many("runs", columns, rows)
    conn.insert_many("run_blobs", _BLOB_COLUMNS, blobs)


_BLOB_COLUMNS = ("run_id", "spec_json", "result_json")


def _run_rows(run: dict) -> tuple[dict, tuple]:
    """A run as _insert_run takes it: its row of runs (column: value) and of run_blobs (_BLOB_COLUMNS)."""
    spec, result = run["spec"], run.get("result")
    values = {name: run.get(name) for name in RUN_FIELDS if name not in _JSON_COLUMNS}
    values["label"] = run.get("label", spec.get("label"))
    values.update(schema.flat_values(spec, result))
    return values, (run["run_id"], json.dumps(spec), None if result is None else json.dumps(result))


def _run_inserts(run: dict) -> list[tuple[str, list]]:
    """_insert_run's two INSERTs as (sql, params), for Store._write_now."""
    values, blob = _run_rows(run)
    return [
        (f"INSERT INTO runs ({', '.join(values)}) VALUES ({', '.join('?' * len(values))})", list(values.values())),
        (f"INSERT INTO run_blobs ({', '.join(_BLOB_COLUMNS)}) VALUES (?, ?, ?)", list(blob)),
    ]


def _move(conn, run_id: str, status: str, values: dict | None = None, only_from: Iterable[str] | None = None) -> bool:
    """The one write of a run's status (with other columns), made only if states.MOVES allows it
    from the status the run has now (and that status is in `only_from`, if given). Returns whether
    it was made."""
    return conn.execute(*_move_sql(run_id, status, values, only_from)).rowcount > 0


def _move_sql(
    run_id: str,
    status: str,
    values: dict | None = None,
    only_from: Iterable[str] | None = None,
    keep_stored: tuple[str, ...] = (),
) -> tuple[str, list]:
    """_move's UPDATE as (sql, params), ending in its WHERE clause (Store._write_now's guard).
    `keep_stored`: columns of `values` written only where the row has none yet."""
    values = {"status": status, **(values or {})}
    if "error" in values:  # every end written goes through here: the runner's, the guard's, the reaper's
        values["error"] = validate.clipped_error(values["error"])
    assignments = ", ".join(
        f"{name} = COALESCE({name}, ?)" if name in keep_stored else f"{name} = ?" for name in values
    )
    olds = [old for old in states.sources(status) if only_from is None or old in only_from]
    return (
        f"UPDATE runs SET {assignments} WHERE run_id = ? AND status IN ({','.join('?' * len(olds))})",
        [*values.values(), run_id, *olds],
    )


class SpecMemo:
    """The stored specs (as JSON gives them back) of the runs a Store handle created, until they end:
    finishing one reads nothing first. Bounded: a handle that queues many runs keeps the newest."""

    KEEP = 256

    def __init__(self):
        self._specs: dict[str, dict] = {}
        self._lock = threading.Lock()

    def put(self, run_id: str, spec: dict) -> None:
        spec = json.loads(json.dumps(spec))
        with self._lock:
            self._specs[run_id] = spec
            while len(self._specs) > self.KEEP:
                self._specs.pop(next(iter(self._specs)))

    def get(self, run_id: str) -> dict | None:
        return self._specs.get(run_id)

    def pop(self, run_id: str) -> None:
        self._specs.pop(run_id, None)


def _insert(conn, table: str, values: dict, replace_on: tuple[str, ...] = ()) -> None:
    """One row; `replace_on`: the key whose stored row this one replaces (an upsert), if any."""
    if replace_on:
        sql = conn.dialect.upsert(table, tuple(values), replace_on)
    else:
        sql = f"INSERT INTO {table} ({', '.join(values)}) VALUES ({', '.join('?' * len(values))})"
    conn.execute(sql, list(values.values()))


def _chunks(items: list, size: int = 500) -> Iterator[list]:
    for start in range(0, len(items), size):
        yield items[start : start + size]
