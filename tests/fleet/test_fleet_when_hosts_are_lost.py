"""A host lost mid-run (tests/fixtures/ray_cluster.py's kill_node: every process of the node SIGKILLed at once),
on one host and on one of a 2-host slice: the run ends `interrupted` with "host lost: <name>", no process
of it is left, and nothing is retried. Each kills a node of the session's cluster; `ray_cluster` starts a
killed node again for any test after it, and this file's name puts these tests last of the Ray group (on
one worker, in collection order), so a run of the suite starts no node twice. (These two ask only for the
nodes they use: the first one's lost slice host is not started again for the second.)"""

import time

import psutil
import pytest
from fixtures import ray_cluster as rc
from fixtures.fleet_groups import LONG as LONG_GROUP
from fixtures.fleet_groups import _group_processes
from fixtures.fleet_runs import LONG, _row, _wait

from dashbench.core.spec import RunSpec
from dashbench.fleet import inventory, launch
from dashbench.fleet.submit import submit

pytestmark = [rc.needs_ray(), pytest.mark.xdist_group("ray")]  # see scripts/test.sh


def test_a_slice_host_lost_mid_run_ends_the_run_interrupted_naming_it_and_nothing_retried(ray_session_cluster, pg_url):
    ray_cluster = rc.restore(ray_session_cluster, rc.TPU_HOSTS)
    address, lost = ray_cluster.dashboard_url, rc.TPU_HOSTS[1]
    run_id = submit(RunSpec(**LONG_GROUP), pg_url, address, on=rc.SLICE_NAME)
    _wait(
        lambda: len(_group_processes(run_id)) >= 2 and _row(pg_url, run_id)["status"] == "running",
        seconds=240,
        what="both hosts' processes, the run going",
    )
    ray_cluster.kill_node(lost)
    _wait(
        lambda: _row(pg_url, run_id)["status"] not in ("queued", "running"),
        seconds=90,
        what="the lost host's run being recorded",
    )
    ended = _row(pg_url, run_id)
    assert (ended["status"], ended["error"]) == ("interrupted", f"host lost: {lost}")
    _wait(lambda: not _group_processes(run_id), seconds=60, what="the other host's process ending")
    _wait(lambda: launch.job_state(address, run_id)[0] in launch.ENDED, seconds=60, what="the group's job end")
    jobs = [j for j in inventory.jobs_client(address).list_jobs() if run_id in (j.submission_id or "")]
    assert len(jobs) == 1  # never resubmitted
    assert _row(pg_url, run_id)["status"] == "interrupted"


def test_a_host_lost_mid_run_leaves_an_interrupted_run_naming_it_and_nothing_retried(ray_session_cluster, pg_url):
    ray_cluster = rc.restore(ray_session_cluster, (rc.GPU_NODE_2,))
    address, lost = ray_cluster.dashboard_url, rc.GPU_NODE_2
    try:
        run_id = submit(RunSpec(**LONG), pg_url, address, on=lost)
        row = _wait(
            lambda: (r := _row(pg_url, run_id))["status"] == "running" and r["pid"] and r, what=f"the run on {lost}"
        )
    finally:
        ray_cluster.kill_node(lost)
    assert not psutil.pid_exists(row["pid"]) or psutil.Process(row["pid"]).status() == psutil.STATUS_ZOMBIE
    _wait(
        lambda: launch.settle(address, pg_url, run_id) not in ("queued", "running"),
        seconds=90,
        what="the lost host's run being recorded",
    )
    ended = _row(pg_url, run_id)
    assert (ended["status"], ended["error"]) == ("interrupted", f"host lost: {lost}")
    time.sleep(2)
    assert launch.job_state(address, run_id)[0] in ("FAILED", "RUNNING")  # never resubmitted
    assert _row(pg_url, run_id)["status"] == "interrupted" and _row(pg_url, run_id)["pid"] == row["pid"]
    assert not [p for p in ray_cluster.pids() if run_id in " ".join(_cmdline(p))]  # no run process anywhere


def _cmdline(pid: int) -> list[str]:
    try:
        return psutil.Process(pid).cmdline()
    except psutil.Error:
        return []
