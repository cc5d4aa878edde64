"""The Run page's side of the fleet, without Streamlit: where a run can go ("this machine" or one of
the cluster's places, with how many devices are free now), launching there, following and cancelling.

The dashboard's cluster is $RAY_ADDRESS (any form `--cluster` takes). Without it, or without Ray, the
page shows "this machine" only, exactly as before.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

THIS_MACHINE = ""
# How often the page settles its cluster runs (a lost host, an ended job): each check lists the nodes.
SETTLE_EVERY_S = 3.0
_last_settle: dict[str, float] = {}


@dataclass
class Places:
    address: str | None  # the cluster's address, None without one
    options: list[str] = field(default_factory=lambda: [THIS_MACHINE])  # THIS_MACHINE, then place keys
    labels: dict[str, str] = field(default_factory=lambda: {THIS_MACHINE: "this machine"})
    error: str | None = None  # why the cluster's places are not shown


def cluster_address(env: dict | None = None) -> str | None:
    text = (os.environ if env is None else env).get("RAY_ADDRESS", "").strip()
    return text or None


def places(env: dict | None = None) -> Places:
    """This machine, and each place of the cluster with its free devices now (a live read: ~0.5 s)."""
    address = cluster_address(env)
    found = Places(address)
    if address is None:
        return found
    from dashbench.fleet import inventory
    from dashbench.core.spec import SpecError

    try:
        kinds = inventory.kinds(inventory.hosts(address))
    except SpecError as exc:
        found.error = str(exc)
        return found
    for kind in kinds:
        found.options.append(kind.key)
        found.labels[kind.key] = kind.text()
    return found


def launch(specs: list, db, address: str, place: str, sweep_id: str | None = None) -> list[str]:
    """Each spec launched at `place` on the cluster; the run ids. SpecError (nothing more launched) for
    a request the cluster cannot hold or a store that is not a PostgreSQL team store."""
    from dashbench.fleet.submit import submit

    return [submit(spec, db, address, on=place, sweep_id=sweep_id) for spec in specs]


def password_note(db) -> str | None:
    """What the page says once after a launch when the team store's URL has a password: it is never
    sent with a job (each host reads it from its own ~/.pgpass)."""
    from dashbench.fleet import launch as fleet_launch

    return fleet_launch.password_note(db)


def settle(db, address: str | None) -> int:
    """Record the end of cluster runs whose job ended or whose host is gone, at most every
    SETTLE_EVERY_S per process (the live panel calls it on each refresh). Returns how many changed."""
    if address is None:
        return 0
    key = f"{address}|{db}"
    now = time.monotonic()
    if now - _last_settle.get(key, 0.0) < SETTLE_EVERY_S:
        return 0
    _last_settle[key] = now
    from dashbench.fleet import launch as fleet_launch
    from dashbench.core.spec import SpecError

    try:
        return fleet_launch.reconcile(address, db)
    except SpecError:  # not a team store, or the cluster out of reach: the local queue still shows the runs
        return 0


def cancel(run_id: str, db, address: str | None) -> bool:
    """Cancel a cluster run through Ray (its own cancel, then Ray's forced one); False when the run is
    not a job of this cluster (the local queue cancels it)."""
    if address is None:
        return False
    from dashbench.fleet import launch as fleet_launch
    from dashbench.core.spec import SpecError

    try:
        if fleet_launch.job_state(address, run_id)[0] is None:
            return False
        fleet_launch.cancel(address, db, run_id)
    except SpecError:
        return False
    return True
