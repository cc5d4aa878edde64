"""The Run page's side of the fleet, without Streamlit: where a run can go ("this machine" or one of
the cluster's places, with how many devices are free now), and the launcher of each
(dashbench.fleet.launcher): launching there, following and cancelling.

The dashboard's cluster is $RAY_ADDRESS (any form `--cluster` takes). Without it, or without Ray, the
page shows "this machine" only, exactly as before.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

THIS_MACHINE = ""


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
    """This machine, and each place of the cluster with its free devices now (a live read of the cluster)."""
    address = cluster_address(env)
    found = Places(address)
    if address is None:
        return found
    from dashbench.core.spec import SpecError
    from dashbench.fleet import inventory

    try:
        kinds = inventory.kinds(inventory.hosts(address))
    except SpecError as exc:
        found.error = str(exc)
        return found
    for kind in kinds:
        found.options.append(kind.key)
        found.labels[kind.key] = kind.text()
    return found


def launcher(address: str | None, place: str):
    """The launcher of a run launched at `place`: this machine's queue, or the cluster's place."""
    from dashbench.fleet.launcher import pick

    return pick(None if place == THIS_MACHINE else address, place)


def launch(specs: list, db, address: str | None, place: str, sweep_id: str | None = None) -> list[str]:
    """Each spec launched at `place`; the run ids. SpecError (nothing more launched) for bad input, a
    request the cluster cannot hold or, on a cluster, a store that is not a PostgreSQL team store."""
    chosen = launcher(address, place)
    return [chosen.launch(spec, db, sweep_id=sweep_id) for spec in specs]


def tend(db, address: str | None) -> None:
    """On each refresh of the live panel: this machine's queue moves on, and cluster runs whose job
    ended or whose host is gone get their end recorded (at most every few seconds per process)."""
    from dashbench.fleet.launcher import every

    for each in every(address):
        each.tend(db)


def cancel(run_id: str, db, address: str | None) -> None:
    """Cancel a run through the launcher that has it: a cluster's job through Ray (its own cancel, then
    Ray's forced one), any other run through this machine's queue."""
    from dashbench.fleet.launcher import every

    for each in reversed(every(address)):
        if each.cancel(run_id, db):
            return
