"""The fleet on a real Ray cluster (tests/fixtures/ray_cluster.py) and a real PostgreSQL team store: what the
cluster has, a run launched on one of its hosts, refusal, cancel, Ray keeping two runs off one GPU.
(A host lost mid-run: tests/fleet/test_fleet_when_hosts_are_lost.py.)"""

import json
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest
from fixtures import ray_cluster as rc
from fixtures.fleet_runs import LONG, SHAPE, _cli, _row, _wait
from fixtures.pg_server import create_password_role

from dashbench.core.spec import RunSpec
from dashbench.fleet import inventory, launch
from dashbench.store import Store

# One cluster per suite run under `pytest -n 2 --dist loadgroup` (every Ray test in one group, one worker).
pytestmark = [rc.needs_ray(), pytest.mark.xdist_group("ray")]

TINY = [*SHAPE, "--batch-size", "8", "--device", "cpu"]
PASSWORD = "fleet-Pw-7q"


def test_devices_cluster_lists_the_hosts_and_places_that_were_declared(ray_cluster):
    out = _cli("devices", "--cluster", ray_cluster.gcs_address, "--json")
    assert out.returncode == 0, out.stderr
    found = json.loads(out.stdout)
    hosts = {h["name"]: h for h in found["hosts"] if h["alive"]}  # a lost host's test may have run
    assert set(hosts) == {rc.GPU_NODE, rc.GPU_NODE_2, *rc.TPU_HOSTS}
    assert (hosts[rc.GPU_NODE]["gpus"], hosts[rc.GPU_NODE]["gpu_type"]) == (1, rc.GPU_TYPE)
    for worker, name in enumerate(rc.TPU_HOSTS):
        host = hosts[name]
        assert (host["tpu_chips"], host["tpu_type"], host["slice_name"], host["tpu_worker_id"]) == (
            rc.TPU_CHIPS_PER_HOST,
            rc.TPU_TYPE,
            rc.SLICE_NAME,
            worker,
        )
        assert host["slice_head"] == (rc.HEAD_RESOURCE if worker == 0 else None)
    kinds = {k["key"]: k for k in found["kinds"]}
    assert kinds[f"gpu:{rc.GPU_TYPE}@{rc.GPU_NODE}"]["label"] == f"{rc.GPU_TYPE} × 1 on {rc.GPU_NODE}"
    slice_kind = kinds[f"tpu:{rc.TPU_TYPE}@{rc.SLICE_NAME}"]
    assert slice_kind["multi_host"] and slice_kind["devices"] == 2 * rc.TPU_CHIPS_PER_HOST
    assert {h.name: h.node_id for h in inventory.hosts(ray_cluster.dashboard_url) if h.alive} == {
        name: host["node_id"] for name, host in hosts.items()
    }  # Ray's own node ids
    text = _cli("devices", "--cluster", ray_cluster.dashboard_url)
    assert f"TPU {rc.TPU_TYPE} slice {rc.SLICE_NAME}, 2 hosts" in text.stdout


def _job_text(address, run_id: str) -> str:
    """Everything Ray shows of the run's job to whoever lists the cluster's jobs."""
    info = inventory.jobs_client(address).get_job_info(launch.job_id(run_id))
    return json.dumps(
        {"runtime_env": info.runtime_env, "entrypoint": info.entrypoint, "metadata": info.metadata}, default=str
    )


def test_a_cli_run_on_the_cluster_lands_with_its_node_and_progress_and_never_carries_the_stores_password(
    ray_cluster, pg_server, pg_url
):
    """The team store's password appears nowhere (Ray shows a job's runtime_env to anyone who
    can list its jobs): the job's URL has none, the node's libpq reads it from its own ~/.pgpass, and a
    node without it ends the run `failed`, naming ~/.pgpass. With it, the run lands as a local one does."""
    url = create_password_role(pg_server, pg_url, PASSWORD)  # the server now asks this role for it
    address = ray_cluster.dashboard_url
    argv = [
        "run",
        *TINY,
        "--steps",
        "3",
        "--warmup",
        "1",
        "--cluster",
        address,
        "--on",
        rc.GPU_NODE,
        "--db",
        url,
        "--json",
    ]
    pgpass = ray_cluster.folder / "home" / ".pgpass"  # the nodes' HOME (tests/fixtures/ray_cluster.py)
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
        out = _cli(*argv)
    finally:
        pgpass.unlink()
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout)
    assert result["status"] == "done"
    assert "step 3/3" in out.stderr and "compiled in" in out.stderr  # progress as a local run prints it
    assert out.stderr.count("step 1/3") == 1 and out.stderr.count("compiled in") == 1  # each line once
    node_ids = {h.name: h.node_id for h in inventory.hosts(address) if h.alive}
    fleet = result["env"]["fleet"]
    assert fleet["host"] == rc.GPU_NODE and fleet["ray_node_id"] == node_ids[rc.GPU_NODE]
    row = _row(url, result["run_id"])
    assert row["status"] == "done" and row["host"] == rc.GPU_NODE
    assert launch.job_state(address, result["run_id"])[0] == "SUCCEEDED"
    assert PASSWORD not in _job_text(address, result["run_id"]) and PASSWORD not in out.stderr


