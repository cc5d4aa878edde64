"""A multi-host run on the test Ray cluster beside the same spec on this machine, one host and no store:
the losses the group run must give (tests/test_fleet_gpu_groups.py, tests/test_fleet_slices.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import time


def one_host_reference(spec: dict, env: dict | None = None) -> subprocess.Popen:
    """The same spec on this machine, one host and no store: the losses a group run must give."""
    argv = [sys.executable, "-m", "dashbench", "run", "--no-store", "--json"]
    for name, value in spec.items():
        argv += [f"--{name.replace('_', '-')}", str(value)]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ if env is None else env))


def group_run_and_reference(address: str, url: str, run_id: str, reference: subprocess.Popen,
                            seconds: float = 300) -> tuple[dict, list, str, str]:
    """A group run's row and the store's run ids once its job has ended (every host's process has:
    worker 0 writes the run, the others add to it), and the reference's stdout and stderr."""
    from dashbench.fleet import launch
    from dashbench.store import Store

    try:
        deadline = time.monotonic() + seconds
        while launch.job_state(address, run_id)[0] not in launch.ENDED and time.monotonic() < deadline:
            time.sleep(0.5)
        with Store(url) as store:
            row, runs = store.get_run(run_id), list(store.runs()["run_id"])
        out, err = reference.communicate(timeout=seconds)
    finally:
        if reference.poll() is None:
            reference.kill()
            reference.wait()
    return row, runs, out, err
