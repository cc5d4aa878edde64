"""N GPU hosts of one type as one place (fleet/inventory.py's GPU groups, fleet/slices.py's launch): what
the places are and the TF_CONFIG each host gets, without Ray; then a 2-host TensorFlow run over the test
cluster's two "H200" hosts (tests/fixtures/ray_cluster.py: gpu-1 and gpu-2) into a PostgreSQL team store."""

import json

import numpy as np
import pytest
from fixtures import group_runs
from fixtures import ray_cluster as rc

from dashbench.core.spec import RunSpec
from dashbench.fleet import FleetError, inventory, launch, slices
from dashbench.fleet.submit import submit
from dashbench.jobs import device_lock, multihost


def _host(name, gpus, gpu_type, free, alive=True):
    return inventory.Host(
        name=name,
        node_id=f"node-{name}",
        alive=alive,
        head=False,
        cpus=8.0,
        gpus=gpus,
        gpu_type=gpu_type,
        tpu_chips=0,
        tpu_type=None,
        slice_name=None,
        tpu_worker_id=None,
        slice_head=None,
        free={"CPU": 8.0, "GPU": float(free)},
        resources={"CPU": 8.0, "GPU": float(gpus), f"accelerator_type:{gpu_type}": 1.0},
    )


FLEET = [
    _host("g-a", 8, "H200", 8),
    _host("g-b", 8, "H200", 0),
    _host("g-c", 8, "H200", 8),
    _host("g-d", 4, "A100", 4),
    _host("g-gone", 8, "H200", 8, alive=False),
]


def test_hosts_of_one_gpu_type_are_places_with_what_is_free_and_too_many_are_refused_naming_what_there_is():
    kinds = {k.key: k for k in inventory.kinds(FLEET)}
    two, three = kinds["gpu:H200@2-hosts"], kinds["gpu:H200@3-hosts"]
    assert two.text() == "H200 × 8 on each of 2 hosts (16 of 16 free)"  # g-a and g-c are free
    assert three.text() == "H200 × 8 on each of 3 hosts (16 of 24 free)"  # g-b is busy; g-gone is dead
    assert two.multi_host and two.host_count == 2 and set(two.hosts) == {"g-a", "g-b", "g-c"}
    assert not any(k.startswith("gpu:A100@") and k.endswith("-hosts") for k in kinds)  # one A100 host: no group
    assert inventory.find_kind(list(kinds.values()), "gpu:H200@2-hosts") is two
    for wanted, says in (
        ("gpu:H200@4-hosts", "4 H200 hosts asked for; the cluster has 3 live H200 host(s)"),
        ("gpu:A100@2-hosts", "2 A100 hosts asked for; the cluster has 1 live A100 host(s)"),
        ("gpu:H200@1-hosts", "a group of hosts is 2 or more"),
    ):
        with pytest.raises(FleetError) as refused:
            inventory.find_kind(list(kinds.values()), wanted)
        assert refused.value.field == "on" and says in str(refused.value)
        assert "H200 × 8 on each of 3 hosts (16 of 24 free)" in str(refused.value)  # what the cluster has
    # Past 8 hosts the list keeps the powers of two and all of them; any other count is still taken.
    many = [_host(f"h{i:02d}", 1, "H100", 1) for i in range(12)]
    listed = [k.host_count for k in inventory.kinds(many) if k.host_count]
    assert listed == [2, 3, 4, 5, 6, 7, 8, 12]
    eleven = inventory.find_kind(inventory.kinds(many), "gpu:H100@11-hosts")
    assert (eleven.host_count, eleven.devices, eleven.free, eleven.label) == (
        11,
        11,
        11,
        "H100 × 1 on each of 11 hosts",
    )


