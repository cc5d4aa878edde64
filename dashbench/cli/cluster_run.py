"""`run --cluster …` (and preset's): launch one run on a Ray cluster, then wait for it and print its
progress and end exactly as a local run does. Ctrl-C or SIGTERM cancels it on its node."""

from __future__ import annotations

import signal
import sys
import time

from dashbench.cli.terminal import fit, shown, shown_lines, terminal_width

POLL_S = 0.5
NODE_CHECK_S = 3.0  # how often a running run's node is looked up (a lost host)
PENDING_SAY_S = 3.0  # a job still pending after this long waits for devices (a job's start is quicker)
EXIT_CODES = {"done": 0, "not_reached": 0, "failed": 1, "interrupted": 1, "oom": 3, "cancelled": 130}


def run(spec, args, json_out: bool, report_invalid, print_json) -> int:
    """Launch `spec` on the cluster of `args.cluster` (`args.on`: where), wait, report (with the run
    command's report_invalid and print_json, so both say it alike). Exit codes as a local run's: 0 done, 2 refused, 1 failed or interrupted (a lost host), 3 oom, 130 cancelled."""
    from dashbench.cli.cluster_args import address as cluster_address
    from dashbench.core.spec import SpecError
    from dashbench.fleet import launch
    from dashbench.fleet.launcher import pick

    try:
        address = cluster_address(args)
        run_id = pick(address, getattr(args, "on", None)).launch(spec, args.db)
    except SpecError as exc:
        return report_invalid(exc, json_out, spec)
    db = launch.team_store_url(args.db)
    print(
        f"run {run_id} launched on {address} ({_host(db, run_id)}; Ray job {launch.job_id(run_id)})",
        file=sys.stderr,
        flush=True,
    )
    if note := launch.password_note(db):
        print(f"note: {note}", file=sys.stderr, flush=True)
    row = follow(address, db, run_id)
    code = report(row, spec, json_out, print_json)
    # Cancelled by a signal here: 128 + its number, as a local run exits (130 Ctrl-C, 143 SIGTERM).
    return 128 + _signals[-1] if row["status"] == "cancelled" and _signals else code


def follow(address, db: str, run_id: str, out=sys.stderr) -> dict:
    """Print the run's progress (its own lines, from the job's log) until its row ends; a signal
    (Ctrl-C, SIGTERM) cancels it on its node and goes on waiting for its end. Returns the ended row."""
    from dashbench.fleet import launch
    from dashbench.store import PollWait, Store, StoreError, location

    said_pending, next_node_check, pending_since = False, 0.0, None
    # A store that is away (its server restarting) is waited for: the job goes on on its node regardless.
    away = PollWait(
        location(db),
        lambda line: print(shown(line), file=out, flush=True),
        "the run goes on on its node",
        "following the run again",
        POLL_S,
        past=lambda exc, seconds: _lost_sight(db, run_id, exc, seconds),
    )
    cancelled_at = None
    log = _Log(address, run_id, out)
    # The local run's cancel signals, set here as the runner sets them there: a Ctrl-C still cancels a
    # `run --cluster` started where SIGINT was inherited ignored (a background job of a script).
    previous = {sig: signal.signal(sig, _interrupt) for sig in _CANCEL_SIGNALS} if _main_thread() else {}
    try:
        while True:
            try:  # a Ctrl-C while the store is waited for cancels the run as at any other time
                try:
                    status, message = launch.job_state(address, run_id)
                    log.poll()
                    with Store(db) as store:
                        row = store.get_run(run_id)
                    away.back()
                    if row["status"] not in ("queued", "running"):
                        if status in launch.ENDED or status is None or cancelled_at is not None:
                            log.finish()
                            return row
                    pending_since = (pending_since or time.monotonic()) if status == "PENDING" else None
                    if pending_since and time.monotonic() - pending_since > PENDING_SAY_S and not said_pending:
                        said_pending = True
                        print(
                            f"waiting for the cluster: {row['host'].removeprefix(launch.HOST_PREFIX)}'s devices "
                            f"are in use by another run (Ray queues this one)",
                            file=out,
                            flush=True,
                        )
                    now = time.monotonic()
                    if status in launch.ENDED or (status == "RUNNING" and now >= next_node_check):
                        next_node_check = now + NODE_CHECK_S
                        launch.settle(address, db, run_id, status, message)
                    time.sleep(POLL_S)
                except StoreError as exc:
                    away.wait(exc)
            except KeyboardInterrupt:
                if not _signals:  # not through _interrupt: Python's own Ctrl-C
                    _signals.append(signal.SIGINT)
                if cancelled_at is None:
                    cancelled_at = time.monotonic()
                    print("cancelling the run on its node…", file=out, flush=True)
                    launch.cancel(address, db, run_id)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _lost_sight(db: str, run_id: str, exc, seconds: float):
    """The one line of a `run --cluster` that stopped waiting for its store: the run itself goes on."""
    from dashbench.store import OUTAGE_ENV, StoreUnreachable, location

    return StoreUnreachable(
        f"db: stopped following run {run_id}: the store {location(db)} did not answer for "
        f"{seconds:g} s ({OUTAGE_ENV}; {str(exc).removeprefix('db: ')}); the run goes on on its "
        f"node: `python -m dashbench show {run_id} --db …` once the store answers"
    )


