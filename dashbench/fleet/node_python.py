"""Which Python runs dashbench on a host of the cluster: the one its Ray workers run.

A job's entrypoint is a shell line run with the host's PATH, so `python -m dashbench` there finds
whatever `python` comes first: on a host started as `.venv/bin/ray start` without the venv activated,
the system's, without dashbench or its packages. The Python that started Ray is the one with Ray, and
on a measuring host the one with dashbench: its workers' `sys.executable`, read by a tiny task pinned
to the host (num_cpus=0: it runs beside a run holding the host's CPUs). A host whose workers cannot
import dashbench is refused before anything is stored.

The task needs a Ray driver; it lives in a short child process (`python -m dashbench.fleet.node_python`),
never in the dashboard's, and costs seconds (a driver's start on the cluster): each host's answer is kept
for the process's life and in a small file under the user's cache folder (DASHBENCH_CACHE_DIR), keyed by
the host's Ray node id, so the next `run --cluster` does not ask again. A host whose Ray is started again
is a new node id, asked afresh; only a host that has dashbench is kept (a refusal is always asked again).
A Jobs API address (http://head:8265) carries no driver address: a shell-only
job on the head prints the GCS address its jobs are given (RAY_ADDRESS), asked once per process.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import time
import uuid

from dashbench.fleet import FleetError
from dashbench.fleet.address import CLIENT_TRIES, client_env, client_retry_line, client_start_failed

PYTHON_ENV = "DASHBENCH_FLEET_PYTHON"  # a Python to use on every host instead of asking
INSTALL = "bash scripts/install.sh requirements-cluster.txt"
ASK_TIMEOUT_S = 180.0
CACHE_ENV = "DASHBENCH_CACHE_DIR"  # the user's cache folder for dashbench (default ~/.cache/dashbench)
CACHE_FILE = "node-pythons.json"  # Ray node id -> the Python with dashbench there
CACHE_KEEP = 256  # node ids kept in the file: the newest, so a long-lived cluster's restarts do not pile up
_known: dict[tuple[str, str], str] = {}  # (cluster, node id) -> that node's Python with dashbench
_gcs: dict[str, str] = {}  # a Jobs API address -> its cluster's GCS address


def python_on(address, hosts: list) -> dict[str, str]:
    """node id -> the Python with dashbench on each of `hosts` (inventory.Host); FleetError('on') naming
    a host whose Ray workers have no dashbench, with the install line."""
    override = os.environ.get(PYTHON_ENV, "").strip()
    if override:
        return {host.node_id: override for host in hosts}
    missing = [host for host in hosts if (address.text, host.node_id) not in _known]
    if missing:
        kept = _read_cache()
        for host in [h for h in missing if h.node_id in kept]:
            _known[(address.text, host.node_id)] = kept[host.node_id]
        missing = [host for host in missing if host.node_id not in kept]
    if missing:
        answers = _ask(address, [host.node_id for host in missing])
        for host in missing:
            answer = answers.get(host.node_id) or {}
            if not answer.get("python"):
                raise FleetError(
                    "cluster",
                    f"cannot ask host {host.name} which Python its Ray workers run: "
                    f"{answer.get('error') or 'no answer'}",
                )
            if not answer.get("dashbench"):
                raise FleetError(
                    "on",
                    f"host {host.name} has no dashbench in the Python its Ray workers run "
                    f"({answer['python']}): install it there ({INSTALL}) and start Ray on "
                    f"that host from that venv (.venv/bin/ray start …)",
                )
            _known[(address.text, host.node_id)] = answer["python"]
        _write_cache({host.node_id: _known[(address.text, host.node_id)] for host in missing})
    return {host.node_id: _known[(address.text, host.node_id)] for host in hosts}


def cache_path():
    """The file of hosts' answers: DASHBENCH_CACHE_DIR, else $XDG_CACHE_HOME/dashbench, else ~/.cache/dashbench."""
    from pathlib import Path

    folder = os.environ.get(CACHE_ENV, "").strip()
    if not folder:
        base = os.environ.get("XDG_CACHE_HOME", "").strip() or str(Path.home() / ".cache")
        folder = os.path.join(base, "dashbench")
    return Path(folder) / CACHE_FILE


