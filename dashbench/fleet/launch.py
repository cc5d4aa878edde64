"""One run on one host of a Ray cluster: a Ray job running `python -m dashbench run --run-id ID` there,
with the Python of the host's Ray workers (fleet.node_python), not whatever `python` its PATH finds.

Why Ray's Jobs API and not a task or a detached actor: a job belongs to the cluster, not to the
process that submitted it, so a run outlives the dashboard (or `run --cluster`) that launched it, and
any process that knows the address can follow or stop it by its id (`dashbench-<run id>`). The job's
supervisor starts the run as a subprocess in its own session, so a crash never takes a Ray worker down;
`stop_job` sends SIGTERM to the run's whole process tree (the run's own cancel: it records
`cancelled`) and SIGKILL STOP_WAIT_S later (Ray's forced cancel, past the run's own grace of
run_guard.CANCEL_GRACE_S). Ray never retries a job (a benchmark re-run silently is a wrong figure: the
equivalent of max_retries=0). The dashboard holds no Ray driver: a task or detached actor would need
`ray.init` in every dashboard process (a slow connection and a driver's worth of memory). What a run
through the cluster costs over the local queue is measured by bench/fleet_overhead.py (docs/PERFORMANCE.md).

The run's row is written first, `queued` with host `ray:<node name>` (so no local queue on any host
claims it); the job is pinned to the node of the chosen place by its `ray.io/node-id` label and asks
Ray for the place's devices (num_gpus, {"TPU": chips}), so Ray keeps two runs off one GPU or TPU: a
second run for a busy device waits in Ray's queue (PENDING) until the first ends. The node's name and
Ray's node id travel to the run in its environment: its row's host is the node's name, its result's
env carries both (env.fleet). A request no live node can hold is refused at once, naming what the
cluster has. A multi-host place (a TPU slice, N GPU hosts) goes to fleet.slices.launch_group.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
from dataclasses import dataclass
from pathlib import Path

from dashbench.core.errors import one_line
from dashbench.core.spec import RunSpec
from dashbench.fleet import FleetError, inventory, node_python
from dashbench.fleet.address import ClusterAddress
from dashbench.workloads import model_file

JOB_PREFIX = "dashbench-"
HOST_PREFIX = "ray:"  # a queued cluster run's host until its node takes it
# Ray's SIGKILL after its SIGTERM: later than the run's own end of a stuck run (run_guard.CANCEL_GRACE_S).
STOP_WAIT_S = 15
PYTHON_ENV = node_python.PYTHON_ENV  # the Python on the nodes that has dashbench (default: their Ray's)
# Settings of how a run measures, passed on to the node as they are here.
FORWARD_ENV = (
    "DASHBENCH_CPU_PROBE_SIZE",
    "DASHBENCH_CANCEL_GRACE_S",
    "DASHBENCH_MEMORY_LIMIT_GB",
    "DASHBENCH_MEMORY_MIN_FREE",
    "DASHBENCH_MEMORY_GRACE_S",
    "DASHBENCH_LOCK_DIR",
    "XLA_FLAGS",
)
ENDED = ("SUCCEEDED", "FAILED", "STOPPED")


@dataclass
class Placement:
    kind: inventory.Kind
    hosts: list  # inventory.Host of each of the kind's hosts, in the kind's order
    num_gpus: float = 0
    num_cpus: float = 0
    resources: dict | None = None

    def text(self) -> str:
        return self.kind.label


def plan(address: ClusterAddress | str, spec: RunSpec, on: str | None = None) -> Placement:
    """Where the run goes and what it asks Ray for; FleetError at once when no live node can hold it."""
    hosts = inventory.hosts(address)
    kinds = inventory.kinds(hosts)
    by_name = {h.name: h for h in hosts}
    if on:
        kind = inventory.find_kind(kinds, on)
        if kind is None:
            raise FleetError("on", f"no place {on!r} on the cluster; it has: {inventory.summary(kinds)}")
        candidates = [kind]
    elif spec.device == "cpu":
        # A CPU run asks for one CPU on the host with the most free, holding none of its accelerators.
        alive = sorted((h for h in hosts if h.alive), key=lambda h: -h.free.get("CPU", 0.0))
        if not alive:
            raise FleetError("cluster", "the cluster has no live host")
        host = alive[0]
        kind = inventory.Kind(
            f"cpu@{host.name}",
            f"CPU on {host.name}",
            "cpu",
            (host.name,),
            (host.node_id,),
            int(host.cpus),
            int(host.free.get("CPU", 0)),
        )
        return Placement(kind, [host], num_cpus=1)
    else:
        # One host unless the run asks for a TPU (a slice may be the only TPU place); free ones first.
        candidates = [k for k in kinds if _fits_device(spec.device, k) and (spec.device == "tpu" or not k.multi_host)]
        wanted = "gpu" if spec.device == "auto" else spec.device
        candidates.sort(key=lambda k: (k.free < _need(spec, k), k.device != wanted))
    for kind in candidates:
        if not _fits_device(spec.device, kind):
            raise FleetError(
                "device", f"a {spec.device} run cannot go on {kind.label}; the cluster has: {inventory.summary(kinds)}"
            )
        need = _need(spec, kind)
        if need > kind.devices:
            raise FleetError(
                "replicas",
                f"{need} {kind.device.upper()}s asked for, {kind.label} has "
                f"{kind.devices}; the cluster has: {inventory.summary(kinds)}",
            )
        placement = Placement(kind, [by_name[n] for n in kind.hosts])
        if kind.device == "gpu":
            placement.num_gpus = need
        elif kind.device == "tpu":
            placement.resources = {"TPU": float(kind.devices // len(kind.hosts))}
        else:
            placement.num_cpus = 1
        return placement
    raise FleetError(
        "device",
        f"no live node of the cluster has a {spec.device} device for this run; it has: {inventory.summary(kinds)}",
    )


def submit_one(
    spec: RunSpec, url: str, address: ClusterAddress, placement: Placement, sweep_id: str | None = None
) -> str:
    """Store the run (queued on its host) and start its Ray job; returns the run id. fleet.submit
    chooses between this (one host) and fleet.slices.launch_group (several)."""
    from dashbench.store import Store

    host = placement.hosts[0]
    python = node_python.python_on(address, [host])[host.node_id]  # a host without dashbench: nothing stored
    with Store(url) as store:
        run_id = store.create_run(spec, status="queued", sweep_id=sweep_id, host=HOST_PREFIX + host.name)
    try:
        with model_folder(spec) as folder:
            start_job(address, run_id, url, placement, python=python, model_folder=folder)
    except Exception as exc:
        with Store(url) as store:
            store.finish_run(run_id, "failed", error=f"the cluster did not take the run: {one_line(exc, 400)}")
        raise FleetError("cluster", f"the cluster at {address} did not take the run: {one_line(exc, 400)}") from None
    return run_id


@contextlib.contextmanager
def model_folder(spec: RunSpec):
    """A user's model file alone in a folder, for its Ray job to carry to the node (its working_dir;
    the node checks the hash); None for a built-in. Ray uploads it as the job is submitted."""
    if not spec.model_path:
        yield None
        return
    import shutil
    import tempfile

    with tempfile.TemporaryDirectory(prefix="dashbench-model-") as folder:
        shutil.copy2(spec.model_path, Path(folder) / Path(spec.model_path).name)
        yield folder


def start_job(
    address: ClusterAddress,
    run_id: str,
    url: str,
    placement: Placement,
    host=None,
    extra_env: dict | None = None,
    python: str | None = None,
    model_folder: str | None = None,
) -> str:
    """The Ray job of one process of run `run_id` on `host` (default: the placement's only host), run
    by `python` (default: the one of the host's Ray workers, node_python), carrying `model_folder` (a
    user's model file) as its working_dir."""
    host = host or placement.hosts[0]
    env = {name: os.environ[name] for name in FORWARD_ENV if os.environ.get(name)}
    runtime_env: dict = {"env_vars": env}
    if model_folder:
        runtime_env["working_dir"] = model_folder
        env[model_file.ARRIVED_ENV] = next(Path(model_folder).iterdir()).name
    env.update(
        {
            "DASHBENCH_DB": sent_url(url),
            "DASHBENCH_HOST": host.name,
            "DASHBENCH_RAY_NODE_ID": host.node_id,
            "DASHBENCH_RAY_JOB": job_id(run_id),
            "DASHBENCH_RAY_CLUSTER": str(address),
            "RAY_JOB_STOP_WAIT_TIME_S": str(STOP_WAIT_S),
            **(extra_env or {}),
        }
    )
    python = python or node_python.python_on(address, [host])[host.node_id]
    sid = job_id(run_id) if not extra_env else f"{job_id(run_id)}-{host.name}"
    inventory.jobs_client(address).submit_job(
        entrypoint=f"{shlex.quote(python)} -m dashbench run --run-id {run_id} --json",
        submission_id=sid,
        entrypoint_num_gpus=placement.num_gpus or None,
        entrypoint_num_cpus=placement.num_cpus or None,
        entrypoint_resources=placement.resources or None,
        entrypoint_label_selector={"ray.io/node-id": host.node_id},
        runtime_env=runtime_env,
        metadata={"dashbench_run_id": run_id, "host": host.name},
    )
    return sid


def job_id(run_id: str) -> str:
    return JOB_PREFIX + run_id


def sent_url(url: str) -> str:
    """The team store's URL as a job carries it: never with its password, since Ray shows a job's
    runtime_env to anyone who can list its jobs or open its dashboard. On the node, libpq reads the
    password from ~/.pgpass (PGPASSFILE) or PGPASSWORD, as for any PostgreSQL client there."""
    from dashbench.store import without_password

    return without_password(url)


def password_note(url) -> str | None:
    """What a launcher says once when the URL it was given has a password (None without one)."""
    full = str(getattr(url, "url", url) or "")
    if sent_url(full) == full:
        return None
    return (
        "the password is not sent with the job: each host of the cluster reads the team store's password "
        "from its own ~/.pgpass (or PGPASSWORD in its Ray worker's environment)"
    )


def team_store_url(db) -> str:
    """The team store's full URL: a cluster run lands where every host can write, a PostgreSQL server.
    (It reaches the node in the job's environment, never on a command line, and without its password:
    sent_url.)"""
    from dashbench.store import is_server_url

    given = db if db is not None else os.environ.get("DASHBENCH_DB", "")
    full = str(getattr(given, "url", given) or "")
    if not is_server_url(full):
        raise FleetError(
            "db",
            "a cluster run lands in a PostgreSQL team store that every host reaches: "
            "give --db postgresql+psycopg://USER@HOST/DB (or set DASHBENCH_DB to it)",
        )
    return full


def cancel(address: ClusterAddress | str, db, run_id: str) -> str:
    """The run's own cancel (its row asks, and Ray's stop sends SIGTERM to its process tree), then Ray's
    SIGKILL STOP_WAIT_S later. Returns the row's status now."""
    from dashbench.store import Store

    url = team_store_url(db)
    with Store(url) as store:
        status = store.request_cancel(run_id)
    try:
        inventory.jobs_client(address).stop_job(job_id(run_id))
    except Exception:  # a job already ended or never started: the row's end says what happened
        pass
    return status


def job_state(address, run_id: str) -> tuple[str | None, str | None]:
    """(status, message) of the run's Ray job, (None, None) when the cluster has no such job."""
    try:
        info = inventory.jobs_client(address).get_job_info(job_id(run_id))
    except Exception:
        return None, None
    return str(getattr(info.status, "value", info.status)), info.message


def settle(address, db, run_id: str, status: str | None = None, message: str | None = None) -> str | None:
    """A run whose job ended (or whose node died) without the run writing its end gets one: a lost node
    `interrupted` with "host lost: <name>", a failed job `failed` with Ray's message. Returns the row's
    status."""
    from dashbench.store import Store

    url = team_store_url(db)
    with Store(url) as store:
        row = store.get_run(run_id)
        if row is None or row["status"] not in ("queued", "running"):
            return None if row is None else row["status"]
        if status is None:
            status, message = job_state(address, run_id)
        host = (row["host"] or "").removeprefix(HOST_PREFIX)
        lost = _node_lost(address, host) if status in (None, "FAILED", "RUNNING", "PENDING") else False
        if lost:
            store.finish_unreported(run_id, "interrupted", f"host lost: {host}")
        elif status in ENDED:
            if row["cancel_requested"] or status == "STOPPED":
                store.finish_unreported(run_id, "cancelled", f"cancelled (the Ray job {status.lower()})")
            else:
                why = one_line(_failure(address, run_id) or message or "", 400)
                store.finish_unreported(
                    run_id, "failed", f"the Ray job {status.lower()} before the run recorded its end: {why}"
                )
        return store.get_run(run_id)["status"]


def reconcile(address, db) -> int:
    """Settle every active cluster run of the team store whose job ended or whose node is gone (the
    dashboard calls it: runs outlive the process that launched them). Returns how many changed."""
    from dashbench.store import Store

    url = team_store_url(db)
    with Store(url) as store:
        active = store.runs(status=["queued", "running"])
    changed = 0
    for run_id in list(active["run_id"]) if len(active) else []:
        status, message = job_state(address, run_id)
        if status is None:
            continue  # not a cluster run of this cluster
        if status in ENDED or status in ("RUNNING", "PENDING"):
            before = store_status(url, run_id)
            if settle(address, url, run_id, status, message) != before:
                changed += 1
    return changed


def store_status(url: str, run_id: str) -> str | None:
    from dashbench.store import Store

    with Store(url) as store:
        row = store.get_run(run_id)
    return None if row is None else row["status"]


def logs(address, run_id: str) -> str:
    try:
        return inventory.jobs_client(address).get_job_logs(job_id(run_id))
    except Exception:
        return ""


# -- internals -----------------------------------------------------------------------------------


def _fits_device(device: str, kind: inventory.Kind) -> bool:
    # The spec's device is what the run uses; the place is where. A CPU run may hold any place (a CPU
    # baseline on a GPU box, or a GPU declared on a machine without one, as in the tests).
    return device in ("auto", "cpu") or device == kind.device


def _need(spec: RunSpec, kind: inventory.Kind) -> int:
    if kind.device == "gpu":  # as on this machine: no replicas given means all the host's GPUs
        return int(spec.replicas or kind.devices)
    if kind.device == "tpu":
        return kind.devices
    return 1


def _node_lost(address, host: str) -> bool:
    try:
        hosts = inventory.hosts(address)
    except FleetError:
        return False  # the cluster itself is out of reach: nothing to conclude about one host
    alive = {h.name for h in hosts if h.alive}
    return bool(host) and host not in alive


def _failure(address, run_id: str) -> str | None:
    """Why a job's run never recorded its end, from the job's log: the run's own JSON error (a store
    it could not open: on the node, no password in ~/.pgpass), else the log's last line of its own
    (a traceback's exception). Ray's message alone starts with its log cut to 400 characters."""
    text = logs(address, run_id)
    found = result_json(text) or {}
    if isinstance(found.get("error"), str) and found["error"]:
        return found["error"]
    own = [
        line
        for line in text.splitlines()
        if line.strip() and "INFO job_manager.py" not in line and not line.startswith("Running entrypoint for job")
    ]
    return own[-1] if own else None


def result_json(text: str) -> dict | None:
    """The run's one JSON object in its log (its last line that parses as one), if any."""
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                continue
    return None
