"""A cluster run never carries the team store's password (issue 22: a password appears nowhere; Ray
shows a job's runtime_env to anyone who can list its jobs): the job's URL has none, the node's libpq
reads it from its own ~/.pgpass, and a node without it ends the run `failed`, naming ~/.pgpass."""

import json
import os

import pytest
import ray_cluster as rc
from pg_server import create_password_role
from test_fleet import TINY, _cli, _row

from dashbench.fleet import inventory, launch

pytestmark = [rc.needs_ray(), pytest.mark.xdist_group("ray")]  # see scripts/test.sh

PASSWORD = "fleet-Pw-7q"


def _job_text(address, run_id: str) -> str:
    """Everything Ray shows of the run's job to whoever lists the cluster's jobs."""
    info = inventory.jobs_client(address).get_job_info(launch.job_id(run_id))
    return json.dumps({"runtime_env": info.runtime_env, "entrypoint": info.entrypoint, "metadata": info.metadata},
                      default=str)


def test_a_cluster_run_never_carries_the_stores_password_and_a_node_without_it_says_pgpass(
        ray_cluster, pg_server, pg_url):
    url = create_password_role(pg_server, pg_url, PASSWORD)  # the server now asks this role for it
    address = ray_cluster.dashboard_url
    argv = ["run", *TINY, "--steps", "2", "--warmup", "1", "--cluster", address, "--on", rc.GPU_NODE,
            "--db", url, "--json"]
    pgpass = ray_cluster.folder / "home" / ".pgpass"  # the nodes' HOME (tests/ray_cluster.py)
    assert not pgpass.exists()
    # The node has no password: the run never opens the store; its launcher records why.
    refused = _cli(*argv)
    assert refused.returncode == 1, refused.stderr[-3000:]
    assert refused.stderr.count("the password is not sent with the job") == 1
    run_id = json.loads(refused.stdout)["run_id"]
    row = _row(url, run_id)
    assert row["status"] == "failed" and "~/.pgpass" in row["error"] and "no password supplied" in row["error"]
    assert PASSWORD not in refused.stdout + refused.stderr + row["error"]
    seen = _job_text(address, run_id)
    assert PASSWORD not in seen and url.replace(f":{PASSWORD}", "") in seen
    # With the password in the node's own ~/.pgpass, the same URL's run lands.
    port_db = url.rsplit("@127.0.0.1:", 1)[1]
    pgpass.write_text(f"127.0.0.1:{port_db.replace('/', ':')}:{url.split('//')[1].split(':')[0]}:{PASSWORD}\n")
    os.chmod(pgpass, 0o600)
    try:
        landed = _cli(*argv)
    finally:
        pgpass.unlink()
    assert landed.returncode == 0, landed.stderr[-3000:]
    result = json.loads(landed.stdout)
    assert result["status"] == "done" and _row(url, result["run_id"])["status"] == "done"
    assert PASSWORD not in _job_text(address, result["run_id"]) and PASSWORD not in landed.stderr


@pytest.mark.parametrize("url", ["postgresql+psycopg://writer:p@ss/w@db:5432/team",
                                 "postgresql+psycopg://writer@db:5432/team?password=p%40ss%2Fw&sslmode=require"])
def test_the_url_a_job_carries_has_no_password_in_either_place_libpq_takes_one(url):
    sent = launch.sent_url(url)
    assert sent.startswith("postgresql+psycopg://writer@db:5432/team") and "p@ss" not in sent and "p%40" not in sent
    assert ("sslmode=require" in sent) == ("sslmode" in url)
    assert "~/.pgpass" in launch.password_note(url) and launch.password_note(sent) is None
