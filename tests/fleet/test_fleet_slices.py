"""A run over a 2-host TPU slice of the test Ray cluster (tests/fixtures/ray_cluster.py: two CPU nodes declaring a
slice), launched through one placement group (fleet/slices.py) into a PostgreSQL team store."""

import json
import os
import time

import numpy as np
import pytest
from fixtures import group_runs
from fixtures import ray_cluster as rc
from fixtures.fleet_groups import LONG, TINY, _group_processes
from fixtures.xla import FAST_XLA_COMPILE

from dashbench.core.spec import RunSpec
from dashbench.fleet import inventory, launch, slices
from dashbench.fleet.submit import submit
from dashbench.store import Store

pytestmark = [rc.needs_ray(), pytest.mark.xdist_group("ray")]  # see scripts/test.sh

TWO_DEVICES = "--xla_force_host_platform_device_count=2"


def test_a_two_host_jax_run_through_a_placement_group_is_one_run_with_the_one_host_losses(
    ray_cluster, pg_url, monkeypatch
):
    """Each slice host runs one process of two emulated CPU devices (XLA_FLAGS travels to the nodes), joined
    by JAX's multi-host start from the placement (worker 0's node IP and a free port there). Its losses are
    one host's at the same global batch of 16 (4 devices x 4 examples against 1 x 16): the same examples
    and the same mean gradient, summed in another order, so float32 rounding alone differs, ~1e-7 relative
    a step; rtol 1e-4 leaves room for that over 4 steps and still catches a wrong split of the batch (which
    moves the loss in the second digit). One run is stored, naming both hosts and their devices."""
    monkeypatch.setenv("XLA_FLAGS", f"{FAST_XLA_COMPILE} {TWO_DEVICES}")
    run_id = submit(RunSpec(**TINY), pg_url, ray_cluster.dashboard_url, on=rc.SLICE_NAME)
    # The same spec and global batch on one host and one device (no store), measured meanwhile.
    reference = group_runs.one_host_reference(TINY, env={**os.environ, "XLA_FLAGS": FAST_XLA_COMPILE})
    row, runs, out, err = group_runs.group_run_and_reference(ray_cluster.dashboard_url, pg_url, run_id, reference)
    assert row["status"] == "done", (
        row["status"],
        row["error"],
        launch.logs(ray_cluster.dashboard_url, run_id)[-3000:],
    )
    assert runs == [run_id]  # one stored run for the two hosts
    assert reference.returncode == 0, err[-2000:]
    one_host = json.loads(out)
    result = row["result"]
    np.testing.assert_allclose(result.losses, one_host["losses"], rtol=1e-4)
    assert result.replicas == 4 and result.per_replica_batch_size == 4 and result.accelerator_count == 2
    assert result.env["process_count"] == 2 and result.env["multi_worker"] is True
    placement = result.placement
    assert placement["hosts"] == list(rc.TPU_HOSTS)
    assert len(placement["devices:0"]) == len(placement["devices:1"]) == 2
    assert sorted(placement["devices:0"] + placement["devices:1"]) == sorted(result.device_names)
    node_ids = {h.name: h.node_id for h in inventory.hosts(ray_cluster.dashboard_url) if h.alive}
    assert placement["ray_nodes"] == [node_ids[h] for h in rc.TPU_HOSTS]
    assert row["host"] == rc.TPU_HOSTS[0]  # worker 0 wrote it
    assert launch.job_state(ray_cluster.dashboard_url, run_id)[0] == "SUCCEEDED"


def test_each_host_gets_its_multi_host_start_from_the_placement():
    orders = {"run_id": "r1", "backend": "jax", "cluster": "http://h:8265"}
    places = [("10.0.0.5", 4001), ("10.0.0.6", 4002)]
    env = slices.process_env(1, places, orders, "tpu-a-1", "node1")
    assert env["JAX_COORDINATOR_ADDRESS"] == "10.0.0.5:4001" and env["JAX_NUM_PROCESSES"] == "2"
    assert env["JAX_PROCESS_ID"] == "1" and env["DASHBENCH_RUN_ID"] == "r1" and env["DASHBENCH_HOST"] == "tpu-a-1"
    tf = json.loads(slices.process_env(0, places, {**orders, "backend": "tensorflow"}, "a", "n0")["TF_CONFIG"])
    assert tf == {"cluster": {"worker": ["10.0.0.5:4001", "10.0.0.6:4002"]}, "task": {"type": "worker", "index": 0}}


def test_cancel_ends_every_hosts_process_of_a_group_run(ray_cluster, pg_url):
    """launch.cancel on a slice run stops its group's job: every host's process is ended (SIGTERM to its
    process group: a run already measuring records its own cancel), the run ends `cancelled`, and no
    process is left on any node. Cancelled as soon as both hosts' processes exist (still starting
    their framework: the suite's time)."""
    spec = RunSpec(**LONG)
    run_id = submit(spec, pg_url, ray_cluster.dashboard_url, on=rc.SLICE_NAME)
    deadline = time.monotonic() + 240
    while len(_group_processes(run_id)) < 2 and time.monotonic() < deadline:
        time.sleep(0.3)
    assert len(_group_processes(run_id)) >= 2, launch.logs(ray_cluster.dashboard_url, run_id)[-3000:]
    launch.cancel(ray_cluster.dashboard_url, pg_url, run_id)
    deadline = time.monotonic() + 90
    while _group_processes(run_id) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not _group_processes(run_id)
    with Store(pg_url) as store:
        row = store.get_run(run_id)
    assert row["status"] == "cancelled", (row["status"], row["error"])


def test_a_model_file_runs_over_a_slice_carried_by_the_group_job(ray_cluster, pg_url, tmp_path, monkeypatch):
    """The group's Ray job carries the file (its working_dir), which each host's task inherits: each
    host's process reads that copy and checks its hash; the run is stored once, under the file's identity."""
    import shutil
    from pathlib import Path

    from dashbench.workloads import model_file

    monkeypatch.setenv("XLA_FLAGS", FAST_XLA_COMPILE)
    folder = tmp_path / "mine"
    folder.mkdir()
    shutil.copy(Path(__file__).resolve().parents[2] / "examples" / "models" / "mlp.py", folder / "mlp.py")
    reference = model_file.reference(f"{folder / 'mlp.py'}:build_tiny")
    spec = RunSpec(batch_size=8, steps=3, warmup=1, device="cpu", backend="jax", **reference)
    run_id = submit(spec, pg_url, ray_cluster.dashboard_url, on=rc.SLICE_NAME)
    deadline = time.monotonic() + 600
    while launch.job_state(ray_cluster.dashboard_url, run_id)[0] not in launch.ENDED and time.monotonic() < deadline:
        time.sleep(0.5)
    with Store(pg_url) as store:
        row = store.get_run(run_id)
    assert row["status"] == "done", (
        row["status"],
        row["error"],
        launch.logs(ray_cluster.dashboard_url, run_id)[-3000:],
    )
    result = row["result"]
    assert result.model == reference["model"] and result.model_info["sha256"] == reference["model_sha256"]
    assert result.placement["hosts"] == list(rc.TPU_HOSTS) and result.env["process_count"] == 2
    info = inventory.jobs_client(ray_cluster.dashboard_url).get_job_info(launch.job_id(run_id))
    assert info.runtime_env["env_vars"][model_file.ARRIVED_ENV] == "mlp.py"
    assert str(info.runtime_env.get("working_dir", "")).startswith("gcs://")  # the file went with the job
