"""A model file on a real Ray cluster (tests/fixtures/ray_cluster.py) with a real PostgreSQL team store: the Ray
job carries the file to the node, which checks its hash there; the run lands under the same identity
as a local run of the file, so the two group together on Compare."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from fixtures import ray_cluster as rc

from dashbench.fleet import inventory, launch
from dashbench.store import Store
from dashbench.workloads import model_file

pytestmark = [rc.needs_ray(), pytest.mark.xdist_group("ray")]
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "models"


def test_a_model_file_runs_on_a_cluster_node_carried_by_its_job(ray_cluster, pg_url, tmp_path):
    folder = tmp_path / "mine"
    folder.mkdir()
    shutil.copy(EXAMPLES / "mlp.py", folder / "mlp.py")
    model = f"{folder / 'mlp.py'}:build_tiny"
    argv = [
        sys.executable,
        "-m",
        "dashbench",
        "run",
        "--model",
        model,
        "--backend",
        "jax",
        "--batch-size",
        "8",
        "--steps",
        "3",
        "--warmup",
        "1",
        "--device",
        "cpu",
        "--db",
        pg_url,
        "--json",
    ]
    out = subprocess.run(
        [*argv, "--cluster", ray_cluster.dashboard_url, "--on", rc.GPU_NODE],
        capture_output=True,
        text=True,
        timeout=600,
        env=dict(os.environ),
    )
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout)
    expected = model_file.reference(model)
    assert result["status"] == "done" and result["model"] == expected["model"]
    assert result["model_info"]["sha256"] == expected["model_sha256"]
    assert result["env"]["fleet"]["host"] == rc.GPU_NODE
    info = inventory.jobs_client(ray_cluster.dashboard_url).get_job_info(launch.job_id(result["run_id"]))
    assert info.runtime_env["env_vars"][model_file.ARRIVED_ENV] == "mlp.py"
    assert str(info.runtime_env.get("working_dir", "")).startswith("gcs://")  # the file went with the job
    # The same file measured here groups with the cluster's run: one identity.
    local = subprocess.run(argv, capture_output=True, text=True, timeout=600, env=dict(os.environ))
    assert local.returncode == 0, local.stderr[-3000:]
    assert json.loads(local.stdout)["model"] == result["model"]
    with Store(pg_url) as store:
        runs = store.runs()
    assert runs[runs["model"] == result["model"]].shape[0] == 2