def _refused(capsys, *args) -> tuple[int, str, str]:
    """A command the cluster's placement refuses, run in this process: it ends before anything is
    stored or started, so a process start of its own would be most of its cost."""
    from dashbench.cli import main

    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def test_a_request_no_node_can_hold_is_refused_at_once_naming_what_the_cluster_has(
    ray_cluster, pg_url, tmp_path, capsys
):
    code, out, _err = _refused(
        capsys,
        "run",
        *TINY,
        "--replicas",
        "4",
        "--cluster",
        ray_cluster.dashboard_url,
        "--on",
        rc.GPU_NODE,
        "--db",
        pg_url,
        "--json",
    )
    assert code == 2
    refusal = json.loads(out)
    assert refusal["status"] == "invalid" and refusal["field"] == "replicas"
    assert f"{rc.GPU_TYPE} × 1 on {rc.GPU_NODE}" in refusal["error"] and "slice" in refusal["error"]
    with Store(pg_url) as store:
        assert len(store.runs()) == 0  # nothing stored, nothing queued in Ray
    code, _out, err = _refused(
        capsys, "run", *TINY[:-1], "tpu", "--cluster", ray_cluster.dashboard_url, "--on", rc.GPU_NODE, "--db", pg_url
    )
    assert code == 2 and "error: device:" in err
    code, _out, err = _refused(
        capsys, "run", *TINY, "--cluster", ray_cluster.dashboard_url, "--db", tmp_path / "file.sqlite"
    )
    assert code == 2 and "error: db:" in err
    # Without --on: a CPU run holds one CPU, none of a host's accelerators; a TPU run the slice
    cpu = launch.plan(ray_cluster.dashboard_url, RunSpec(**LONG))
    assert (cpu.num_cpus, cpu.num_gpus, cpu.resources) == (1, 0, None)
    tpu = launch.plan(ray_cluster.dashboard_url, RunSpec(**{**LONG, "device": "tpu"}))
    assert tpu.kind.multi_host and tpu.kind.hosts == rc.TPU_HOSTS and tpu.resources == {"TPU": 4.0}
    # sweep and preset go through the same placement: refused before any point is stored
    code, _out, err = _refused(
        capsys,
        "sweep",
        *SHAPE,
        "--device",
        "cpu",
        "--batch-sizes",
        "8,16",
        "--cluster",
        ray_cluster.dashboard_url,
        "--on",
        "nowhere",
        "--db",
        pg_url,
    )
    assert code == 2 and "error: on: no place 'nowhere' on the cluster; it has: " in err
    code, out, _err = _refused(
        capsys,
        "preset",
        "riseml-resnet50",
        "--quick",
        "--device",
        "cpu",
        "--cluster",
        ray_cluster.dashboard_url,
        "--on",
        "nowhere",
        "--db",
        pg_url,
        "--json",
    )
    assert code == 2 and json.loads(out)["field"] == "on"
    with Store(pg_url) as store:
        assert len(store.runs()) == 0


def _run_cluster(argv: list, **kwargs) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "dashbench", "run", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kwargs,
    )


def test_ray_keeps_a_second_run_off_a_busy_gpu_and_a_signal_on_run_cluster_cancels_either_run(ray_cluster, pg_url):
    """SIGTERM on `run --cluster` cancels its running run on its node (its processes end), as a local run
    is cancelled; Ctrl-C cancels a queued one, even where the command was started with SIGINT ignored, as
    a script's background job inherits it (how a CI runner may start the suite)."""
    address = ray_cluster.dashboard_url
    argv = [
        *(f"--{k.replace('_', '-')}={v}" for k, v in LONG.items()),
        "--cluster",
        address,
        "--on",
        rc.GPU_NODE,
        "--db",
        pg_url,
    ]
    cli, queued_cli = _run_cluster(argv), None
    try:

        def running():
            with Store(pg_url) as store:
                runs = store.runs()
            return len(runs) and (r := _row(pg_url, runs["run_id"].iloc[0]))["status"] == "running" and r["pid"] and r

        row = _wait(running, what="the first run")
        first = row["run_id"]
        assert row["host"] == rc.GPU_NODE
        queued_cli = _run_cluster(argv, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))

        def stored():
            with Store(pg_url) as store:
                return [r for r in store.runs()["run_id"] if r != first]

        (second,) = _wait(stored, what="the second run stored")
        _wait(lambda: launch.job_state(address, second)[0], seconds=30, what="the second run's job")
        time.sleep(4)  # a free GPU's job starts in ~1 s
        assert launch.job_state(address, second)[0] == "PENDING"  # Ray queues it: one GPU, one run
        assert _row(pg_url, second)["status"] == "queued"
        queued_cli.send_signal(signal.SIGINT)  # Ctrl-C in the shell that waits
        _out, queued_err = queued_cli.communicate(timeout=120)
        assert queued_cli.returncode == 130, queued_err[-2000:]
        run_pids = [row["pid"], *(c.pid for c in psutil.Process(row["pid"]).children(recursive=True))]
        cli.terminate()  # SIGTERM on `run --cluster`: the run is cancelled on its node, as a local run is
        _out, err = cli.communicate(timeout=120)
    finally:
        for started in (cli, queued_cli):
            if started is not None and started.poll() is None:
                started.kill()
                started.wait()
    for said in (queued_err, err):
        assert "cancelling the run on its node" in said and "error: run cancelled" in said
    assert _row(pg_url, second)["status"] == "cancelled"  # never started: its job stopped
    _wait(lambda: launch.job_state(address, second)[0] == "STOPPED", seconds=30, what="the second job's stop")
    assert cli.returncode == 143, err[-2000:]
    assert _row(pg_url, first)["status"] == "cancelled"
    _wait(
        lambda: not any(psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE for p in run_pids),
        seconds=30,
        what="the run's processes ending",
    )
    _wait(lambda: launch.job_state(address, first)[0] == "STOPPED", seconds=30, what="the first job's stop")