def report(row: dict, spec, json_out: bool, print_json) -> int:
    from dashbench.jobs import run_guard

    status = row["status"]
    code = EXIT_CODES.get(status, 1)
    if status in ("done", "not_reached") and row["result"] is not None:
        result = row["result"]
        if json_out:
            print_json(result.to_dict() if hasattr(result, "to_dict") else result)
        else:
            print(fit(shown_lines(result.describe()), terminal_width()))
        return code
    error = row["error"] or status
    print(f"error: run {run_guard.END_WORDS.get(status, status)}: {shown(error)}", file=sys.stderr)
    if json_out:
        print_json(
            {
                "run_id": row["run_id"],
                "model": spec.model,
                "device": spec.device,
                "status": status,
                "error": error,
                "spec": spec.to_dict(),
            }
        )
    return code


class _Log:
    """The job's log, fetched whole from Ray's dashboard and its new whole lines printed. (Ray's
    websocket tail sent nothing until the job's end here, so it is polled.) A long run's log is
    fetched less often as it grows: every POLL_S up to 100 kB, then 0.5 s more per 100 kB."""

    def __init__(self, address, run_id: str, out):
        self.address, self.run_id, self.out = address, run_id, out
        self.text, self.printed, self.next_at = "", 0, 0.0

    def poll(self, force: bool = False) -> None:
        from dashbench.fleet import launch

        now = time.monotonic()
        if not force and now < self.next_at:
            return
        self.text = launch.logs(self.address, self.run_id) or self.text
        self.printed = _print_new(self.text, self.printed, self.out)
        self.next_at = now + POLL_S * (1 + len(self.text) // 100_000)

    def finish(self) -> None:
        self.poll(force=True)


def _print_new(text: str, printed: int, out) -> int:
    """The job log's lines after the first `printed` characters, less Ray's own and the run's JSON."""
    new = text[printed:]
    cut = new.rfind("\n") + 1  # whole lines only
    for line in new[:cut].splitlines():
        if line.startswith("{") or "INFO job_manager.py" in line or line.startswith("Running entrypoint for job"):
            continue
        print(line, file=out, flush=True)
    return printed + cut


def _host(db: str, run_id: str) -> str:
    from dashbench.fleet import launch
    from dashbench.store import Store

    with Store(db) as store:
        return "on " + (store.get_run(run_id)["host"] or "?").removeprefix(launch.HOST_PREFIX)


_signals: list[int] = []  # the signals that cancelled `run --cluster` in this process
_CANCEL_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def _interrupt(signum, frame):
    _signals.append(signum)
    raise KeyboardInterrupt


def _main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()
