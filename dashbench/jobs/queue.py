"""The job runner the dashboard calls: each run is its own `python -m dashbench run` process.

The queue lives in the store, not in this process: a run waits as a `queued` row, and `pump()`
starts queued runs whose device is free. A launched run is detached (its own session), so it
finishes and lands even if the app that launched it restarts; the next `pump()` — from any
process — resumes the queue. Claims happen inside one SQLite write transaction, so two
dashboard sessions pumping at once cannot start two runs on one device.
No TensorFlow here.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from dashbench.spec import RunSpec
from dashbench.store.database import Store, StoreError, _update, now, pid_alive, reconcile_locked, this_host

# A run asked to stop gets SIGTERM; if it has not ended after this long (stuck in a long compiled
# op, say), the next pump sends SIGKILL and it is recorded as cancelled all the same.
CANCEL_GRACE_S = 30.0
# Our own children, so their exit codes are collected (no zombies) and read: (db, run_id) -> Popen.
_children: dict[tuple[str, str], subprocess.Popen] = {}
_children_lock = threading.Lock()
# The run command before its options; a module attribute so tests can put a stand-in engine behind it.
RUN_COMMAND = [sys.executable, "-m", "dashbench", "run"]


def _store(db_path) -> Store:
    return Store(db_path)


def spec_to_argv(spec: RunSpec | dict) -> list[str]:
    """The `run` command's options for a spec (defaults left out, so the command line stays short)."""
    spec = spec if isinstance(spec, RunSpec) else RunSpec.from_dict(dict(spec))
    argv = []
    for name, value in spec.to_dict().items():
        option = "--" + name.replace("_", "-")
        if name == "xla":
            if value:
                argv.append(option)
        elif value is not None:
            argv += [option, str(value)]
    return argv


def device_key(spec: dict) -> str:
    return spec.get("device") or "auto"


def _conflicts(key: str, busy: set[str]) -> bool:
    # "auto" may resolve to any device, so it shares with nothing and nothing shares with it.
    return key in busy or (key == "auto" and bool(busy)) or "auto" in busy


def submit(spec: RunSpec | dict, db_path=None, sweep_id: str | None = None) -> str:
    """Queue a run (a `queued` row) and start it now if its device is free. Returns its run id.
    Bad input that needs no TensorFlow (shape overrides, real data's files) raises SpecError first."""
    from dashbench import catalog

    spec = spec if isinstance(spec, RunSpec) else RunSpec.from_dict(dict(spec))
    catalog.check_spec(spec)
    with _store(db_path) as store:
        run_id = store.create_run(spec, status="queued", sweep_id=sweep_id, host=this_host())
    pump(db_path)
    return run_id


def pump(db_path=None) -> list[str]:
    """Start the queued runs whose device is free; tidy up ended processes. Idempotent: call it
    on every dashboard rerun. Returns the ids of the runs it started."""
    with _store(db_path) as store:
        _reap(store)
        db = str(store.path.resolve())
        started = []
        with store._write("start queued runs") as conn:
            # Our own children are judged by _reap from their exit codes, which say more.
            reconcile_locked(conn, _our_pids())
            _escalate_cancels(conn)
            busy = set()
            for (spec_json,) in conn.execute(
                "SELECT spec_json FROM runs JOIN run_blobs USING (run_id) WHERE status = 'running' AND host = ?",
                (this_host(),),
            ).fetchall():
                busy.add(device_key(json.loads(spec_json)))
            queued = conn.execute(
                "SELECT run_id, spec_json FROM runs JOIN run_blobs USING (run_id)"
                " WHERE status = 'queued' AND (host = ? OR host IS NULL)"
                " ORDER BY created_at, run_id",
                (this_host(),),
            ).fetchall()
            for run_id, spec_json in queued:
                spec = json.loads(spec_json)
                key = device_key(spec)
                if _conflicts(key, busy):
                    busy.add(key)  # first come, first served: later runs for this device wait too
                    continue
                log_path = _log_path(store.path, run_id)
                try:
                    proc = _launch(run_id, db, spec, log_path)
                except OSError as exc:
                    _update(conn, run_id, {"status": "failed", "finished_at": now(),
                                           "error": f"could not start the run process: {exc}"})
                    continue
                with _children_lock:
                    _children[(db, run_id)] = proc
                # Marked running with the child's pid before the lock is released: no other pump
                # can claim this device in between, and a dead child is found by reconcile().
                _update(conn, run_id, {"status": "running", "pid": proc.pid, "host": this_host(),
                                       "started_at": now(), "log_path": str(log_path), "phase": "starting"})
                busy.add(key)
                started.append(run_id)
        return started


def cancel(run_id: str, db_path=None, wait_s: float = 0.0) -> str:
    """Cancel a run. A queued one becomes `cancelled` at once; a running one gets SIGTERM and
    records `cancelled` itself as it stops. With `wait_s`, wait that long for it to end (the
    device is free once it has). Returns the run's status."""
    with _store(db_path) as store:
        status = store.request_cancel(run_id)
        if status == "running":
            row = store.get_run(run_id)
            if row["host"] == this_host():
                _signal(row, signal.SIGTERM, store)
            deadline = time.monotonic() + wait_s
            while time.monotonic() < deadline:
                _reap(store)
                with store._write("reconcile runs") as conn:
                    reconcile_locked(conn, _our_pids())
                status = store.get_run(run_id)["status"]
                if status != "running":
                    break
                time.sleep(0.1)
    if status != "running":
        pump(db_path)
    return status


