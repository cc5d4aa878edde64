"""The fleet: runs launched on the accelerator hosts of a Ray cluster.

Ray is optional: it is imported only here, lazily, inside the functions that talk to a cluster, so a
machine without it imports dashbench and runs locally exactly as before. `address` reads where the
cluster is, `inventory` what its hosts hold, `launch` starts, follows and cancels a run on one host
(`slices` a run over several hosts at once), and `launcher` is the fleet behind the launch interface
that this machine's queue shares (dashbench.jobs.launchers).
"""

from __future__ import annotations

from dashbench.core.spec import SpecError

RAY_MISSING = "the fleet needs Ray: bash scripts/install.sh requirements-cluster.txt"


class FleetError(SpecError):
    """A cluster that cannot be used for this request: one line naming the field (cluster, device…)."""


def require_ray():
    """The `ray` module, or FleetError('cluster', RAY_MISSING) where it is not installed."""
    try:
        import ray
    except ImportError:
        raise FleetError("cluster", RAY_MISSING) from None
    return ray