def _read_cache() -> dict[str, str]:
    """The kept answers; none where the file is missing or unreadable (then the hosts are asked)."""
    try:
        kept = json.loads(cache_path().read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(kept, dict):
        return {}
    return {node: python for node, python in kept.items() if isinstance(node, str) and isinstance(python, str)}


def _write_cache(answers: dict[str, str]) -> None:
    """Adds `answers` to the file, written whole to a temporary file and renamed over it (processes that
    write at once each leave a whole file). A cache that cannot be written only costs the next ask."""
    import tempfile

    path = cache_path()
    kept = {node: python for node, python in _read_cache().items() if node not in answers}
    kept = dict(list({**kept, **answers}.items())[-CACHE_KEEP:])
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=path.parent, prefix=f".{CACHE_FILE}.", delete=False) as out:
            json.dump(kept, out)
    except OSError:
        return
    try:
        os.replace(out.name, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(out.name)


def _ask(address, node_ids: list[str]) -> dict:
    from pathlib import Path

    import dashbench

    driver = _gcs_address(address) if address.kind == "jobs" else address.text
    # Ray adds a driver's working folder to its workers' sys.path: from a checkout, every host would
    # seem to have dashbench. The child starts in an empty folder and finds this dashbench by PYTHONPATH.
    here = str(Path(dashbench.__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH")) if p)}
    env = client_env(env) if address.kind == "client" else env
    for attempt in range(1, (CLIENT_TRIES if address.kind == "client" else 1) + 1):
        done = _ask_once(address, [sys.executable, "-m", "dashbench.fleet.node_python", driver, *node_ids], env)
        if done.returncode == 0 or address.kind != "client" or not client_start_failed(done.stderr):
            break  # a Ray Client session the head failed to start is asked again; anything else is said
        if attempt == CLIENT_TRIES:
            raise FleetError("cluster", client_retry_line(address))
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        why = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        raise FleetError("cluster", f"cannot ask the cluster at {address} which Python its hosts run: {why}")
    return json.loads(lines[-1])


def _gcs_address(address) -> str:
    """The GCS address of a cluster known by its Jobs API: what a job's environment is given there."""
    if address.text not in _gcs:
        from dashbench.fleet import inventory

        client = inventory.jobs_client(address)
        sid = f"dashbench-probe-{uuid.uuid4().hex[:12]}"
        client.submit_job(entrypoint='echo "dashbench-gcs=$RAY_ADDRESS"', submission_id=sid, entrypoint_num_cpus=0)
        deadline = time.monotonic() + ASK_TIMEOUT_S
        while str(getattr(client.get_job_status(sid), "value", "")) not in ("SUCCEEDED", "FAILED", "STOPPED"):
            if time.monotonic() > deadline:
                raise FleetError("cluster", f"the cluster at {address} did not run a probe job in {ASK_TIMEOUT_S:g} s")
            time.sleep(0.2)
        text = client.get_job_logs(sid)
        found = re.findall(r"^dashbench-gcs=(\S+)$", text, re.MULTILINE)
        if not found:
            said = " ".join(text.split())[-300:]
            raise FleetError("cluster", f"the cluster at {address} did not say its GCS address: {said}")
        _gcs[address.text] = found[-1]
    return _gcs[address.text]


def _ask_once(address, argv: list[str], env: dict) -> subprocess.CompletedProcess:
    import tempfile

    try:
        with tempfile.TemporaryDirectory(prefix="dashbench-ask-") as empty:
            return subprocess.run(argv, capture_output=True, text=True, timeout=ASK_TIMEOUT_S, env=env, cwd=empty)
    except subprocess.TimeoutExpired:
        raise FleetError(
            "cluster", f"the cluster at {address} did not say in {ASK_TIMEOUT_S:g} s which Python its hosts run"
        ) from None


# -- the child process ------------------------------------------------------------------------------


def _here() -> dict:
    """Run on the host (pickled by value: a worker without dashbench can still run it)."""
    import importlib
    import sys as worker_sys

    try:
        importlib.import_module("dashbench")
        has, error = True, None
    except Exception as exc:  # noqa: BLE001 - any reason dashbench does not import there is a no
        has, error = False, f"{type(exc).__name__}: {exc}"
    return {"python": worker_sys.executable, "dashbench": has, "error": error}


def main(argv: list[str]) -> int:
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    driver, node_ids = argv[0], argv[1:]
    ray.init(address=driver, logging_level="ERROR", log_to_driver=False, configure_logging=False)
    ask = ray.remote(num_cpus=0, max_retries=0)(_here)
    refs = {
        node: ask.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False)).remote()
        for node in node_ids
    }
    answers = {}
    for node, ref in refs.items():
        try:
            answers[node] = ray.get(ref, timeout=ASK_TIMEOUT_S - 30)
        except Exception as exc:  # noqa: BLE001 - said per host by the caller
            answers[node] = {"error": " ".join(str(exc).split())[:300] or type(exc).__name__}
    print(json.dumps(answers), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
