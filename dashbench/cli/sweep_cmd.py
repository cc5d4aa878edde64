"""`sweep`: one run per batch size, in sequence, grouped under one sweep id.

Each point is its own `run` process, queued through dashbench.jobs: an out-of-memory error (`oom`) or
a crash (`failed`) ends that point and the sweep goes on; `--find-max-batch` searches for the largest
batch that fits instead (cli/find_max_batch.py); the device lock keeps the points, and any
run the dashboard started on the same device, from overlapping.
The to-accuracy options (--target-accuracy, --epochs, --seeds, …) apply to every point: each trains to
the target (its seeds one after another in its own run), its evaluations said as they come.
Exit codes: 0 every point done, 1 some point failed (or out of memory, cancelled), 4 every point trained
to its end but some missed the target (not_reached), 2 bad input, 128+N stopped by signal N (130 for
Ctrl-C, 143 for SIGTERM, 129 for SIGHUP), as `run`.
"""

from __future__ import annotations

import os
import signal
import sys
import time

from dashbench.cli import cluster_args, find_max_batch, strict_json
from dashbench.cli.cluster_args import add_cluster_arguments
from dashbench.cli.db_args import add_db_argument, one_field, refuse_if_read_only, reports_store_errors
from dashbench.cli.spec_args import add_spec_arguments, given_fields, spec_from_args
from dashbench.cli.terminal import shown
from dashbench.core.spec import SpecError, parse_batch_sizes
from dashbench.fleet.launcher import every, pick
from dashbench.jobs import device_check
from dashbench.jobs.launchers import LocalQueue
from dashbench.results import accuracy_text
from dashbench.results.accuracy_text import EXIT_NOT_REACHED
from dashbench.results.result import RunResult, phase_text
from dashbench.store import (
    TERMINAL,
    WITH_RESULT,
    PollWait,
    Store,
    StoreBusyError,
    StoreError,
    default_db_path,
    location,
    new_sweep_id,
)
from dashbench.workloads import catalog, memory
from dashbench.workloads.presets import TO_ACCURACY_FIELDS

POLL_S = 0.5


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "sweep",
        help="one run per batch size, in sequence, grouped by a sweep id",
        description="One run per batch size, in sequence, grouped by a sweep id. The to-accuracy options "
        "(--target-accuracy, --max-epochs, --epochs, --steps-per-epoch, --eval-every, --seeds) apply to "
        "every point. Exit codes: 0 every point done, 1 some point failed, 2 bad input, "
        f"{EXIT_NOT_REACHED} every point ended but some missed its target (not_reached), 128+N a signal.",
    )
    add_spec_arguments(p, batch_size=False)
    p.add_argument("--batch-sizes", help="global batch sizes, e.g. 32,64,128 (each measured once)")
    find_max_batch.register_arguments(p)
    add_db_argument(p)
    add_cluster_arguments(p)
    p.add_argument("--json", action="store_true", help="print the points as JSON at the end")
    p.set_defaults(func=cmd_sweep)


