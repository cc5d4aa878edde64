"""The job queue's side of the store: reconciling dead runs, the claim a pump holds while it starts queued
runs, and a queued run's place. The Store mixes this part in."""

from __future__ import annotations

import contextlib
import json
from typing import Iterable, Iterator

from dashbench.store.errors import StoreError
from dashbench.store.ids import env_seconds, now, pid_alive, this_host
from dashbench.store.retry import retried
from dashbench.store.runs import _move

# How long a running run on another host may go without a heartbeat (its samples, its phase, its host's
# pump) before any host presumes it dead and gives its claim up as `interrupted`: never started again, so
# never run twice (a run presumed dead that still reports its end is recorded as it ends).
HEARTBEAT_LAPSE_S = 900.0
HEARTBEAT_LAPSE_ENV = "DASHBENCH_HEARTBEAT_LAPSE_S"


def heartbeat_lapse_s() -> float:
    return env_seconds(HEARTBEAT_LAPSE_ENV, HEARTBEAT_LAPSE_S, 0, 7 * 86400, low_open=True)


class QueuePart:
    """The job queue (mixed into Store, which provides _write, _read and path)."""

    @retried
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
        pumping sessions never start two runs on one device. On a server, pumps of one host take
        turns (an advisory lock per host) and a pump skips the rows another host's pump holds."""
        with self._write("start queued runs") as conn:
            self._db.take_queue_turn(conn, this_host())
            _reconcile(conn, frozenset(skip_pids))
            claim = QueueClaim(conn, this_host())
            try:
                yield claim
            finally:
                claim._conn = None  # its reads and writes mean nothing outside the transaction

    def queue_position(self, run_id: str) -> int | None:
        """1 for the next run to start on its device, 2 behind it, ...; None if the run is not queued."""
        device_of = self.dialect.json_text("spec_json", "device")
        rows = self._read(
            f"SELECT status, created_at, {device_of} FROM runs JOIN run_blobs USING (run_id) WHERE run_id = ?",
            (run_id,),
        )
        if not rows or rows[0][0] != "queued":
            return None
        _status, created, device = rows[0]
        # Runs for "auto" may take any device, so they count as ahead on every one.
        ahead = self._read(
            "SELECT count(*) FROM runs JOIN run_blobs USING (run_id) WHERE status IN ('queued', 'running')"
            f" AND created_at <= ? AND run_id != ? AND {device_of} IN (?, 'auto')",
            (created, run_id, device),
        )[0][0]
        return ahead + 1


class QueueClaim:
    """What the job queue reads and writes while it holds the queue (Store.claim_queue): the
    runs of this host, and the claims it makes. Usable only inside that `with` block."""

    def __init__(self, conn, host: str):
        self._conn = conn
        self.host = host

    def _db(self):
        if self._conn is None:
            raise StoreError("the queue claim is over: use it inside `with store.claim_queue()`")
        return self._conn

    def running_specs(self) -> list[dict]:
        """The specs of the runs going on this host."""
        rows = (
            self._db()
            .execute(
                "SELECT spec_json FROM runs JOIN run_blobs USING (run_id) WHERE status = 'running' AND host = ?",
                (self.host,),
            )
            .fetchall()
        )
        return [json.loads(spec_json) for (spec_json,) in rows]

    def queued(self) -> list[tuple[str, dict]]:
        """(run_id, spec) of the runs waiting for this host (or for any host), oldest first."""
        conn = self._db()
        rows = conn.execute(
            "SELECT run_id, spec_json FROM runs JOIN run_blobs USING (run_id)"
            " WHERE status = 'queued' AND (host = ? OR host IS NULL) ORDER BY created_at, run_id"
            + conn.dialect.claim_rows,
            (self.host,),
        ).fetchall()
        return [(run_id, json.loads(spec_json)) for run_id, spec_json in rows]

    def cancels_asked(self) -> list[dict]:
        """Runs going on this host that were asked to cancel: run_id, pid, started_at and asked_at
        (epoch seconds)."""
        rows = (
            self._db()
            .execute(
                "SELECT run_id, pid, started_at, cancel_requested FROM runs"
                " WHERE status = 'running' AND host = ? AND cancel_requested > 1",
                (self.host,),
            )
            .fetchall()
        )
        return [
            {"run_id": run_id, "pid": pid, "started_at": started_at, "asked_at": asked_at}
            for run_id, pid, started_at, asked_at in rows
        ]

    def started(self, run_id: str, pid: int, log_path: str) -> None:
        """queued → running, as the process `pid` that the caller launched for it."""
        if not _move(
            self._db(),
            run_id,
            "running",
            {
                "pid": pid,
                "host": self.host,
                "started_at": now(),
                "heartbeat_at": now(),
                "log_path": log_path,
                "phase": "starting",
            },
            only_from=("queued",),
        ):
            raise StoreError(f"run {run_id} cannot start: it is no longer queued")

    def beat(self, run_ids: Iterable[str]) -> None:
        """Heartbeats for runs of this host whose processes the caller sees alive (its own children)."""
        for run_id in run_ids:
            self._db().execute(
                "UPDATE runs SET heartbeat_at = ? WHERE run_id = ? AND status = 'running' AND host = ?",
                (now(), run_id, self.host),
            )

    def failed_to_start(self, run_id: str, error: str) -> None:
        """queued → failed: its process could not be launched."""
        _move(self._db(), run_id, "failed", {"finished_at": now(), "error": error}, only_from=("queued",))


def _reconcile(conn, skip_pids: frozenset) -> int:
    """Store.reconcile inside a write transaction the caller holds."""
    rows = conn.execute(
        "SELECT run_id, pid, started_at, cancel_requested FROM runs WHERE status = 'running' AND host = ?",
        (this_host(),),
    ).fetchall()
    changed = 0
    for run_id, pid, started_at, cancel_requested in rows:
        if pid in skip_pids or pid_alive(pid, started_at):
            continue
        changed += _move(
            conn,
            run_id,
            "cancelled" if cancel_requested else "interrupted",
            {
                "finished_at": now(),
                "phase": None,
                "error": f"run process (pid {pid}) ended without recording a result",
            },
        )
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
        changed += _move(
            conn,
            run_id,
            "cancelled",
            {
                "finished_at": now(),
                "phase": None,
                "cancel_requested": int(now()),
                "error": f"cancelled with {what}: its process (pid {pid}) ended before this run started",
            },
            only_from=("queued",),
        )
    return changed + _release_lapsed(conn)


def _release_lapsed(conn) -> int:
    """Running runs of other hosts whose heartbeat lapsed become `interrupted`: their host died (or
    lost the database) while holding them. Their samples so far stay."""
    lapse = heartbeat_lapse_s()
    rows = conn.execute(
        "SELECT run_id, host FROM runs WHERE status = 'running' AND host != ?"
        " AND coalesce(heartbeat_at, started_at, created_at) < ?",
        (this_host(), now() - lapse),
    ).fetchall()
    changed = 0
    for run_id, host in rows:
        changed += _move(
            conn,
            run_id,
            "interrupted",
            {
                "finished_at": now(),
                "phase": None,
                "error": f"host {host} gave no heartbeat for {lapse:g} s: its run is presumed dead",
            },
            only_from=("running",),
        )
    return changed
