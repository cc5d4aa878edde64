"""A 2-host run of the test Ray cluster (tests/fixtures/ray_cluster.py: two CPU nodes declaring a slice) rides out an
outage of its team store: the server (its own, tests/fixtures/pg_server.py) crashed mid-run and started again once
the run says it is riding the outage out (its warning line, in the job's logs)."""

import time

import pytest
from fixtures import ray_cluster as rc
from fixtures.xla import FAST_XLA_COMPILE

from dashbench.core.spec import RunSpec
from dashbench.fleet import launch
from dashbench.fleet.submit import submit
from dashbench.store import Store

pytestmark = [rc.needs_ray(), pytest.mark.xdist_group("ray")]  # see scripts/test.sh

# JAX's smallest model, long enough (~200 samples, the outage begins after 20) for the outage to fall while
# it measures; should the run end inside the outage, its end waits in memory like any other write.
SPEC = dict(
    model="conv2d",
    batch_size=16,
    image_size=8,
    width=4,
    steps=2000,
    steps_per_loop=10,
    warmup=10,
    device="cpu",
    backend="jax",
)
NOTICED = "its writes wait in memory"  # the run's warning that its store is away (dashbench/jobs/store_buffer.py)


def test_a_two_host_run_keeps_its_claim_through_a_store_outage(ray_cluster, pg_own_server, monkeypatch):
    monkeypatch.setenv("XLA_FLAGS", f"{FAST_XLA_COMPILE} --xla_force_host_platform_device_count=2")
    with pg_own_server.connect() as conn:
        conn.execute("CREATE DATABASE outage")
    url = pg_own_server.url("outage")
    run_id = submit(RunSpec(**SPEC), url, ray_cluster.dashboard_url, on=rc.SLICE_NAME)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        with pg_own_server.connect("outage") as conn:
            if conn.execute("SELECT count(*) FROM samples").fetchone()[0] >= 20:
                break
        assert launch.job_state(ray_cluster.dashboard_url, run_id)[0] not in launch.ENDED, launch.logs(
            ray_cluster.dashboard_url, run_id
        )[-3000:]
        time.sleep(0.5)
    pg_own_server.crash()
    # A run that noticed the outage cannot end before the store is back (its end waits for its writes).
    while NOTICED not in launch.logs(ray_cluster.dashboard_url, run_id):
        ended = launch.job_state(ray_cluster.dashboard_url, run_id)[0] in launch.ENDED
        assert not ended and time.monotonic() < deadline, launch.logs(ray_cluster.dashboard_url, run_id)[-3000:]
        time.sleep(0.3)
    pg_own_server.restart()
    while launch.job_state(ray_cluster.dashboard_url, run_id)[0] not in launch.ENDED and time.monotonic() < deadline:
        time.sleep(0.5)
    logs = launch.logs(ray_cluster.dashboard_url, run_id)
    with Store(url, read_only=True) as store:
        row = store.get_run(run_id)
        indexes = sorted(store.samples(run_id)["index"])
    assert row["status"] == "done", (row["status"], row["error"], logs[-3000:])
    assert "Traceback" not in logs, logs[-3000:]
    assert indexes == list(range(1 + SPEC["steps"] // SPEC["steps_per_loop"]))
    assert row["result"].store_outage["outages"] == 1
    assert row["result"].placement["hosts"] == list(rc.TPU_HOSTS)  # both hosts' placement, worker 1's added
    assert launch.job_state(ray_cluster.dashboard_url, run_id)[0] == "SUCCEEDED"