class _Stopped(KeyboardInterrupt):
    """A signal ends the sweep as Ctrl-C does; it exits 128 + the signal's number, as `run` does."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def _stop(signum, _frame):
    raise _Stopped(signum)


@reports_store_errors
def cmd_sweep(args) -> int:
    cluster = cluster_args.address(args)  # None: the points run on this machine
    if cluster is not None and args.find_max_batch:
        raise SpecError("find_max_batch", "--find-max-batch searches on this machine; leave out --cluster")
    launcher = pick(cluster, getattr(args, "on", None), owner_pid=os.getpid())
    launcher.check(args.db)
    if args.find_max_batch:
        if args.batch_sizes is not None:
            raise SpecError("batch_sizes", "--find-max-batch chooses the batch sizes itself: leave out --batch-sizes")
        trained = [name for name in TO_ACCURACY_FIELDS if getattr(args, name, None) is not None]
        if trained:  # its tries are a few steps each: whether a batch fits, not how well it trains
            raise SpecError(
                trained[0],
                f"--find-max-batch measures whether a batch fits in a few steps; leave out "
                f"--{trained[0].replace('_', '-')} (train to accuracy at the batch it finds)",
            )
        specs, warnings = [find_max_batch.base_spec(args, spec_from_args, given_fields(args))], []
    elif args.batch_sizes is None:
        raise SpecError("batch_sizes", "give --batch-sizes (e.g. 32,64,128), or --find-max-batch")
    else:
        sizes = parse_batch_sizes(args.batch_sizes)
        specs = [spec_from_args(args, batch_size=size) for size in sizes]
        warnings = []
    find_max_batch.check_expected(args, specs[0])  # every point is of one file: the one asked for, or refused
    for spec in specs:  # every point checked (no TensorFlow) before any row exists
        catalog.check_spec(spec)
        if not args.find_max_batch and launcher.checks_here:  # else each try's (each node's) own process checks
            warnings.append(memory.check(spec))  # refuses a point that cannot fit, before any is queued
    db = args.db or default_db_path()
    try:  # an unusable database is one error line (as `run` says it) before the sweep says anything
        refuse_if_read_only(args, "record the sweep")
        with Store(db) as store:
            store.check_writable("record the sweep")
    except StoreError as exc:
        raise SpecError("db", one_field(" ".join(str(exc).split()))) from None
    # The points share the device: asked once, before any row (on a cluster, each place says what it has).
    problem = device_check.missing(specs[0]) if launcher.checks_here else None
    if problem:
        raise SpecError("device", problem)
    for warning in filter(None, warnings):
        print(f"warning: {shown(warning)}", file=sys.stderr)
    sweep_id = new_sweep_id()
    if args.find_max_batch:
        print(
            f"sweep {sweep_id}: the largest batch of {specs[0].model} that fits on {specs[0].device}", file=sys.stderr
        )
        return find_max_batch.find(args, specs[0], db, sweep_id, _wait)
    print(f"sweep {sweep_id}: {len(specs)} points of {specs[0].model} on {specs[0].device}", file=sys.stderr)
    if note := launcher.note(args.db):
        print(f"note: {note}", file=sys.stderr)
    # The points belong to the sweep: stopped (Ctrl-C, SIGTERM, or SIGHUP from a dropped SSH
    # session), it cancels them; killed outright (SIGKILL), the queue cancels its queued points once
    # it finds this process gone (each point is queued with this process as its owner).
    previous = {sig: signal.signal(sig, _stop) for sig in (signal.SIGTERM, signal.SIGHUP)}
    run_ids: list[str] = []
    try:
        for spec in specs:
            run_ids.append(launcher.launch(spec, db, sweep_id=sweep_id, checked=True))  # checked above
        rows = _wait(run_ids, db, sizes, every(cluster))
    except KeyboardInterrupt as exc:
        for sig in previous:  # a second signal must not cut the cancelling short
            signal.signal(sig, signal.SIG_IGN)
        launcher.cancel_all(run_ids, db)
        _say(f"sweep {sweep_id} cancelled")
        return 128 + int(getattr(exc, "signum", signal.SIGINT))
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if args.json:
        print(strict_json.dumps({"sweep_id": sweep_id, "points": rows}, indent=2))
    else:
        print(sweep_id)
    if all(row["status"] == "done" for row in rows):
        return 0
    return EXIT_NOT_REACHED if all(row["status"] in WITH_RESULT for row in rows) else 1


def _say(line: str) -> None:
    """A line on stderr, which a hung-up terminal may no longer take."""
    try:
        print(line, file=sys.stderr, flush=True)
    except OSError:
        pass


def _wait(run_ids: list[str], db: str, sizes: list[int], launchers=None) -> list[dict]:
    """`launchers`: tended on every poll (this machine's queue moves on; a cluster's points get the end
    of their lost hosts and ended jobs); default: this machine's queue."""
    reported: set[str] = set()
    phases: dict[str, str] = {}  # what each point was last said to be doing
    # Its points' own processes wait an outage out too, and the queued ones stay queued in the store.
    away = PollWait(location(db), lambda line: _say(shown(line)), "the points wait", "the sweep goes on", POLL_S)
    while True:
        try:
            for each in launchers or [LocalQueue()]:
                each.tend(db, run_ids)
            with Store(db) as store:
                runs = {run_id: store.get_run(run_id) for run_id in run_ids}
        except StoreBusyError:  # another process holds the write lock: the points wait, not fail
            time.sleep(POLL_S)
            continue
        except StoreError as exc:  # a store that is away (a server restarting): the points wait, not fail
            away.wait(exc)
            continue
        away.back()
        for number, (run_id, size) in enumerate(zip(run_ids, sizes), start=1):
            run = runs[run_id]
            if run["status"] == "running" and run.get("phase") and phases.get(run_id) != run["phase"]:
                phases[run_id] = run["phase"]  # every phase longer than a poll is said as it starts
                backend = (run.get("spec") or {}).get("backend")
                print(
                    f"[{number}/{len(run_ids)}] batch {size}: {phase_text(run['phase'], backend)}",
                    file=sys.stderr,
                    flush=True,
                )
            if run["status"] in TERMINAL and run_id not in reported:
                reported.add(run_id)
                print(f"[{number}/{len(run_ids)}] batch {size}: {shown(_summary(run))}", file=sys.stderr)
        if len(reported) == len(run_ids):
            return [_point(runs[run_id], size) for run_id, size in zip(run_ids, sizes)]
        time.sleep(POLL_S)


def _summary(run: dict) -> str:
    if run["status"] in WITH_RESULT and run["result"] is not None:
        headline = accuracy_text.headline(run["result"].accuracy)
        to_target = (
            f"; {headline[0]}" + (f", {headline[1]}" if len(headline) > 1 and "time to" in headline[1] else "")
            if headline
            else ""
        )
        return f"{run['status']}, {run['result'].throughput_text()}{to_target} ({run['run_id']})"
    return f"{run['status']}: {run['error']} ({run['run_id']})"


def _point(run: dict, size: int) -> dict:
    result = run["result"] or RunResult()
    return {
        "run_id": run["run_id"],
        "batch_size": size,
        "status": run["status"],
        "error": run["error"],
        "examples_per_sec": result.examples_per_sec,
        "step_time_median_s": result.step_time_median_s,
        "mfu": result.mfu,
        "flags": list(result.flags),
        **{name: memory.memory_columns([result])[name][0] for name in ("peak_memory_bytes", "memory_capacity_bytes")},
        **{
            name: value
            for name, value in accuracy_text.columns_of(result.accuracy).items()
            if result.accuracy is not None
        },
    }
