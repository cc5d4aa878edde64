"""The Ray fleet as a launcher (dashbench.jobs.launchers.Launcher), and the one place that picks the
launcher a run goes through: this machine's queue, or a Ray cluster's node.

Nothing here imports Ray, and fleet.launch (which does, inside the calls that talk to a cluster) is
imported by the Ray launcher's own calls: picking this machine's queue imports nothing of the fleet.
"""

from __future__ import annotations

import time

from dashbench.core.spec import RunSpec, SpecError
from dashbench.fleet.address import ClusterAddress
from dashbench.jobs.launchers import Launcher, LocalQueue

# How often a follower settles its cluster runs (a lost host, an ended job): each check lists the nodes.
SETTLE_EVERY_S = 3.0
# When each (cluster, store) was last settled in this process, for the callers that settle every run of
# the store (the dashboard's live panel, on every refresh of every session).
_last_settle: dict[str, float] = {}


def pick(cluster: ClusterAddress | str | None, on: str | None = None, owner_pid: int | None = None) -> Launcher:
    """The launcher for a run: the Ray cluster at `cluster` (`on`: which of its places; None: the one
    plan() chooses), or this machine's queue when there is no cluster (`owner_pid`: whose runs)."""
    if cluster is None:
        return LocalQueue(owner_pid=owner_pid)
    return RayFleet(cluster, on)


def every(cluster: ClusterAddress | str | None) -> list[Launcher]:
    """The launchers a follower tends and asks to cancel: this machine's queue (always: it reaps this
    process's own run processes), then the cluster's when there is one."""
    return [LocalQueue()] if cluster is None else [LocalQueue(), RayFleet(cluster)]


class RayFleet:
    """Runs as Ray jobs on a cluster's nodes (fleet.submit: one host, or several at once), landing in a
    PostgreSQL team store every host reaches."""

    checks_here = False
    stop_wait_s = 30.0

    def __init__(self, address: ClusterAddress | str, on: str | None = None):
        self.address, self.on = address, on
        self._next_settle = 0.0  # this follower's own runs: when they are next settled

    def check(self, db) -> None:
        from dashbench.fleet import launch

        launch.team_store_url(db)  # a team store every host reaches, or one line saying so

    def launch(self, spec: RunSpec, db, sweep_id: str | None = None, checked: bool = False) -> str:
        from dashbench.fleet.submit import submit

        return submit(spec, db, self.address, on=self.on, sweep_id=sweep_id, checked=checked)

    def cancel(self, run_id: str, db) -> bool:
        from dashbench.fleet import launch

        try:
            if launch.job_state(self.address, run_id)[0] is None:
                return False  # not a job of this cluster
            launch.cancel(self.address, db, run_id)
        except SpecError:
            return False
        return True

    def cancel_all(self, run_ids: list[str], db, wait_s: float | None = None) -> None:
        from dashbench.fleet import launch

        url = launch.team_store_url(db)
        for run_id in run_ids:
            if launch.store_status(url, run_id) in ("queued", "running"):
                launch.cancel(self.address, url, run_id)
        deadline = time.monotonic() + (self.stop_wait_s if wait_s is None else wait_s)
        while time.monotonic() < deadline and any(
            launch.store_status(url, r) in ("queued", "running") for r in run_ids
        ):
            time.sleep(0.5)

    def tend(self, db, run_ids: list[str] | None = None) -> None:
        """Every SETTLE_EVERY_S at most: each followed run whose job ended or whose node is gone gets its
        end recorded (fleet.launch.settle). With no `run_ids`, every active run of the store, and a
        cluster or store out of reach is let be: the local queue still shows the runs."""
        from dashbench.fleet import launch

        now = time.monotonic()
        if run_ids is None:
            key = f"{self.address}|{db}"
            if now - _last_settle.get(key, 0.0) < SETTLE_EVERY_S:
                return
            _last_settle[key] = now
            try:
                launch.reconcile(self.address, db)
            except SpecError:
                pass
            return
        if now < self._next_settle:
            return
        self._next_settle = now + SETTLE_EVERY_S
        url = launch.team_store_url(db)
        for run_id in run_ids:
            if launch.store_status(url, run_id) in ("queued", "running"):
                launch.settle(self.address, url, run_id)

    def note(self, db) -> str | None:
        from dashbench.fleet import launch

        return launch.password_note(launch.team_store_url(db))
