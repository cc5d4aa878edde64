"""The job runner the dashboard calls: each run is its own `python -m dashbench run` process.

The queue lives in the store, not in this process: a run waits as a `queued` row, and `pump()`
starts queued runs whose device is free. A launched run is detached (its own session), so it
finishes and lands even if the app that launched it restarts; the next `pump()` — from any
process — resumes the queue. Claims happen inside one SQLite write transaction, so two
dashboard sessions pumping at once cannot start two runs on one device.
No TensorFlow here.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from dashbench.core.spec import RunSpec, is_user_model
from dashbench.hardware import host
from dashbench.jobs import background, model_check, oom, temp_folder
from dashbench.store import ACTIVE, WITH_RESULT, Store, StoreError, pid_alive, this_host

# A run asked to stop gets SIGTERM; the run process itself ends a run that does not stop within
# run_guard.CANCEL_GRACE_S (stuck in a compile, say) with no help from here. As a backstop, a run still
# alive this long after the cancel (its signal handling broken) gets SIGKILL from the next pump.
CANCEL_GRACE_S = 30.0
# Our own children, so their exit codes are collected (no zombies) and read: (db, run_id) -> Popen.
_children: dict[tuple[str, str], subprocess.Popen] = {}
_children_lock = threading.Lock()
# The run command before `--run-id ID --db DB --json`; a module attribute so tests can put a stand-in
# engine behind it.
RUN_COMMAND = [sys.executable, "-m", "dashbench", "run"]


def _store(db_path) -> Store:
    return Store(db_path)


def device_key(spec: dict) -> str:
    return spec.get("device") or "auto"


def _conflicts(key: str, busy: set[str]) -> bool:
    # "auto" may resolve to any device, so it shares with nothing and nothing shares with it.
    return key in busy or (key == "auto" and bool(busy)) or "auto" in busy


def submit(
    spec: RunSpec,
    db_path=None,
    sweep_id: str | None = None,
    owner_pid: int | None = None,
    check_memory: bool = True,
    checked: bool = False,
) -> str:
    """Queue a run (a `queued` row) and start it now if its device is free. Returns its run id.
    Bad input that needs no TensorFlow (shape overrides, real data's files, a memory estimate past
    what the device has: dashbench.workloads.memory) raises SpecError first.
    `owner_pid`: the process the run belongs to (a `sweep`): if it ends before the run starts, the
    run is cancelled, never started (Store.reconcile). `check_memory` False: the run's own process
    checks (it ends `oom` without starting), as `sweep --find-max-batch` wants each try recorded.
    `checked`: the caller ran catalog.check_spec and memory.check on `spec` in this process (the Run
    page, `sweep`), so neither runs again; a model file's memory is known only once it is checked here."""
    from dashbench.workloads import catalog, memory

    if not checked:
        catalog.check_spec(spec)
    if is_user_model(spec):
        model_check.check(spec, RUN_COMMAND)  # imported and built in a process of its own, never here
    if check_memory and (not checked or is_user_model(spec)):
        memory.check(spec)  # a run that cannot fit in the device's memory is refused, never queued
    with _store(db_path) as store:
        run_id = store.create_run(spec, status="queued", sweep_id=sweep_id, host=this_host(), pid=owner_pid)
    pump(db_path)
    return run_id


def pump(db_path=None) -> list[str]:
    """Start the queued runs whose device is free; tidy up ended processes. Idempotent: call it
    on every dashboard rerun. Returns the ids of the runs it started."""
    with _store(db_path) as store:
        _reap(store)
        db = store.location
        started = []
        # Our own children are judged by _reap from their exit codes, which say more.
        with store.claim_queue(skip_pids=_our_pids()) as claim:
            _escalate_cancels(claim.cancels_asked())
            claim.beat(_alive_children(db))  # runs on this host that other hosts must not presume dead
            busy = {device_key(spec) for spec in claim.running_specs()}
            for run_id, spec in claim.queued():
                key = device_key(spec)
                if _conflicts(key, busy):
                    busy.add(key)  # first come, first served: later runs for this device wait too
                    continue
                log_path = store.log_folder / f"{run_id}.log"
                kills = host.oom_kills()  # the kernel's OOM kills so far, to judge a SIGKILL by
                try:
                    proc = _launch(run_id, db, log_path)
                except OSError as exc:
                    claim.failed_to_start(run_id, f"could not start the run process: {exc}")
                    continue
                proc.oom_kills_at_start = kills
                with _children_lock:
                    _children[(db, run_id)] = proc
                # Marked running with the child's pid before the claim ends: no other pump can
                # claim this device in between, and a dead child is found by reconcile().
                claim.started(run_id, proc.pid, str(log_path))
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
                store.reconcile(skip_pids=_our_pids())
                status = store.get_run(run_id)["status"]
                if status != "running":
                    break
                time.sleep(0.1)
    if status != "running":
        pump(db_path)
    return status


