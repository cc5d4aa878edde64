"""The one way a run goes to the cluster: checked, placed, then started on one host (fleet.launch) or
on several hosts at once (fleet.slices). The CLI and the Run page call `submit`."""

from __future__ import annotations

from dashbench.core.spec import RunSpec
from dashbench.fleet import launch
from dashbench.fleet.address import ClusterAddress, parse


def submit(
    spec: RunSpec,
    db,
    address: ClusterAddress | str,
    on: str | None = None,
    sweep_id: str | None = None,
    checked: bool = False,
) -> str:
    """Store the run and start it on the cluster; returns the run id. FleetError (a SpecError), with
    nothing stored, for a request no live node can hold (naming what the cluster has), a store that is
    not a PostgreSQL server, or a cluster that cannot be reached. `checked`: the caller ran
    catalog.check_spec on `spec` in this process already."""
    from dashbench.workloads import catalog

    address = address if isinstance(address, ClusterAddress) else parse(address)
    if not checked:
        catalog.check_spec(spec)
    url = launch.team_store_url(db)
    placement = launch.plan(address, spec, on)
    if placement.kind.multi_host:
        from dashbench.fleet import slices

        return slices.launch_group(address=address, spec=spec, db=url, placement=placement, sweep_id=sweep_id)
    return launch.submit_one(spec, url, address, placement, sweep_id=sweep_id)