def test_a_gpu_group_is_one_bundle_a_host_and_each_host_gets_its_tf_config_from_the_placement():
    kind = inventory.find_kind(inventory.kinds(FLEET), "gpu:H200@2-hosts")
    placement = launch.Placement(kind, [h for h in FLEET if h.name in kind.hosts], num_gpus=4)
    bundles = slices.bundles(placement)  # STRICT_SPREAD: Ray puts them on two different H200 hosts
    assert bundles == [{"resources": {"GPU": 2.0, "accelerator_type:H200": 0.001}, "label": {}}] * 2
    with pytest.raises(FleetError) as uneven:
        slices.bundles(launch.Placement(kind, placement.hosts, num_gpus=3))
    assert uneven.value.field == "replicas" and "multiple of 2" in str(uneven.value)
    # The driver asks each bundle's host for a free port; worker i is bundle i's host.
    places = [("10.0.0.7", 41001), ("10.0.0.9", 41002)]
    orders = {"run_id": "r7", "backend": "tensorflow", "cluster": "http://head:8265"}
    envs = [slices.process_env(i, places, orders, name, f"node-{name}") for i, name in enumerate(("g-c", "g-a"))]
    for index, env in enumerate(envs):
        config = json.loads(env["TF_CONFIG"])
        assert config == {
            "cluster": {"worker": ["10.0.0.7:41001", "10.0.0.9:41002"]},
            "task": {"type": "worker", "index": index},
        }
        assert "JAX_COORDINATOR_ADDRESS" not in env and env["DASHBENCH_RUN_ID"] == "r7"
        assert multihost.role(env) == multihost.Role(index, 2, "tf_config")  # worker 0 writes the run
        assert not device_lock.peer_worker_holds_it(env)  # other hosts: each takes its own device lock
    assert [e["DASHBENCH_HOST"] for e in envs] == ["g-c", "g-a"]


@rc.needs_ray()
@pytest.mark.xdist_group("ray")  # see scripts/test.sh
def test_a_two_host_tensorflow_run_on_two_gpu_hosts_is_one_run_with_the_one_host_losses(ray_cluster, pg_url):
    """Each H200 host runs one TensorFlow process (CPU devices: the GPU is Ray's resource only), joined
    by MultiWorkerMirroredStrategy through TF_CONFIG from the placement group. Its losses are one host's
    at the same global batch of 16 (2 workers x 8 against 1 x 16): the same examples and mean gradient,
    summed in another order, so float32 rounding alone differs; rtol 1e-4 catches a wrong split of the
    batch. (conv2d: a model with batch norm or dropout, as fashion_mnist_cnn, differs by design, each
    replica normalising its own 8 examples.) One run is stored, naming both hosts, each with its device."""
    address = ray_cluster.dashboard_url
    tiny = dict(
        model="conv2d", batch_size=16, image_size=8, width=4, steps=3, warmup=1, device="cpu", backend="tensorflow"
    )
    with pytest.raises(FleetError) as refused:  # at once: nothing stored, nothing queued in Ray
        launch.plan(address, RunSpec(**tiny), on=f"gpu:{rc.GPU_TYPE}@3-hosts")
    assert f"3 {rc.GPU_TYPE} hosts asked for; the cluster has 2 live" in str(refused.value)
    run_id = submit(RunSpec(**tiny), pg_url, address, on=f"gpu:{rc.GPU_TYPE}@2-hosts")
    reference = group_runs.one_host_reference(tiny)
    row, runs, out, err = group_runs.group_run_and_reference(address, pg_url, run_id, reference)
    assert row["status"] == "done", (row["status"], row["error"], launch.logs(address, run_id)[-3000:])
    assert runs == [run_id]  # one stored run for the two hosts
    assert reference.returncode == 0, err[-2000:]
    result = row["result"]
    np.testing.assert_allclose(result.losses, json.loads(out)["losses"], rtol=1e-4)
    assert result.replicas == 2 and result.per_replica_batch_size == 8 and result.accelerator_count == 2
    assert result.env["multi_worker"] is True and result.env["process_count"] == 2
    placement = result.placement
    assert sorted(placement["hosts"]) == [rc.GPU_NODE, rc.GPU_NODE_2] and row["host"] == placement["hosts"][0]
    assert placement["devices:0"] == placement["devices:1"] == ["CPU"]
    node_ids = {h.name: h.node_id for h in inventory.hosts(address) if h.alive}
    assert placement["ray_nodes"] == [node_ids[h] for h in placement["hosts"]]
    assert launch.job_state(address, run_id)[0] == "SUCCEEDED"
