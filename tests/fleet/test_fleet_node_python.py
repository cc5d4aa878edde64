"""A cluster run is run by the Python of its host's Ray workers, not by whatever `python` the host's PATH
finds first: a host started as `.venv/bin/ray start` without the venv on its PATH runs it, and a host
whose Ray has no dashbench beside it is refused before anything is stored (dashbench/fleet/node_python.py).
Two extra hosts join the session's cluster for the test and are ended after it."""

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from fixtures import ray_cluster as rc

from dashbench.store import Store

pytestmark = [rc.needs_ray(), pytest.mark.xdist_group("ray")]

TINY = [
    "--model",
    "conv2d",
    "--backend",
    "jax",
    "--image-size",
    "8",
    "--width",
    "4",
    "--batch-size",
    "8",
    "--device",
    "cpu",
    "--steps",
    "3",
    "--warmup",
    "1",
]
OFF_PATH = "venv-off-path"
BARE = "no-dashbench"


def _path_without_the_venv() -> str:
    venvs = {rc.VENV_BIN, str(Path(sys.executable).resolve().parent), str(Path(sys.prefix) / "bin")}
    return os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep) if p and p not in venvs)


def _ray_without_dashbench(folder: Path) -> Path:
    """A venv whose Python finds Ray (this venv's packages, by a .pth line) but not dashbench: the
    editable install's own .pth is not read from a folder a .pth line adds."""
    base = Path(sys.base_prefix) / "bin" / f"python{sys.version_info.major}.{sys.version_info.minor}"
    subprocess.run([str(base), "-m", "venv", "--without-pip", str(folder)], check=True, timeout=120)
    site = folder / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    (site / "this-venvs-packages.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    ray = folder / "bin" / "ray"
    ray.write_text(f"#!{folder}/bin/python\nimport sys\nfrom ray.scripts.scripts import main\nsys.exit(main())\n")
    ray.chmod(0o755)
    found = subprocess.run(
        [str(folder / "bin" / "python"), "-c", "import ray, dashbench"],
        cwd=folder,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
        capture_output=True,
        text=True,
    )
    assert "No module named 'dashbench'" in found.stderr, found.stderr  # Ray imported, dashbench not
    return folder / "bin"


def _cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "dashbench", *args], capture_output=True, text=True, timeout=600, env=dict(os.environ)
    )


def test_a_run_uses_its_hosts_ray_python_and_a_host_without_dashbench_is_refused(
    ray_cluster, pg_url, tmp_path, monkeypatch
):
    bare_bin = _ray_without_dashbench(tmp_path / "bare")
    try:
        ray_cluster.start_node(OFF_PATH, env={"PATH": _path_without_the_venv()})  # `.venv/bin/ray start`
        with monkeypatch.context() as patch:  # `bare/bin/ray start`, PYTHONPATH without this checkout
            patch.setattr(rc, "VENV_BIN", str(bare_bin))
            ray_cluster.start_node(
                BARE, env={"PATH": f"{bare_bin}:{_path_without_the_venv()}", "PYTHONPATH": str(bare_bin)}
            )
        address = ray_cluster.dashboard_url

        out = _cli("run", *TINY, "--cluster", address, "--on", f"cpu@{OFF_PATH}", "--db", pg_url, "--json")
        assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
        result = json.loads(out.stdout)
        assert result["status"] == "done" and result["env"]["fleet"]["host"] == OFF_PATH
        with Store(pg_url) as store:
            assert store.get_run(result["run_id"])["host"] == OFF_PATH
            before = store.count_runs()

        refused = _cli("run", *TINY, "--cluster", ray_cluster.gcs_address, "--on", f"cpu@{BARE}", "--db", pg_url)
        assert refused.returncode == 2 and refused.stdout == "", refused.stderr[-3000:]
        err = refused.stderr.strip()
        assert err.startswith(f"error: on: host {BARE} has no dashbench") and len(err.splitlines()) == 1, err
        assert "bash scripts/install.sh requirements-cluster.txt" in err and str(bare_bin) in err
        with Store(pg_url) as store:
            assert store.count_runs() == before  # nothing queued
    finally:
        ray_cluster.kill_node(OFF_PATH, BARE)


def _asks(ray_cluster) -> int:
    """How many times the cluster was asked for a host's Python: each ask is a Ray driver of its own
    (`python -m dashbench.fleet.node_python`), listed by the cluster as a job."""
    from ray.util.state import list_jobs

    return sum(
        "dashbench.fleet.node_python" in (job.entrypoint or "")
        for job in list_jobs(address=ray_cluster.dashboard_url, limit=10_000)
    )


def test_a_hosts_python_is_asked_once_and_kept_by_its_ray_node_id(ray_cluster, tmp_path, monkeypatch):
    from dashbench.fleet import inventory, node_python
    from dashbench.fleet.address import parse

    monkeypatch.setenv(node_python.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setattr(node_python, "_known", {})  # a process that has asked nothing yet
    address = parse(ray_cluster.gcs_address)
    first, second = sorted((h for h in inventory.hosts(address) if h.alive), key=lambda h: h.name)[:2]
    before = _asks(ray_cluster)
    python = node_python.python_on(address, [first])[first.node_id]
    assert Path(python).name.startswith("python") and _asks(ray_cluster) == before + 1
    assert json.loads(node_python.cache_path().read_text()) == {first.node_id: python}

    monkeypatch.setattr(node_python, "_known", {})  # the next command: a new process
    assert node_python.python_on(address, [first]) == {first.node_id: python}
    assert _asks(ray_cluster) == before + 1  # answered from the file, the cluster not asked
    # A node id the file does not hold (another host, or one whose Ray started again) is asked, and kept.
    both = node_python.python_on(address, [first, second])
    assert both[first.node_id] == python and _asks(ray_cluster) == before + 2
    assert set(json.loads(node_python.cache_path().read_text())) == {first.node_id, second.node_id}
