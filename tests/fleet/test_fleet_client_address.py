"""A Ray Client address (`ray://HEAD:PORT`): the head starts a server process for each connection (Ray's
proxier), which a busy head can fail to start. A command gets its answer, or after a few tries one line
that says what to retry (dashbench/fleet/address.py)."""

import logging
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest
from fixtures import ray_cluster as rc
from fixtures.fleet_runs import _cli

from dashbench.fleet.address import CLIENT_TRIES
from dashbench.fleet.inventory import CLIENT_LOG_STREAM

# Far above what this test's one session takes on a quiet or a loaded machine (docs/testing.md). Past it (as
# grpcio's fork crash did, tests/fleet/test_grpc_fork.py), what the head logged and ran goes in the report.
SLOW_SESSION_S = 20.0
PROXY = "client-proxy"  # the marker of the second proxy's processes (tests/fixtures/ray_cluster.py)
# Ray's proxy, `python -m ray.util.client.server`, as the head runs it, whose log stream for a session it
# failed to start ends at once: Ray pauses between its tries to find that session's server, a fixed wait
# (not read from the environment) the client's disconnect sits through on each of the command's tries.
PROXY_MAIN = (
    "import runpy; import ray.util.client.server.proxier as proxier; proxier.LOGSTREAM_RETRY_INTERVAL_SEC = 0; "
    "runpy.run_module('ray.util.client.server', run_name='__main__')"
)


@rc.needs_ray()
@pytest.mark.xdist_group("ray")  # the session's cluster: see scripts/test.sh
def test_devices_through_the_ray_client_address_lists_the_clusters_hosts(ray_cluster):
    logs = Path(ray_cluster.folder) / "ray" / "session_latest" / "logs"
    before = set(logs.glob("ray_client_server*.err"))
    began = time.monotonic()
    command = subprocess.Popen(
        [sys.executable, "-m", "dashbench", "devices", "--cluster", ray_cluster.client_url],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        stdout, stderr = command.communicate(timeout=SLOW_SESSION_S)
        seen = ""
    except subprocess.TimeoutExpired:
        seen = _client_servers(ray_cluster)  # while the session is slow: what its servers are doing
        stdout, stderr = command.communicate(timeout=300)
    took = time.monotonic() - began
    if took > SLOW_SESSION_S:
        said = {p.name: p.read_text(errors="replace")[-4000:] for p in sorted(logs.glob("ray_client_server*.err"))}
        new = sorted(p.name for p in set(logs.glob("ray_client_server*.err")) - before)
        warnings.warn(
            f"a Ray Client session took {took:.1f} s; its servers at {SLOW_SESSION_S:.0f} s: {seen}; new server logs "
            f"{new}; {said}; {stderr[-1500:]}",
            stacklevel=1,
        )
    out = subprocess.CompletedProcess(command.args, command.returncode, stdout, stderr)
    assert out.returncode == 0, out.stderr[-3000:]
    for host in (rc.GPU_NODE, *rc.TPU_HOSTS):
        assert host in out.stdout, out.stdout
    assert f"TPU {rc.TPU_TYPE} slice {rc.SLICE_NAME}, 2 hosts" in out.stdout


def _client_servers(ray_cluster) -> str:
    """Each Ray Client server process of the cluster: its state, age, CPU, command line and what each of its
    threads waits in (a server stuck before its exec keeps its parent's command line)."""
    import psutil

    found = []
    for pid in ray_cluster.pids():
        try:
            proc = psutil.Process(pid)
            argv = proc.cmdline()
            cmdline = " ".join(argv)
            if "ray.util.client.server" not in cmdline or Path(argv[0]).name == "raylet":  # a raylet names it too
                continue
            waits = sorted({Path(f"/proc/{pid}/task/{tid.id}/wchan").read_text() for tid in proc.threads()})
            found.append(
                f"pid {pid} (parent {proc.ppid()}) {proc.status()} {time.time() - proc.create_time():.1f} s old, "
                f"{sum(proc.cpu_times()[:2]):.1f} s CPU, waits {waits}: {cmdline[:300]}"
            )
        except (psutil.Error, OSError):
            continue
    return "; ".join(found) or "none"


@rc.needs_ray()
def test_the_log_stream_logger_dashbench_quiets_is_the_one_rays_client_logs_through():
    import ray.util.client.logsclient

    assert logging.getLogger(CLIENT_LOG_STREAM) is ray.util.client.logsclient.logger


@rc.needs_ray()
@pytest.mark.xdist_group("ray")  # the session's cluster: see scripts/test.sh
def test_a_head_that_never_starts_a_client_session_gets_one_line_saying_what_to_retry(ray_cluster):
    """A second Ray Client proxy on the session's cluster, as `ray start --head` runs one, whose wait for
    each session's server is 0 s (RAY_CLIENT_SERVER_CHECK_CHANNEL_TIMEOUT_S, read by Ray's proxier): every
    session fails as a busy head's slow start does, the same way each time (PROXY_MAIN)."""
    port = rc._free_port(ray_cluster.ports)
    logs = Path(ray_cluster.folder) / "ray" / "session_latest" / "logs"
    before = set(logs.glob("ray_client_server_*.err"))
    proxy = subprocess.Popen(
        [
            f"{rc.VENV_BIN}/python",
            "-c",
            PROXY_MAIN,
            f"--address={ray_cluster.gcs_address}",
            "--host=127.0.0.1",
            f"--port={port}",
            "--mode=proxy",
            "--runtime-env-agent-address=http://127.0.0.1:1",  # asked only for a session with a runtime_env
        ],
        env=ray_cluster.env(PROXY, {"RAY_CLIENT_SERVER_CHECK_CHANNEL_TIMEOUT_S": "0"}),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        out = _cli("devices", "--cluster", f"ray://127.0.0.1:{port}")
        sessions = set(logs.glob("ray_client_server_*.err")) - before
    finally:
        ray_cluster.kill_node(PROXY)  # the proxy and every server it started, by pid
        proxy.wait(timeout=60)
    assert out.returncode == 2 and out.stdout == "", out.stderr[-3000:]
    (line,) = out.stderr.strip().splitlines()
    assert line.startswith(f"error: cluster: the head at ray://127.0.0.1:{port} did not start a Ray Client"), line
    assert "run the command again" in line and "--cluster http://127.0.0.1:8265" in line, line
    assert len(sessions) == CLIENT_TRIES, sessions  # each try asked the head for a session of its own
