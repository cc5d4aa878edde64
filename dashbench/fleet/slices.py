"""One run over several hosts at once (a TPU pod slice, N GPU hosts): a placement group, one process a host.

`launch_group` stores the run (`queued`, worker 0's host) and submits one Ray job, `dashbench-<run id>`
as for a one-host run (fleet/launch.py: so `launch.cancel`, `job_state` and `settle` work on it
unchanged), whose driver (`main`, `python -m dashbench.fleet.slices`) does the rest on the cluster:
- reserves the hosts in one STRICT_SPREAD placement group, one bundle a host: a slice's through its
  own resources (every host carries the slice's name, worker 0 `TPU-<type>-head`: bundle 0 asks for
  it, so bundle 0 is worker 0); N GPU hosts of one type (inventory's GPU group) through their GPUs
  and `accelerator_type:<type>`, Ray choosing which N (worker i is bundle i's host); other hosts
  pinned by their `ray.io/node-id` label;
- asks bundle 0's host for a free port (and every host for one, for TF_CONFIG), then starts at once,
  in every bundle, a task (max_retries=0) running `dashbench run --run-id ID --json` in a subprocess
  of its own session, with JAX's multi-host start (JAX_COORDINATOR_ADDRESS = worker 0's node IP and
  that port, JAX_NUM_PROCESSES, JAX_PROCESS_ID) or TF_CONFIG, and the run id in DASHBENCH_RUN_ID:
  worker 0 writes the run, the others add their host and devices to its placement (jobs/multihost.py);
- ends the group as one: a worker that fails or a host that is lost ends the run (`failed` naming
  the worker, or `interrupted` with "host lost: <name>") and cancels the other hosts' processes, which
  would otherwise wait on their peers; the job's stop (launch.cancel) cancels every host's process:
  Ray's cancel (SIGTERM to the run's process group: the run's own cancel) and STOP_WAIT_S later Ray's
  forced one. A process whose Ray worker dies gets SIGTERM from the kernel (PR_SET_PDEATHSIG).
Nothing is retried: the driver's tasks have max_retries=0, and Ray never reruns a job.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import time

from dashbench.core.errors import one_line
from dashbench.core.spec import RunSpec
from dashbench.fleet import FleetError, launch, node_python
from dashbench.fleet.address import ClusterAddress, parse
from dashbench.jobs import temp_folder
from dashbench.workloads import model_file

GROUP_ENV = "DASHBENCH_GROUP"  # the driver's orders, as JSON (the store's URL travels in DASHBENCH_DB)
CANCEL_GRACE_S = 15.0  # from Ray's cancel (SIGTERM to the run) to its forced one
LOST_WAIT_S = 30.0  # how long a failed group waits for Ray to say whether a host was lost (Ray takes its heartbeats' timeout to say so)


def launch_group(address: ClusterAddress | str, spec: RunSpec, db: str, placement, sweep_id: str | None = None) -> str:
    """Store run `spec` and start its group's driver job on the cluster; returns the run id.
    `placement`: launch.Placement of a multi-host kind (its hosts in worker order)."""
    from dashbench.store import Store

    address = address if isinstance(address, ClusterAddress) else parse(address)
    hosts = list(placement.hosts)
    head = hosts[0]  # a GPU group's queued row names its freest host; worker 0's host once it starts
    wanted = bundles(placement)  # refuses a GPU count that does not split over the hosts, before storing
    # So is a host without dashbench; the driver runs on the cluster's head (as any job that asks for
    # nothing), with the Python there.
    from dashbench.fleet import inventory

    driver = next((h for h in inventory.hosts(address) if h.head and h.alive), None)
    if driver is None:
        raise FleetError("cluster", f"the cluster at {address} has no live head")
    pythons = node_python.python_on(address, [driver, *(h for h in hosts if h.node_id != driver.node_id)])
    with Store(db) as store:
        run_id = store.create_run(spec, status="queued", sweep_id=sweep_id, host=launch.HOST_PREFIX + head.name)
    orders = {
        "run_id": run_id,
        "backend": spec.backend,
        "cluster": str(address),
        "hosts": [{"name": h.name, "node_id": h.node_id} for h in hosts],
        "bundles": wanted,
    }
    env = {name: os.environ[name] for name in launch.FORWARD_ENV if os.environ.get(name)}
    env.update(
        {
            "DASHBENCH_DB": launch.sent_url(db),
            GROUP_ENV: json.dumps(orders),
            "RAY_JOB_STOP_WAIT_TIME_S": str(int(CANCEL_GRACE_S + launch.STOP_WAIT_S)),
        }
    )
    runtime_env: dict = {"env_vars": env}
    try:
        # A user's model file goes with the job (its working_dir), which every host's task inherits:
        # each host's run reads that copy and checks its hash, as a one-host run does.
        with launch.model_folder(spec) as folder:
            if folder:
                runtime_env["working_dir"] = folder
                env[model_file.ARRIVED_ENV] = os.path.basename(spec.model_path)
            inventory.jobs_client(address).submit_job(
                entrypoint=f"{shlex.quote(pythons[driver.node_id])} -m dashbench.fleet.slices",
                submission_id=launch.job_id(run_id),
                runtime_env=runtime_env,
                metadata={"dashbench_run_id": run_id, "host": head.name, "hosts": ",".join(h.name for h in hosts)},
            )
    except Exception as exc:
        with Store(db) as store:
            store.finish_run(run_id, "failed", error=f"the cluster did not take the run: {one_line(exc, 400)}")
        raise FleetError("cluster", f"the cluster at {address} did not take the run: {one_line(exc, 400)}") from None
    return run_id


def bundles(placement) -> list[dict]:
    """One bundle a host: its devices, plus the slice's own resources (its name on every host, the
    head resource on worker 0's) or, without a slice, the host's node id as a label to pin it; a GPU
    group's (`kind.host_count` hosts of one GPU type) its share of the GPUs and the type."""
    if placement.kind.host_count:
        return _gpu_group_bundles(placement)
    out = []
    for index, host in enumerate(placement.hosts):
        resources = dict(placement.resources or {})
        if placement.num_gpus:
            resources["GPU"] = float(placement.num_gpus)
        label = {}
        if host.slice_name:
            resources[host.slice_name] = 1.0
            if index == 0 and host.slice_head:
                resources[host.slice_head] = 1.0
        else:
            label = {"ray.io/node-id": host.node_id}
        if not resources:
            resources = {"CPU": float(placement.num_cpus or 1)}
        out.append({"resources": resources, "label": label})
    return out


