"""A host of a 2-host slice lost mid-run (tests/ray_cluster.py's kill_node: every process of the node
SIGKILLed at once): the run ends `interrupted` with "host lost: <name>", the other host's process is
ended, and nothing is retried. Its own slice of two more nodes, so the session's slice stays whole; last of
the Ray group (by its name) since it leaves two dead nodes behind."""

import pytest
import ray_cluster as rc
from test_fleet import _row, _wait
from test_fleet_slices import TINY, _group_processes

from dashbench.fleet import inventory, launch
from dashbench.fleet.submit import submit
from dashbench.spec import RunSpec

pytestmark = [rc.needs_ray(), pytest.mark.xdist_group("ray_multihost")]  # see scripts/test.sh

SLICE = "tpu-lost"
HOSTS = (f"{SLICE}-0", f"{SLICE}-1")


def test_a_slice_host_lost_mid_run_ends_the_run_interrupted_naming_it_and_nothing_retried(ray_cluster, pg_url):
    address = ray_cluster.dashboard_url
    try:
        ray_cluster.start_nodes(rc.slice_nodes(SLICE, HOSTS))
        run_id = submit(RunSpec(**{**TINY, "steps": 50000}), pg_url, address, on=SLICE)
        _wait(lambda: len(_group_processes(run_id)) >= 2 and _row(pg_url, run_id)["status"] == "running",
              seconds=240, what="both hosts' processes, the run going")
        ray_cluster.kill_node(HOSTS[1])
        _wait(lambda: _row(pg_url, run_id)["status"] not in ("queued", "running"), seconds=90,
              what="the lost host's run being recorded")
        ended = _row(pg_url, run_id)
        assert (ended["status"], ended["error"]) == ("interrupted", f"host lost: {HOSTS[1]}")
        _wait(lambda: not _group_processes(run_id), seconds=60, what="the other host's process ending")
        _wait(lambda: launch.job_state(address, run_id)[0] in launch.ENDED, seconds=60, what="the group's job end")
        jobs = [j for j in inventory.jobs_client(address).list_jobs() if run_id in (j.submission_id or "")]
        assert len(jobs) == 1  # never resubmitted
        assert _row(pg_url, run_id)["status"] == "interrupted"
    finally:
        for host in HOSTS:
            ray_cluster.kill_node(host)