def progress(run_id: str, db_path=None) -> dict:
    """What the dashboard shows while a run goes: status, phase, fraction of steps done,
    a live throughput from the measured samples so far, queue position, and the samples."""
    with _store(db_path) as store:
        _reap(store)
        row = store.get_run(run_id)
        if row is None:
            raise StoreError(f"run_id: no run {run_id} in {store.path}")
        samples = store.samples(run_id)
        spec = row["spec"]
        total = spec["steps"] + spec["warmup"]
        done_steps = int(samples["steps"].sum()) if len(samples) else 0
        fraction = 1.0 if row["status"] == "done" else min(1.0, done_steps / total) if total else 0.0
        measured = samples[~samples["warmup"]]
        live = None
        if len(measured) and measured["duration_s"].sum() > 0:
            live = float(spec["batch_size"] * measured["steps"].sum() / measured["duration_s"].sum())
        position = None
        if row["status"] == "queued":
            ahead = store._read(
                "SELECT count(*) FROM runs JOIN run_blobs USING (run_id) WHERE status IN ('queued', 'running')"
                " AND created_at <= ? AND run_id != ? AND json_extract(spec_json, '$.device') IN (?, 'auto')",
                (_epoch(row["created_at"]), run_id, spec["device"]),
            )[0][0]
            position = ahead + 1
        return {
            "run_id": run_id, "status": row["status"], "phase": row["phase"], "fraction": fraction,
            "steps_done": done_steps, "steps_total": total, "examples_per_sec_live": live,
            "queue_position": position, "error": row["error"], "result": row["result"],
            "log_path": row["log_path"], "samples": samples,
        }


def active(db_path=None) -> list[dict]:
    """Queued and running runs, oldest first (for the dashboard's queue panel)."""
    with _store(db_path) as store:
        frame = store.runs(status=["queued", "running"])
    return frame.sort_values("created_at").to_dict("records")


# -- internals -----------------------------------------------------------------------------------


def _launch(run_id: str, db: str, spec: dict, log_path: Path) -> subprocess.Popen:
    argv = [*RUN_COMMAND, "--run-id", run_id, "--db", db, *spec_to_argv(spec), "--json"]
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True, close_fds=True)


def _our_pids() -> frozenset:
    with _children_lock:
        return frozenset(proc.pid for proc in _children.values())


def _log_path(db_path: Path, run_id: str) -> Path:
    return db_path.resolve().parent / "logs" / f"{run_id}.log"


def _reap(store: Store) -> None:
    """Collect our children that ended; a child that died before recording its end is recorded
    here, from its exit code (the process is ours, so we know better than reconcile's guess)."""
    db = str(store.path.resolve())
    with _children_lock:  # the dashboard's sessions are threads of one process
        ended = [(key, proc.returncode) for key, proc in list(_children.items())
                 if key[0] == db and proc.poll() is not None]
        for key, _code in ended:
            del _children[key]
    for (_db, run_id), code in ended:
        row = store.get_run(run_id)
        if row is None or row["status"] not in ("running", "queued") or store.read_only:
            continue
        status, error = _verdict(code, row)
        with store._write("record a run's end") as conn:
            conn.execute(
                "UPDATE runs SET status = ?, error = ?, finished_at = ?, phase = NULL"
                " WHERE run_id = ? AND status IN ('running', 'queued')",
                (status, error, now(), run_id),
            )


def _verdict(code: int, row: dict) -> tuple[str, str]:
    tail = _log_tail(row.get("log_path"))
    if code < 0:
        name = signal.Signals(-code).name if -code in signal.Signals._value2member_map_ else f"signal {-code}"
        if row["cancel_requested"]:
            return "cancelled", f"cancelled ({name})"
        if -code in (signal.SIGKILL, signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            return "interrupted", f"run process killed by {name}"
        return "failed", f"run process crashed ({name}){tail}"
    if row["cancel_requested"]:
        return "cancelled", f"cancelled (exit code {code})"
    return "failed", f"run process exited with code {code} before recording a result{tail}"


def _log_tail(log_path: str | None, lines: int = 5) -> str:
    if not log_path:
        return ""
    try:
        text = Path(log_path).read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return (": " + " | ".join(text[-lines:])) if text else ""


def _signal(row: dict, sig: int, store: Store) -> None:
    started = _epoch(row["started_at"])
    if pid_alive(row["pid"], started):
        try:
            os.kill(row["pid"], sig)
        except ProcessLookupError:
            pass


def _escalate_cancels(conn) -> None:
    rows = conn.execute(
        "SELECT run_id, pid, started_at, cancel_requested FROM runs"
        " WHERE status = 'running' AND host = ? AND cancel_requested > 1",
        (this_host(),),
    ).fetchall()
    for _run_id, pid, started_at, asked_at in rows:
        if time.time() - asked_at > CANCEL_GRACE_S and pid_alive(pid, started_at):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _epoch(text: str | None) -> float | None:
    if text is None:
        return None
    import datetime as _dt

    return _dt.datetime.fromisoformat(text).timestamp()