def _gpu_group_bundles(placement) -> list[dict]:
    """N bundles of the run's GPUs split evenly, each on a host of the group's GPU type (Ray's
    `accelerator_type:<type>` resource, a sliver of it as Ray Train asks, or else the type's label):
    STRICT_SPREAD puts them on N different hosts that Ray chooses."""
    count, gpus = placement.kind.host_count, int(placement.num_gpus or placement.kind.devices)
    if gpus % count:
        raise FleetError(
            "replicas",
            f"{gpus} GPUs do not split evenly over {count} hosts ({placement.kind.label}); "
            f"give --replicas a multiple of {count}",
        )
    gpu_type = placement.hosts[0].gpu_type
    resources, label = {"GPU": float(gpus // count)}, {}
    if f"accelerator_type:{gpu_type}" in placement.hosts[0].resources:
        resources[f"accelerator_type:{gpu_type}"] = 0.001
    else:
        label = {"ray.io/accelerator-type": gpu_type}
    return [{"resources": dict(resources), "label": dict(label)} for _ in range(count)]


# -- the driver: runs on the cluster, as the group's Ray job ---------------------------------------


class _Stopped(Exception):
    """The job was stopped (launch.cancel): the whole group is cancelled."""


def main() -> int:
    import ray
    from ray.util import placement_group, placement_group_table, remove_placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    from dashbench.store.placement import end_group_run

    orders = json.loads(os.environ[GROUP_ENV])
    run_id, hosts, wanted = orders["run_id"], orders["hosts"], orders["bundles"]
    writes = driver_writes(os.environ["DASHBENCH_DB"])

    def stop(signum, _frame):
        raise _Stopped(signal.Signals(signum).name)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, stop)
    ray.init(log_to_driver=True)
    group = placement_group(
        [b["resources"] for b in wanted],
        strategy="STRICT_SPREAD",
        bundle_label_selector=[b["label"] for b in wanted] if any(b["label"] for b in wanted) else None,
    )
    refs: list = []
    try:
        _set_phase(writes, run_id, f"waiting for {len(wanted)} hosts together")
        ray.get(group.ready())
        on = lambda i: PlacementGroupSchedulingStrategy(group, placement_group_bundle_index=i)  # noqa: E731
        places = ray.get(
            [
                _free_port.options(num_cpus=0, scheduling_strategy=on(i), max_retries=0).remote()
                for i in range(len(wanted))
            ]
        )
        nodes = placement_group_table(group)["bundles_to_node_id"]
        names = {h["node_id"]: h["name"] for h in hosts}
        bundle_hosts = [names.get(nodes[i], hosts[i]["name"]) for i in range(len(wanted))]
        python = os.environ.get(launch.PYTHON_ENV) or sys.executable
        argv = [python, "-m", "dashbench", "run", "--run-id", run_id, "--json"]
        for index, bundle in enumerate(wanted):
            env = process_env(index, places, orders, bundle_hosts[index], nodes[index])
            # Ray takes GPUs only as num_gpus (it then sets the process's CUDA_VISIBLE_DEVICES to them).
            task = _host_process.options(
                num_cpus=0,
                num_gpus=bundle["resources"].get("GPU", 0),
                max_retries=0,
                scheduling_strategy=on(index),
                resources={k: v for k, v in bundle["resources"].items() if k not in ("CPU", "GPU")},
            )
            refs.append(task.remote(argv, env, CANCEL_GRACE_S))
        return _follow(ray, refs, writes, run_id, bundle_hosts, nodes)
    except _Stopped:
        _cancel(ray, refs)
        writes.wait_for(end_group_run, run_id, "cancelled", "cancelled (the group's Ray job was stopped)")
        return 130
    finally:
        remove_placement_group(group)
        writes.store.close()


def driver_writes(url: str):
    """The driver's store, every write of it made through an outage as a run's own process makes its row
    (jobs/store_buffer.py: tried with backoff, up to the run's limit), so the group's end is not lost to
    a server restarting as the group ends."""
    from dashbench.jobs import run_guard, store_buffer
    from dashbench.store import Store

    writes = store_buffer.RunWrites(Store(url), run_guard.beat_every_s())
    writes.before = "as the group's driver wrote to it"
    return writes


def process_env(index: int, places: list, orders: dict, host: str, node_id: str) -> dict:
    """Process `index`'s environment: the run's id, its host, and the multi-host start of its backend."""
    count = len(places)
    env = {
        "DASHBENCH_RUN_ID": orders["run_id"],
        "DASHBENCH_HOST": host,
        "DASHBENCH_RAY_NODE_ID": node_id,
        "DASHBENCH_RAY_JOB": launch.job_id(orders["run_id"]),
        "DASHBENCH_RAY_CLUSTER": orders["cluster"],
    }
    if orders["backend"] == "jax":
        ip, port = places[0]
        env.update(
            {"JAX_COORDINATOR_ADDRESS": f"{ip}:{port}", "JAX_NUM_PROCESSES": str(count), "JAX_PROCESS_ID": str(index)}
        )
    else:
        workers = [f"{ip}:{port}" for ip, port in places]
        env["TF_CONFIG"] = json.dumps({"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}})
    return env


def _follow(ray, refs: list, writes, run_id: str, bundle_hosts: list, nodes: list) -> int:
    """Wait for every host's process; the first to fail or be lost ends the run and the group."""
    from dashbench.store.placement import end_group_run

    pending = list(refs)
    while pending:
        ready, pending = ray.wait(pending, num_returns=1)
        index = refs.index(ready[0])
        try:
            code = ray.get(ready[0])
            failure = None if code == 0 else f"worker {index} on {bundle_hosts[index]} ended with exit code {code}"
        except Exception as exc:  # the task's worker or node died
            failure = f"worker {index} on {bundle_hosts[index]}: {one_line(exc, 400)}"
        if failure is None:
            continue
        # A host lost makes its peers fail too, often before Ray declares the node dead: ask a while.
        lost = (
            bundle_hosts[index]
            if _died_with_its_node(ray, ready[0])
            else _lost_host(ray, refs, nodes, bundle_hosts, pending)
        )
        # Before the others are cancelled: their own ends would say less.
        end = ("interrupted", f"host lost: {lost}") if lost else ("failed", failure)
        writes.wait_for(end_group_run, run_id, *end)
        _cancel(ray, pending)
        return 1
    return _end_unrecorded(writes, run_id)


def _end_unrecorded(writes, run_id: str) -> int:
    """Every host's process ended well: the run's end is theirs, or, if none wrote it, the driver's `failed`."""
    from dashbench.store import Store
    from dashbench.store.placement import end_group_run

    row = writes.wait_for(Store.get_run, run_id)
    if row is not None and row["status"] in ("queued", "running", "interrupted"):
        writes.wait_for(end_group_run, run_id, "failed", "every host's process ended without recording the run's end")
        return 1
    return 0


def _lost_host(ray, refs: list, nodes: list, bundle_hosts: list, pending: list) -> str | None:
    """The group's host that Ray has found dead (a task of it failed with NodeDiedError, or the node is
    marked dead), waiting up to LOST_WAIT_S for its verdict, unless every other process has already
    ended by itself (then no host was lost)."""
    deadline = time.monotonic() + LOST_WAIT_S
    while True:
        dead = {n["NodeID"] for n in ray.nodes() if not n.get("Alive")}
        done, _ = ray.wait(pending, num_returns=len(pending), timeout=0) if pending else ([], [])
        for ref in done:
            if _died_with_its_node(ray, ref):
                return bundle_hosts[refs.index(ref)]
        for node, host in zip(nodes, bundle_hosts):
            if node in dead:
                return host
        if len(done) == len(pending):
            return None  # every other process ended by itself
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.5)


def _died_with_its_node(ray, ref) -> bool:
    try:
        ray.get(ref)
        return False
    except ray.exceptions.NodeDiedError:
        return True
    except Exception as exc:  # Ray wraps it in some paths: its message says so
        return "node it was running on is dead" in str(exc)


def _cancel(ray, refs: list) -> None:
    """Ray's cancel (the run's own: SIGTERM), then its forced cancel past the grace."""
    for ref in refs:
        ray.cancel(ref, force=False)
    _, running = ray.wait(refs, num_returns=len(refs), timeout=CANCEL_GRACE_S) if refs else ([], [])
    for ref in running:
        ray.cancel(ref, force=True)


def _set_phase(writes, run_id: str, phase: str) -> None:
    from dashbench.store import Store

    writes.wait_for(Store.set_phase, run_id, phase)


# -- what runs on each host ----------------------------------------------------------------------


def _remote(function):
    import ray

    return ray.remote(function)


def _free_port_here() -> tuple[str, int]:
    import socket

    import ray

    with socket.socket() as s:
        s.bind(("", 0))
        return ray.util.get_node_ip_address(), s.getsockname()[1]


def _run_here(argv: list, env: dict, grace_s: float) -> int:
    """One host's process of the run, in its own session; Ray's cancel (KeyboardInterrupt here) ends
    its process group, SIGTERM first; the kernel sends SIGTERM if this worker dies."""
    # The run makes its temporary folder in the one given here, named for its pid: removed below if a
    # SIGKILL (ours, after the grace) left it (jobs/temp_folder.py).
    temp_root = tempfile.gettempdir()
    proc = subprocess.Popen(
        argv, env={**os.environ, **env, "TMPDIR": temp_root}, start_new_session=True, preexec_fn=_die_with_parent
    )
    try:
        while True:
            try:
                return proc.wait(timeout=0.5)
            except subprocess.TimeoutExpired:
                continue
    except BaseException:
        _end_group(proc, grace_s)
        raise
    finally:
        if proc.poll() is not None:
            temp_folder.remove_left_by(proc.pid, temp_root)


def _die_with_parent() -> None:
    import ctypes

    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _end_group(proc: subprocess.Popen, grace_s: float) -> None:
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


class _Lazy:
    """A Ray remote function made on first use, so importing this module needs no Ray."""

    def __init__(self, function):
        self.function, self.made = function, None

    def options(self, **kwargs):
        if self.made is None:
            self.made = _remote(self.function)
        return self.made.options(**kwargs)


_free_port = _Lazy(_free_port_here)
_host_process = _Lazy(_run_here)


if __name__ == "__main__":
    # The module's own main, not __main__'s: Ray then ships the host functions by reference.
    from dashbench.fleet.slices import main as _main

    sys.exit(_main())
