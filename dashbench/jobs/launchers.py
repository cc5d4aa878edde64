"""Where a launched run goes: one interface, two implementations.

A launcher stores the run as a row first and then starts a process for it somewhere; the row is the
run's one record, so whoever launched it can stop following it and the run still lands. This machine's
queue (LocalQueue, below, over jobs/queue.py) starts `python -m dashbench run` here, one run per device
at a time; the Ray fleet (dashbench.fleet.launcher.RayFleet) starts it as a Ray job on a cluster's node.
Which one a run takes is decided in one place, dashbench.fleet.launcher.pick: the fleet may import
this package, never the other way round, so that a machine without Ray never imports it.
"""

from __future__ import annotations

from typing import Protocol

from dashbench.core.spec import RunSpec
from dashbench.jobs import queue


class Launcher(Protocol):
    """What the CLI's sweep, `run --cluster` and the Run page ask of wherever their runs go."""

    # Whether the run's device is this machine's: its memory estimate and its device are then checked
    # here, before any row; elsewhere each place (each node's run process) checks its own.
    checks_here: bool
    # How long a caller that stops its runs on its way out (a sweep cancelled) waits for their ends.
    stop_wait_s: float

    def check(self, db) -> None:
        """Refuse (SpecError naming the field) what this launcher can never take, before any row."""

    def launch(self, spec: RunSpec, db, sweep_id: str | None = None, checked: bool = False) -> str:
        """Store the run and start it; returns its run id. SpecError, nothing stored, for bad input.
        `checked`: the caller ran the spec's checks in this process (catalog.check_spec, and memory.check
        where checks_here), so they are not run again."""

    def cancel(self, run_id: str, db) -> bool:
        """Ask the run to stop (it records `cancelled` itself); False when it is not this launcher's."""

    def cancel_all(self, run_ids: list[str], db, wait_s: float | None = None) -> None:
        """Stop a group of runs (a sweep's points), queued ones first so none starts only to be stopped;
        wait up to `wait_s` (default stop_wait_s) for the running ones' ends."""

    def tend(self, db, run_ids: list[str] | None = None) -> None:
        """Called on every poll of a caller that follows runs: move the queue on, and record the end of
        runs that ended without writing one (`run_ids`: those the caller follows; None: every run)."""

    def note(self, db) -> str | None:
        """A line to say once after launching, or None."""


class LocalQueue:
    """This machine's queue: each run its own `python -m dashbench run` process, started by the next
    pump whose device is free (jobs/queue.py)."""

    checks_here = True
    stop_wait_s = 10.0

    def __init__(self, owner_pid: int | None = None):
        # The process the runs belong to (a sweep): if it ends before a run starts, the run is cancelled.
        self.owner_pid = owner_pid

    def check(self, db) -> None:
        return None

    def launch(self, spec: RunSpec, db, sweep_id: str | None = None, checked: bool = False) -> str:
        return queue.submit(spec, db, sweep_id=sweep_id, owner_pid=self.owner_pid, checked=checked)

    def cancel(self, run_id: str, db) -> bool:
        queue.cancel(run_id, db)
        return True  # any row: a run of another launcher that has no other way left ends here

    def cancel_all(self, run_ids: list[str], db, wait_s: float | None = None) -> None:
        queue.cancel_all(run_ids, db, wait_s=self.stop_wait_s if wait_s is None else wait_s)

    def tend(self, db, run_ids: list[str] | None = None) -> None:
        queue.pump(db)

    def note(self, db) -> str | None:
        return None