def test_a_run_launched_from_the_run_page_lands_in_the_team_store_on_its_node_and_cancel_ends_it(
    ray_cluster, pg_url, monkeypatch
):
    """The page's own launch and Cancel (a CLI run above goes to its end and its result's env)."""
    from fixtures.app_test import APP, TIMEOUT_S, assert_clean, show, texts
    from streamlit.testing.v1 import AppTest

    from dashbench.views.common import devices as device_views

    monkeypatch.setenv("RAY_ADDRESS", ray_cluster.dashboard_url)
    monkeypatch.setenv("DASHBENCH_DB", pg_url)
    monkeypatch.setenv("DASHBENCH_READ_ONLY", "0")
    # This machine's own devices are not under test (a TensorFlow subprocess otherwise).
    monkeypatch.setattr(
        device_views, "device_info", lambda *a, **k: device_views.DeviceInfo(kinds=["cpu"], description={"cpu": "CPU"})
    )
    # An earlier test's stopped job gives its GPU back to Ray a moment after its run ended.
    gpu_free = f"{rc.GPU_TYPE} × 1 on {rc.GPU_NODE} (1 of 1 free)"
    _wait(
        lambda: gpu_free in [k.text() for k in inventory.kinds(inventory.hosts(ray_cluster.dashboard_url))],
        seconds=60,
        what="the GPU free again",
    )
    at = AppTest.from_file(APP, default_timeout=TIMEOUT_S)
    at.run()
    show(at, "pages/run.py")
    where = at.selectbox(key="run_place")
    place = f"gpu:{rc.GPU_TYPE}@{rc.GPU_NODE}"
    assert where.options[0] == "this machine" and f"{rc.GPU_TYPE} × 1 on {rc.GPU_NODE} (1 of 1 free)" in where.options
    assert f"TPU {rc.TPU_TYPE} slice {rc.SLICE_NAME}, 2 hosts (8 of 8 free)" in where.options
    assert f"{rc.GPU_TYPE} × 1 on each of 2 hosts (2 of 2 free)" in where.options  # gpu-1 and gpu-2 as one place
    for key, value in (("run_model", "fashion_mnist_cnn"), ("run_device", "cpu"), ("run_place", place)):
        at.selectbox(key=key).set_value(value)
    for key, value in (
        ("run_batch_size", 4),
        ("run_steps", LONG["steps"]),
        ("run_warmup", 1),
        ("run_image_size", 8),
        ("run_width", 2),
    ):
        at.number_input(key=key).set_value(value)
    at.button(key="run_launch").click().run()
    assert_clean(at)
    assert "Queued 1 run(s)." in texts(at)
    with Store(pg_url) as store:
        (run_id,) = list(store.runs()["run_id"])
    row = _wait(lambda: (r := _row(pg_url, run_id))["status"] == "running" and r["pid"] and r, what="the page's run")
    node_ids = {h.name: h.node_id for h in launch.inventory.hosts(ray_cluster.dashboard_url) if h.alive}
    info = launch.inventory.jobs_client(ray_cluster.dashboard_url).get_job_info(launch.job_id(run_id))
    assert row["host"] == rc.GPU_NODE and info.driver_node_id == node_ids[rc.GPU_NODE]
    at.run()
    at.button(key=f"cancel_{run_id}").click().run()
    _wait(lambda: _row(pg_url, run_id)["status"] == "cancelled", seconds=60, what="the page's cancel")
    _wait(
        lambda: launch.job_state(ray_cluster.dashboard_url, run_id)[0] == "STOPPED",
        seconds=30,
        what="its Ray job's stop",
    )
    _wait(
        lambda: not psutil.pid_exists(row["pid"]) or psutil.Process(row["pid"]).status() == psutil.STATUS_ZOMBIE,
        seconds=30,
        what="the run process's end",
    )
