"""A Ray Client address (`ray://HEAD:PORT`): the head starts a server process for each connection (Ray's
proxier), which a busy head can fail to start. A command gets its answer, or after a few tries one line
that says what to retry (dashbench/fleet/address.py)."""

import tempfile
from pathlib import Path

import pytest
from fixtures import ray_cluster as rc
from fixtures.fleet_runs import _cli

from dashbench.fleet.address import CLIENT_TRIES


@rc.needs_ray()
@pytest.mark.xdist_group("ray")  # the session's cluster: see scripts/test.sh
def test_devices_through_the_ray_client_address_lists_the_clusters_hosts(ray_cluster):
    out = _cli("devices", "--cluster", ray_cluster.client_url)
    assert out.returncode == 0, out.stderr[-3000:]
    for host in (rc.GPU_NODE, *rc.TPU_HOSTS):
        assert host in out.stdout, out.stdout
    assert f"TPU {rc.TPU_TYPE} slice {rc.SLICE_NAME}, 2 hosts" in out.stdout


@rc.needs_ray()
@pytest.mark.xdist_group("ray")  # its own head, started while no other Ray node is starting
def test_a_head_that_never_starts_a_client_session_gets_one_line_saying_what_to_retry(tmp_path_factory):
    """A head whose proxy waits 0 s for each session's server (RAY_CLIENT_SERVER_CHECK_CHANNEL_TIMEOUT_S,
    read by Ray's proxier): every session fails as a busy head's slow start does, the same way each time."""
    base = tmp_path_factory.getbasetemp()  # a short folder: Ray's socket paths (tests/fixtures/ray_cluster.py)
    folder = Path(tempfile.mkdtemp(prefix="dbray-", dir=base if len(str(base)) < 24 else None))
    head = rc.RayTestCluster(folder, f"client-{folder.name}")
    try:
        head.start_node("busy-head", head=True, env={"RAY_CLIENT_SERVER_CHECK_CHANNEL_TIMEOUT_S": "0"})
        out = _cli("devices", "--cluster", head.client_url)
        sessions = list((folder / "ray" / "session_latest" / "logs").glob("ray_client_server_*.err"))
    finally:
        head.stop()
    assert out.returncode == 2 and out.stdout == "", out.stderr[-3000:]
    (line,) = out.stderr.strip().splitlines()
    assert line.startswith(f"error: cluster: the head at {head.client_url} did not start a Ray Client session"), line
    assert "run the command again" in line and "--cluster http://127.0.0.1:8265" in line, line
    assert len(sessions) == CLIENT_TRIES, sessions  # each try asked the head for a session of its own
