"""One stored run per multi-host run (jobs/multihost.py, store/placement.py). The real two-process JAX
run that stores one row is tests/engine/test_jax_backend.py::test_four_devices_and_two_hosts_give_the_one_device_loss;
the one launched through a Ray placement group is tests/fleet/test_fleet_slices.py."""

import json
import threading

from fixtures.store_backends import db_at  # noqa: F401 (a fixture: SQLite and PostgreSQL)
from fixtures.stored_runs import SPEC, result_for

from dashbench.jobs import multihost
from dashbench.results.result import RunResult
from dashbench.store import Store
from dashbench.store.placement import add_to_placement


def test_role_read_from_each_way_a_multi_host_run_is_started():
    assert multihost.role({}) is None
    jax = {"JAX_COORDINATOR_ADDRESS": "10.0.0.1:1234", "JAX_NUM_PROCESSES": "4", "JAX_PROCESS_ID": "3"}
    assert multihost.role(jax) == multihost.Role(3, 4, "jax") and not multihost.role(jax).writes_run
    assert multihost.role({**jax, "JAX_NUM_PROCESSES": "1", "JAX_PROCESS_ID": "0"}) is None  # one host
    tf = {"TF_CONFIG": json.dumps({"cluster": {"worker": ["a:1", "b:1"]}, "task": {"type": "worker", "index": 0}})}
    assert multihost.role(tf) == multihost.Role(0, 2, "tf_config") and multihost.role(tf).writes_run
    assert multihost.role({"TPU_WORKER_HOSTNAMES": "h0,h1", "TPU_WORKER_ID": "1"}) == multihost.Role(1, 2, "tpu")
    assert multihost.role({**jax, "JAX_PROCESS_ID": "x"}) is None  # the engine names the bad field
    assert multihost.agreed_run_id(None, {"DASHBENCH_RUN_ID": "r-1"}) == "r-1"
    assert multihost.agreed_run_id("given", {"DASHBENCH_RUN_ID": "r-1"}) == "given"


def test_a_later_process_whose_coordinator_is_this_machines_ip_leaves_the_device_lock_to_it():
    """Two cluster nodes on one machine name worker 0 by the machine's IP, not localhost: waiting for its
    lock would deadlock the run (its workers must all start before any steps)."""
    import socket

    import psutil

    from dashbench.jobs import device_lock

    ips = [
        a.address
        for addrs in psutil.net_if_addrs().values()
        for a in addrs
        if a.family == socket.AF_INET and not a.address.startswith("127.")
    ]
    for ip in ips[:1]:
        assert device_lock.peer_worker_holds_it({"JAX_COORDINATOR_ADDRESS": f"{ip}:1234", "JAX_PROCESS_ID": "1"})
    assert not device_lock.peer_worker_holds_it({"JAX_COORDINATOR_ADDRESS": "203.0.113.9:1234", "JAX_PROCESS_ID": "1"})


def test_each_process_adds_its_host_once_whatever_the_order():
    later = multihost.merged_placement(
        {"variables": ["/device:CPU:0"]}, {"index": 1, "host": "b", "devices": ["/device:CPU:2048"]}, 2
    )
    assert later["hosts"] == ["", "b"]
    both = multihost.merged_placement(
        later, {"index": 0, "host": "a", "devices": ["/device:CPU:0"], "node_id": "n0"}, 2
    )
    again = multihost.merged_placement(
        both, {"index": 0, "host": "a", "devices": ["/device:CPU:0"], "node_id": "n0"}, 2
    )
    assert both == again and both["hosts"] == ["a", "b"] and both["ray_nodes"] == ["n0", ""]
    assert both["devices:0"] == ["/device:CPU:0"] and both["devices:1"] == ["/device:CPU:2048"]
    RunResult.from_dict(result_for(SPEC, 100.0, placement=both))  # the stored result's rules take it


def test_later_hosts_wait_for_worker_0s_result_and_none_is_lost(db_at):
    """Two later workers add their hosts at once, before worker 0 has written the result: both wait for
    it, and both land (the row lock); a run that ends without a result takes none."""
    with Store(db_at) as store:
        run_id = store.create_run(SPEC)
        failed = store.create_run(SPEC)
        store.finish_run(failed, "failed", error="boom")
    done = []

    def join(index: int) -> None:
        with Store(db_at) as own:
            entry = {"index": index, "host": f"h{index}", "devices": [f"/device:CPU:{index}"]}
            done.append(add_to_placement(own, run_id, lambda p: multihost.merged_placement(p, entry, 3), wait_s=60))

    threads = [threading.Thread(target=join, args=(i,)) for i in (1, 2)]
    for thread in threads:
        thread.start()
    placement = multihost.merged_placement(
        {"variables": [], "ops": []}, {"index": 0, "host": "h0", "devices": ["d0"]}, 3
    )
    with Store(db_at) as store:
        store.finish_run(run_id, "done", result=result_for(SPEC, 100.0, placement=placement))
        for thread in threads:
            thread.join(60)
        assert done == [True, True]
        assert store.get_run(run_id)["result"].placement["hosts"] == ["h0", "h1", "h2"]
        assert add_to_placement(store, failed, lambda p: {"hosts": ["x"]}, wait_s=5) is False
        assert store.get_run(failed)["result"] is None


def test_a_group_launcher_names_the_end_a_worker_only_presumed(db_at):
    """Worker 0 of a multi-host run that saw a peer stop answering ends `interrupted` (presumed), which
    the launcher then corrects (a lost host, a failed worker); an end a worker judged itself stays."""
    from dashbench.store.placement import end_group_run

    assert multihost.peer_lost(
        "JaxRuntimeError: UNKNOWN: Gloo all-reduce failed: [pair.cc:547] Connection closed by peer"
    )
    assert not multihost.peer_lost("ValueError: shapes (16, 4) and (8, 4) do not match")
    with Store(db_at) as store:
        presumed, failed = store.create_run(SPEC), store.create_run(SPEC)
        assert end_group_run(store, presumed, "interrupted", "a peer host stopped answering", only_from=("running",))
        assert not end_group_run(store, presumed, "interrupted", "again", only_from=("running",))
        assert end_group_run(store, presumed, "interrupted", "host lost: tpu-b-1")
        store.finish_run(failed, "failed", error="worker 0's own error")
        assert not end_group_run(store, failed, "interrupted", "host lost: tpu-b-1")
        assert store.get_run(presumed)["error"] == "host lost: tpu-b-1"
        assert store.get_run(failed)["error"] == "worker 0's own error"