def cancel_all(run_ids: list[str], db_path=None, wait_s: float = 0.0) -> dict[str, str]:
    """Cancel several runs (a sweep's points) without starting any of them: the queued ones are
    cancelled first, in one go, so that stopping a running one never lets the queue start the
    next only to kill it. Returns each run's status."""
    statuses: dict[str, str] = {}
    with _store(db_path) as store:
        running = []
        for run_id in run_ids:
            row = store.get_run(run_id)
            if row is None or row["status"] not in ACTIVE:
                statuses[run_id] = None if row is None else row["status"]
                continue
            if row["status"] == "queued":
                statuses[run_id] = store.request_cancel(run_id)
            else:
                running.append(row)
        for row in running:
            statuses[row["run_id"]] = store.request_cancel(row["run_id"])
            if statuses[row["run_id"]] == "running" and row["host"] == this_host():
                _signal(row, signal.SIGTERM, store)
        deadline = time.monotonic() + wait_s
        while running and time.monotonic() < deadline:
            _reap(store)
            store.reconcile(skip_pids=_our_pids())
            for row in running:
                statuses[row["run_id"]] = store.get_run(row["run_id"])["status"]
            if all(statuses[row["run_id"]] != "running" for row in running):
                break
            time.sleep(0.1)
    pump(db_path)  # the device is free for other runs (none of these: they have all ended)
    return statuses


def progress(run_id: str, db_path=None) -> dict:
    """What the dashboard shows while a run goes: status, phase, fraction of steps done,
    a live throughput from the measured samples so far, queue position, and the samples."""
    with _store(db_path) as store:
        _reap(store)
        row = store.get_run(run_id)
        if row is None:
            raise StoreError(f"run_id: no run {run_id} in {store.path}")
        samples = store.sample_buckets(run_id)  # sums as samples(): the steps done and the live figure stay exact
        spec = row["spec"]
        total = spec["steps"] * int(spec.get("repeats") or 1) + spec["warmup"]
        done_steps = int(samples["steps"].sum()) if len(samples) else 0
        fraction = 1.0 if row["status"] in WITH_RESULT else min(1.0, done_steps / total) if total else 0.0
        measured = samples[~samples["warmup"]]
        live = None
        if len(measured) and measured["duration_s"].sum() > 0:
            live = float(spec["batch_size"] * measured["steps"].sum() / measured["duration_s"].sum())
        position = store.queue_position(run_id) if row["status"] == "queued" else None
        return {
            "run_id": run_id,
            "status": row["status"],
            "phase": row["phase"],
            "backend": spec.get("backend"),
            "fraction": fraction,
            "steps_done": done_steps,
            "steps_total": total,
            "examples_per_sec_live": live,
            "queue_position": position,
            "error": row["error"],
            "result": row["result"],
            "log_path": row["log_path"],
            "samples": samples,
        }


def active(db_path=None) -> list[dict]:
    """Queued and running runs, oldest first (for the dashboard's queue panel)."""
    with _store(db_path) as store:
        frame = store.runs(status=["queued", "running"])
    return frame.sort_values("created_at").to_dict("records")


# -- internals -----------------------------------------------------------------------------------


def _launch(run_id: str, db: str, log_path: Path) -> subprocess.Popen:
    # Only the row's address: the run process reads its spec from the row, the one source of truth.
    # The run makes its temporary folder in ours, named for its pid: _reap removes it if a SIGKILL left
    # it (jobs/temp_folder.py).
    try:
        temp_root = tempfile.gettempdir()
    except OSError:  # no usable temporary folder here: the run goes on without one (so does the run)
        temp_root = None
    env = {"TMPDIR": temp_root} if temp_root else None
    proc = background.start([*RUN_COMMAND, "--run-id", run_id], db, log_path, env)
    proc.temp_root = temp_root
    return proc


def _alive_children(db: str) -> list[str]:
    with _children_lock:
        return [run_id for (key, run_id), proc in _children.items() if key == db and proc.poll() is None]


def _our_pids() -> frozenset:
    with _children_lock:
        return frozenset(proc.pid for proc in _children.values())


def _reap(store: Store) -> None:
    """Collect our children that ended; a child that died before recording its end is recorded
    here, from its exit code (the process is ours, so we know better than reconcile's guess)."""
    db = store.location
    with _children_lock:  # the dashboard's sessions are threads of one process
        ended = [
            (key, proc.returncode, getattr(proc, "oom_kills_at_start", None))
            for key, proc in list(_children.items())
            if key[0] == db and proc.poll() is not None
        ]
        for key, _code, _kills in ended:
            proc = _children.pop(key)
            temp_folder.remove_left_by(proc.pid, getattr(proc, "temp_root", None))
    for (_db, run_id), code, kills in ended:
        row = store.get_run(run_id)
        if row is None or row["status"] not in ACTIVE or store.read_only:
            continue
        store.finish_unreported(run_id, *_verdict(code, row, kills))


def _verdict(code: int, row: dict, oom_kills_at_start: int | None = None) -> tuple[str, str]:
    tail = _log_tail(row.get("log_path"))
    if code < 0:
        name = signal.Signals(-code).name if -code in signal.Signals._value2member_map_ else f"signal {-code}"
        if row["cancel_requested"]:
            return "cancelled", f"cancelled ({name})"
        if oom.killed_by_kernel(-code, oom_kills_at_start, host.oom_kills()):
            return oom.STATUS, f"out of memory: the kernel's OOM killer ended the run process ({name}){tail}"
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


def _escalate_cancels(asked: list[dict]) -> None:
    for run in asked:
        pid = run["pid"]
        if time.time() - run["asked_at"] > CANCEL_GRACE_S and pid_alive(pid, run["started_at"]):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _epoch(text: str | None) -> float | None:
    if text is None:
        return None
    import datetime as _dt

    return _dt.datetime.fromisoformat(text).timestamp()
