"""A real Ray cluster for the tests: `ray_cluster`, one per pytest process (under `pytest -n 2 --dist
loadgroup` every Ray test is in xdist group "ray", so one worker starts one cluster).

Four `ray start` nodes on this machine, each standing for a kind of accelerator host by the resources
it declares (no GPU or TPU is here; only the hardware is faked):
- "gpu-1", the head: 1 GPU with `accelerator_type:H200`, the Jobs API (Ray's dashboard) on a free port;
- "gpu-2": a second H200 host, so two GPU hosts of one type make a multi-host place;
- "tpu-a-0" and "tpu-a-1": the two hosts of one TPU slice (`TPU_TYPE`), 4 chips each, both with the
  slice's name as a resource and worker 0 with `TPU-<type>-head`; TPU_ACCELERATOR_TYPE, TPU_NAME and
  TPU_WORKER_ID are set so Ray's TPU detection never asks a metadata server (there is none here).
A run placed on the fake GPU must not try a real one: tests give those runs `--device cpu` (the spec
says the device; the cluster only says where).

Every port is a free one (two xdist workers run two clusters), object stores are capped at 80 MB a
node, each node's temp dir and HOME lie under pytest's tmp (Ray writes ~/.ray), and every process a
node starts carries a marker in its environment: teardown (and `RayTestCluster.kill_node`, a host
lost) ends exactly those processes, by pid — Ray leaves its dashboard and runtime-env agents behind
when a raylet dies, and `ray stop` would end other people's clusters on this machine.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pytest

GPU_NODE = "gpu-1"
GPU_NODE_2 = "gpu-2"
GPU_TYPE = "H200"
TPU_TYPE = "v4-16"  # two hosts of four chips: the smallest real multi-host slice
SLICE_NAME = "tpu-a"
TPU_HOSTS = ("tpu-a-0", "tpu-a-1")
TPU_CHIPS_PER_HOST = 4
HEAD_RESOURCE = f"TPU-{TPU_TYPE}-head"
OBJECT_STORE_BYTES = 80 * 1024 * 1024
MARKER = "DASHBENCH_TEST_RAY_CLUSTER"
NODE_MARKER = "DASHBENCH_TEST_RAY_NODE"
VENV_BIN = str(Path(sys.executable).parent)


def ray_missing() -> str | None:
    """Why the Ray tests cannot run here, or None."""
    try:
        import ray  # noqa: F401
    except ImportError:
        return "Ray is not installed (bash scripts/install.sh requirements-cluster.txt)"
    if shutil.which("ray", path=VENV_BIN) is None:
        return f"Ray's `ray` command is not in {VENV_BIN}"
    return None


def needs_ray():
    """Mark: skip the test, saying why, where Ray is not installed."""
    reason = ray_missing()
    return pytest.mark.skipif(reason is not None, reason=reason or "")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class RayTestCluster:
    folder: Path
    marker: str
    gcs_address: str = ""  # 127.0.0.1:PORT
    dashboard_url: str = ""  # http://127.0.0.1:PORT, the Jobs API
    client_url: str = ""  # ray://127.0.0.1:PORT
    nodes: list[str] = field(default_factory=list)
    stopped: bool = False

    def env(self, node: str, extra: dict | None = None) -> dict:
        home = self.folder / "home"
        home.mkdir(exist_ok=True)
        return {**os.environ, "HOME": str(home), "PATH": f"{VENV_BIN}:{os.environ.get('PATH', '')}",
                "RAY_USAGE_STATS_ENABLED": "0", MARKER: self.marker, NODE_MARKER: f"{self.marker}:{node}",
                **(extra or {})}

    def start_node(self, name: str, *, head: bool = False, num_gpus: int = 0, resources: dict | None = None,
                   env: dict | None = None, num_cpus: int = 1) -> None:
        """`ray start` one node (blocking until it is up, ~7-10 s here)."""
        temp = self.folder / "ray"  # one temp dir per cluster: Ray wants a node's to match its head's
        argv = [f"{VENV_BIN}/ray", "start", "--node-name", name, "--num-cpus", str(num_cpus),
                "--num-gpus", str(num_gpus), "--resources", json.dumps(resources or {}),
                "--object-store-memory", str(OBJECT_STORE_BYTES), "--temp-dir", str(temp),
                "--disable-usage-stats", "--node-manager-port", str(_free_port()),
                "--object-manager-port", str(_free_port()), "--metrics-export-port", str(_free_port()),
                "--dashboard-agent-listen-port", str(_free_port()),
                "--dashboard-agent-grpc-port", str(_free_port()), "--runtime-env-agent-port", str(_free_port())]
        if head:
            port, dash, client = _free_port(), _free_port(), _free_port()
            argv += ["--head", "--port", str(port), "--include-dashboard", "true", "--dashboard-host", "127.0.0.1",
                     "--dashboard-port", str(dash), "--ray-client-server-port", str(client)]
            self.gcs_address = f"127.0.0.1:{port}"
            self.dashboard_url = f"http://127.0.0.1:{dash}"
            self.client_url = f"ray://127.0.0.1:{client}"
        else:
            argv += ["--address", self.gcs_address]
        for attempt in range(2):
            out = subprocess.run(argv, env=self.env(name, env), capture_output=True, text=True, timeout=120)
            # Under heavy load a raylet may miss `ray start`'s fixed 30 s wait to register: wait for it a
            # while, then end what that try left (by pid) and start the node once more.
            timed_out = "timed out during startup" in out.stdout + out.stderr
            if out.returncode == 0 or (timed_out and self._alive(name, seconds=30)):
                break
            if not timed_out or attempt:
                raise RuntimeError(f"ray start {name} failed: {out.stdout[-1500:]} {out.stderr[-1500:]}")
            _kill(self.pids(name))
        self.nodes.append(name)

    def start_nodes(self, nodes: list[tuple[str, dict]]) -> None:
        """`start_node` each (name, arguments), one after the other: on 2 busy cores joins at once were
        no faster (a join is mostly its agents' Python start, CPU-bound) and missed Ray's 30 s more often."""
        for name, kwargs in nodes:
            self.start_node(name, **kwargs)

    def _alive(self, name: str, seconds: float) -> bool:
        from ray.util.state import list_nodes

        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                if any(n.node_name == name and n.state == "ALIVE" for n in list_nodes(address=self.dashboard_url)):
                    return True
            except Exception:
                pass
            time.sleep(1)
        return False

    def pids(self, node: str | None = None) -> list[int]:
        """Our processes: every one whose environment carries this cluster's (or one node's) marker."""
        import psutil

        found = []
        for proc in psutil.process_iter():
            try:
                env = proc.environ()
                # Ray's process titles can overwrite part of an agent's environment (one was seen with only
                # the node's marker left): either marker counts, and so does every child of a process found.
                ours = env.get(NODE_MARKER, "")
                if (ours == f"{self.marker}:{node}") if node else \
                        (env.get(MARKER) == self.marker or ours.startswith(f"{self.marker}:")):
                    found.append(proc)
            except (psutil.Error, OSError):
                continue
        pids = {proc.pid for proc in found}
        for proc in found:
            try:
                pids.update(child.pid for child in proc.children(recursive=True))
            except psutil.Error:
                continue
        return sorted(pids)

    def kill_node(self, node: str) -> None:
        """A host lost: every process of the node SIGKILLed at once (raylet, agents, workers, runs)."""
        _kill(self.pids(node))
        if node in self.nodes:
            self.nodes.remove(node)

    def wait_nodes(self, count: int, seconds: float = 60) -> None:
        from ray.util.state import list_nodes

        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                alive = [n for n in list_nodes(address=self.dashboard_url) if n.state == "ALIVE"]
            except Exception:
                alive = []
            if len(alive) >= count:
                return
            time.sleep(0.5)
        raise RuntimeError(f"the test cluster did not reach {count} live nodes in {seconds} s")

    def stop(self) -> None:
        # Until none is left: a raylet not yet ended can start a fresh agent that the first look missed
        # (orphaned agents of a stopped cluster were seen here).
        for _ in range(5):
            pids = self.pids()
            if not pids:
                break
            _kill(pids)
        shutil.rmtree(self.folder, ignore_errors=True)
        self.nodes, self.stopped = [], True


def _kill(pids: list[int]) -> None:
    """Every process frozen first, then ended: none can start another in between."""
    import psutil

    procs = []
    for pid in pids:
        try:
            proc = psutil.Process(pid)
            proc.send_signal(signal.SIGSTOP)
            procs.append(proc)
        except psutil.Error:
            continue
    for proc in procs:
        try:
            proc.send_signal(signal.SIGKILL)
        except psutil.Error:
            continue
    psutil.wait_procs(procs, timeout=10)


def slice_nodes(name: str, hosts: tuple[str, ...]) -> list[tuple[str, dict]]:
    """The `start_node` arguments of a TPU slice's hosts (worker 0 declares the slice's head)."""
    nodes = []
    for worker, host in enumerate(hosts):
        resources = {"TPU": TPU_CHIPS_PER_HOST, name: 1, f"accelerator_type:TPU-{TPU_TYPE.split('-')[0].upper()}": 1}
        if worker == 0:
            resources[HEAD_RESOURCE] = 1
        nodes.append((host, dict(resources=resources, env={
            "TPU_ACCELERATOR_TYPE": TPU_TYPE, "TPU_NAME": name, "TPU_WORKER_ID": str(worker)})))
    return nodes


def other_nodes() -> list[tuple[str, dict]]:
    """The `start_node` arguments of the cluster's nodes besides its head: the slice's hosts and gpu-2."""
    return [*slice_nodes(SLICE_NAME, TPU_HOSTS),
            (GPU_NODE_2, dict(num_gpus=1, resources={f"accelerator_type:{GPU_TYPE}": 1}))]


def start_cluster(folder: Path) -> RayTestCluster:
    cluster = RayTestCluster(Path(folder), uuid.uuid4().hex)
    try:
        # A dead node is declared dead after ~3 s, not Ray's default ~15-30 s (a lost host's test).
        cluster.start_node(GPU_NODE, head=True, num_gpus=1, resources={f"accelerator_type:{GPU_TYPE}": 1},
                           env={"RAY_health_check_period_ms": "1000", "RAY_health_check_failure_threshold": "3",
                                "RAY_health_check_initial_delay_ms": "1000"})
        cluster.start_nodes(other_nodes())
        cluster.wait_nodes(4)
    except BaseException:
        cluster.stop()
        raise
    return cluster


def restore(cluster: RayTestCluster, names: tuple[str, ...] | None = None) -> RayTestCluster:
    """The cluster with its nodes (or those of `names`) alive: a node a lost host's test killed
    (`kill_node`) is started again, under its name, for a test that comes after it. The lost hosts'
    tests run last (tests/test_fleet_when_hosts_are_lost.py), so a run of the suite starts none again.
    A cluster stopped after what seemed its last test (_StopAfterLastUse) is started afresh."""
    if cluster.stopped:
        import tempfile

        fresh = start_cluster(Path(tempfile.mkdtemp(prefix="dbray-", dir=cluster.folder.parent)))
        cluster.__dict__.update(fresh.__dict__)
        return cluster
    missing = [(name, kwargs) for name, kwargs in other_nodes()
               if name not in cluster.nodes and (names is None or name in names)]
    cluster.start_nodes(missing)
    for name, _kwargs in missing:
        if not cluster._alive(name, seconds=60):
            raise RuntimeError(f"the test cluster's node {name} did not come back in 60 s")
    return cluster


class _StopAfterLastUse:
    """Stops the cluster after the session's last test that uses it (in the session's order; under
    `--dist loadgroup` the Ray tests are one group, run in that order on one worker), so the tests
    after them do not share the machine's two cores with its idle nodes (~0.03 of a core each)."""

    def __init__(self, cluster: RayTestCluster):
        self.cluster, self.last = cluster, None

    def pytest_runtest_teardown(self, item, nextitem):
        if self.last is None:
            self.last = [t.nodeid for t in item.session.items if "ray_session_cluster" in t.fixturenames][-1:]
        if item.nodeid in self.last and not self.cluster.stopped:
            self.cluster.stop()


@pytest.fixture(scope="session")
def ray_session_cluster(tmp_path_factory, request):
    """The session's Ray cluster (see the module's docstring); skipped where Ray is not installed."""
    reason = ray_missing()
    if reason:
        pytest.skip(reason)
    # A Unix socket's path holds at most 107 bytes, and Ray's sit ~70 bytes under its temp dir
    # (session_<date>_<pid>/sockets/plasma_store): pytest's tmp folders are too deep on xdist workers,
    # so the cluster's folder is a fresh one in the system's temp dir (as tests/pg_server.py's),
    # removed at the end.
    import tempfile

    base = tmp_path_factory.getbasetemp()
    folder = Path(tempfile.mkdtemp(prefix="dbray-", dir=base if len(str(base)) < 24 else None))
    cluster = start_cluster(folder)
    stopper = _StopAfterLastUse(cluster)
    request.config.pluginmanager.register(stopper)
    yield cluster
    request.config.pluginmanager.unregister(stopper)
    cluster.stop()


@pytest.fixture
def ray_cluster(ray_session_cluster):
    """The session's Ray cluster, each of its nodes alive (`restore`): a test may kill any but the head."""
    return restore(ray_session_cluster)
