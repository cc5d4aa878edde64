"""A cluster run's life beyond the CLI tests of tests/fleet/test_fleet.py (signals on `run --cluster` among
them): a sweep's points on the cluster, and a run that outlives the dashboard that launched it (the Run
page of a fresh dashboard finds it in the team store, follows it and cancels it through its Ray job)."""

import json
import subprocess
import sys
from datetime import datetime

import psutil
import pytest
from fixtures import ray_cluster as rc
from fixtures.fleet_runs import LONG, SHAPE, _cli, _row, _wait

from dashbench.fleet import inventory, launch
from dashbench.store import Store

pytestmark = [rc.needs_ray(), pytest.mark.xdist_group("ray")]  # see scripts/test.sh

GPU_PLACE = f"gpu:{rc.GPU_TYPE}@{rc.GPU_NODE}"


def _gpu_free(address) -> None:
    # An earlier test's stopped job gives its GPU back to Ray a moment after its run ended.
    free = f"{rc.GPU_TYPE} × 1 on {rc.GPU_NODE} (1 of 1 free)"
    _wait(
        lambda: free in [k.text() for k in inventory.kinds(inventory.hosts(address))],
        seconds=60,
        what="the GPU free again",
    )


def _running(url, run_id=None):
    def found():
        with Store(url) as store:
            runs = store.runs()
        ids = [run_id] if run_id else list(runs["run_id"])[:1]
        return ids and (r := _row(url, ids[0])) and r["status"] == "running" and r["pid"] and r

    return found


def _ended(pids: list[int]) -> bool:
    return not any(psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE for p in pids)


def test_a_sweep_on_the_cluster_runs_its_points_on_the_place_one_after_the_other(ray_cluster, pg_url):
    _gpu_free(ray_cluster.dashboard_url)
    out = _cli(
        "sweep",
        *SHAPE,
        "--device",
        "cpu",
        "--steps",
        "2",
        "--warmup",
        "1",
        "--batch-sizes",
        "4,8",
        "--cluster",
        ray_cluster.dashboard_url,
        "--on",
        GPU_PLACE,
        "--db",
        pg_url,
        "--json",
    )
    assert out.returncode == 0, out.stderr[-3000:]
    swept = json.loads(out.stdout)
    with Store(pg_url) as store:
        rows = [store.get_run(r) for r in store.runs()["run_id"]]
    assert len(rows) == 2 and {r["sweep_id"] for r in rows} == {swept["sweep_id"]}
    assert all(r["status"] == "done" and r["host"] == rc.GPU_NODE for r in rows)
    assert sorted(r["spec"]["batch_size"] for r in rows) == [4, 8]
    first, second = sorted(rows, key=lambda r: r["started_at"])
    # One GPU, one run: Ray started the second point's job once the first's had ended.
    assert datetime.fromisoformat(second["started_at"]) >= datetime.fromisoformat(first["finished_at"])
    for row in rows:  # the last point's job ends a moment after its run recorded its end
        _wait(
            lambda row=row: launch.job_state(ray_cluster.dashboard_url, row["run_id"])[0] == "SUCCEEDED",
            seconds=30,
            what=f"point {row['run_id']}'s job ending",
        )


def test_a_sweep_on_the_cluster_stopped_by_sigterm_cancels_its_points_there(ray_cluster, pg_url):
    """SIGTERM on `sweep --cluster` while a point runs: every point ends `cancelled` (the one Ray still
    queues never starts), their jobs stop, the running point's process ends, and the sweep exits
    128 + 15, as a local sweep does (tests/jobs/test_jobs.py)."""
    address = ray_cluster.dashboard_url
    _gpu_free(address)
    shape = [f"--{k.replace('_', '-')}={v}" for k, v in LONG.items() if k != "batch_size"]
    sweep = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "dashbench",
            "sweep",
            *shape,
            "--batch-sizes",
            "4,8",
            "--cluster",
            address,
            "--on",
            GPU_PLACE,
            "--db",
            pg_url,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )

    def one_running():
        with Store(pg_url) as store:
            rows = [store.get_run(r) for r in store.runs()["run_id"]]
        return len(rows) == 2 and next((r for r in rows if r["status"] == "running" and r["pid"]), None)

    try:
        row = _wait(one_running, what="a point running")
        sweep.terminate()
        _out, err = sweep.communicate(timeout=120)
    finally:
        if sweep.poll() is None:
            sweep.kill()
            sweep.wait()
    assert sweep.returncode == 143, err[-2000:]
    assert "cancelled" in err
    with Store(pg_url) as store:
        rows = [store.get_run(r) for r in store.runs()["run_id"]]
    assert [r["status"] for r in rows] == ["cancelled", "cancelled"], [(r["status"], r["error"]) for r in rows]
    for point in rows:
        _wait(
            lambda point=point: launch.job_state(address, point["run_id"])[0] == "STOPPED",
            seconds=30,
            what=f"point {point['run_id']}'s job stopping",
        )
    _wait(lambda: _ended([row["pid"]]), seconds=30, what="the running point's process ending")


LAUNCH = """import json, sys
from dashbench.core.spec import RunSpec
from dashbench.views.run import fleet
address, url, place, spec = sys.argv[1:]
print(fleet.launch([RunSpec(**json.loads(spec))], url, address, place)[0])
"""


def test_a_run_outlives_the_dashboard_that_launched_it_and_a_fresh_run_page_cancels_it(
    ray_cluster, pg_url, monkeypatch
):
    from fixtures.app_test import APP, TIMEOUT_S, assert_clean, show
    from streamlit.testing.v1 import AppTest

    from dashbench.views.common import devices as device_views

    address = ray_cluster.dashboard_url
    _gpu_free(address)
    # The Run page's launch, in a process that then ends as a stopped dashboard does.
    launcher = subprocess.run(
        [sys.executable, "-c", LAUNCH, address, pg_url, GPU_PLACE, json.dumps(LONG)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert launcher.returncode == 0, launcher.stderr[-2000:]
    run_id = launcher.stdout.strip()
    row = _wait(_running(pg_url, run_id), what="the run after its launcher ended")
    # A fresh dashboard: nothing of the launch in its session; the team store and Ray's job id find it.
    monkeypatch.setenv("RAY_ADDRESS", address)
    monkeypatch.setenv("DASHBENCH_DB", pg_url)
    monkeypatch.setenv("DASHBENCH_READ_ONLY", "0")
    monkeypatch.setattr(
        device_views, "device_info", lambda *a, **k: device_views.DeviceInfo(kinds=["cpu"], description={"cpu": "CPU"})
    )
    at = AppTest.from_file(APP, default_timeout=TIMEOUT_S)
    at.run()
    show(at, "pages/run.py")
    assert "Active runs (1)" in [h.value for h in at.subheader]
    at.button(key=f"cancel_{run_id}").click().run()
    assert_clean(at)
    _wait(lambda: _row(pg_url, run_id)["status"] == "cancelled", seconds=60, what="the fresh page's cancel")
    _wait(lambda: launch.job_state(address, run_id)[0] == "STOPPED", seconds=30, what="its Ray job's stop")
    _wait(lambda: _ended([row["pid"]]), seconds=30, what="the run process's end")
