"""What going through a Ray cluster costs a run, on this machine.

A one-node Ray cluster (a head declaring one GPU, so the run's place is a "GPU host"; tests/fixtures/ray_cluster.py
starts it, object store capped) and a PostgreSQL team store (tests/fixtures/pg_server.py). The same tiny run is
launched from the command line, alternately:

  local   — `python -m dashbench run … --db <team store>`: this process runs it
  cluster — `python -m dashbench run … --cluster <Jobs API> --on gpu-1 --db <team store>`: a Ray job runs
            `dashbench run --run-id` on the node, this process follows it

and timed from the CLI call to its first measured step (the first `step 1/` progress line) and to its
exit. A trivial Ray job (`true`, pinned to the node) timed from submit to SUCCEEDED is the floor of the
per-run cost. Medians over --repeats, with the load average before and after (the machine is shared).

    python bench/fleet_overhead.py                  # writes docs/PERFORMANCE.md between <!-- fleet --> markers
    python bench/fleet_overhead.py --repeats 5 --no-write
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from docs_block import write_block  # bench/, on sys.path when a script here runs

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

TINY = [
    "run",
    "--model",
    "fashion_mnist_cnn",
    "--image-size",
    "8",
    "--width",
    "4",
    "--batch-size",
    "8",
    "--steps",
    "3",
    "--warmup",
    "1",
    "--device",
    "cpu",
]


def timed_cli(argv: list[str], env: dict, cluster=None) -> dict:
    """Seconds from the call to the first `step 1/` line on stderr and to the exit; the exit code; the CPU
    seconds of the command's own process tree, and of the Ray cluster's processes (the run's included)."""
    import resource

    sampler = _Sampler(cluster) if cluster else None
    own = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "dashbench", *argv],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
    )
    first, tail = None, []
    for line in proc.stderr:
        if first is None and line.strip().startswith("step 1/"):
            first = time.monotonic() - start
        tail = (tail + [line.rstrip()])[-5:]
    code = proc.wait()
    total = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    ray_cpu = sampler.stop() if sampler else 0.0
    if code:
        print(f"exit {code}: {' | '.join(tail)}", file=sys.stderr)
    return {
        "first_step_s": first,
        "total_s": total,
        "code": code,
        "cpu_cli_s": after.ru_utime + after.ru_stime - own.ru_utime - own.ru_stime,
        "cpu_ray_s": ray_cpu,
    }


class _Sampler:
    """CPU seconds the cluster's processes (the run's on the cluster included) spend while a command
    runs: each process's own CPU time read every SAMPLE_S, its last reading kept; processes that come
    and go (the job's supervisor, the run) lose at most their last SAMPLE_S."""

    SAMPLE_S = 0.25

    def __init__(self, cluster):
        import threading

        self.cluster, self.last, self.done = cluster, {}, threading.Event()
        self.before = self._read()
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _read(self) -> dict:
        import psutil

        out = {}
        for pid in self.cluster.pids():
            try:
                proc = psutil.Process(pid)
                t = proc.cpu_times()
                out[(pid, proc.create_time())] = t.user + t.system
            except psutil.Error:
                continue
        return out

    def _loop(self) -> None:
        while not self.done.wait(self.SAMPLE_S):
            self.last.update(self._read())

    def stop(self) -> float:
        self.done.set()
        self.thread.join()
        self.last.update(self._read())
        return sum(cpu - self.before.get(key, 0.0) for key, cpu in self.last.items())


def trivial_jobs(address: str, node_id: str, n: int) -> list[float]:
    from ray.job_submission import JobSubmissionClient

    client = JobSubmissionClient(address)
    out = []
    for _ in range(n):
        start = time.monotonic()
        job = client.submit_job(
            entrypoint="true",
            submission_id=f"bench-{uuid.uuid4().hex[:8]}",
            entrypoint_num_gpus=1,
            entrypoint_label_selector={"ray.io/node-id": node_id},
        )
        while str(client.get_job_status(job).value) not in ("SUCCEEDED", "FAILED", "STOPPED"):
            time.sleep(0.05)
        out.append(time.monotonic() - start)
    return out


def measure(repeats: int) -> dict:
    """Both ways, alternately, `repeats` times each; then the trivial jobs."""
    from fixtures import pg_server, ray_cluster

    load_before = os.getloadavg()
    folder = Path(tempfile.mkdtemp(prefix="dbray-"))
    cluster = ray_cluster.RayTestCluster(folder, uuid.uuid4().hex)
    server = pg_server.start_server()
    locks = Path(tempfile.mkdtemp(prefix="dblocks-"))  # no wait for other people's runs' device locks
    try:
        t0 = time.monotonic()
        cluster.start_node("gpu-1", head=True, num_gpus=1, resources={"accelerator_type:H200": 1})
        head_up = time.monotonic() - t0
        with server.connect() as conn:
            conn.execute("CREATE DATABASE bench")
        url = server.url("bench")
        env = {**os.environ, "DASHBENCH_LOCK_DIR": str(locks), "RAY_ADDRESS": ""}
        from ray.util.state import list_nodes

        node_id = list_nodes(address=cluster.dashboard_url)[0].node_id
        rows = {"local": [], "cluster": []}
        for _ in range(repeats):
            rows["local"].append(timed_cli([*TINY, "--db", url], env, cluster))
            rows["cluster"].append(
                timed_cli([*TINY, "--db", url, "--cluster", cluster.dashboard_url, "--on", "gpu-1"], env, cluster)
            )
        jobs = trivial_jobs(cluster.dashboard_url, node_id, max(3, repeats))
    finally:
        cluster.stop()
        server.stop()
        shutil.rmtree(locks, ignore_errors=True)
    return {"rows": rows, "jobs": jobs, "head_up_s": head_up, "load": (load_before, os.getloadavg())}


def report(found: dict) -> str:
    def med(kind, key):
        values = [r[key] for r in found["rows"][kind] if r[key] is not None]
        return statistics.median(values) if values else float("nan")

    n = len(found["rows"]["local"])
    idle = med("local", "cpu_ray_s") * med("cluster", "total_s") / med("local", "total_s")
    ray_side = med("cluster", "cpu_ray_s") - idle - med("local", "cpu_cli_s")  # the run's own CPU, as run locally
    cpu_extra = med("cluster", "cpu_cli_s") + med("cluster", "cpu_ray_s") - med("local", "cpu_cli_s") - idle
    codes = {kind: [r["code"] for r in rows] for kind, rows in found["rows"].items()}
    (b1, b5, _), (a1, a5, _) = found["load"]
    lines = [
        "## The fleet: a run through a Ray cluster against the local queue (`bench/fleet_overhead.py`)",
        "",
        f"One tiny run (fashion_mnist_cnn, 8×8 images, width 4, batch 8, 1 warm-up + 3 steps, CPU), launched "
        f"{n} times each way from the command line, alternately, into a PostgreSQL team store; a one-node Ray "
        f"cluster on this machine (the head declaring one GPU, the run's place). Medians. Load average "
        f"(1/5 min) {b1:.1f}/{b5:.1f} before, {a1:.1f}/{a5:.1f} after, on the 2-core machine that other "
        f"people's tests and benches share: the absolute seconds are inflated by it, the difference less so.",
        "",
        "| launched | CLI call → first measured step | CLI call → exit | CPU s: the command's processes | "
        "CPU s: Ray's processes (the run's, on the cluster) | exit codes |",
        "|---|---|---|---|---|---|",
        f"| local (`run --db`) | {med('local', 'first_step_s'):.1f} s | {med('local', 'total_s'):.1f} s | "
        f"{med('local', 'cpu_cli_s'):.1f} | {med('local', 'cpu_ray_s'):.1f} (idle cluster) | {codes['local']} |",
        f"| cluster (`run --cluster --on gpu-1 --db`) | {med('cluster', 'first_step_s'):.1f} s | "
        f"{med('cluster', 'total_s'):.1f} s | {med('cluster', 'cpu_cli_s'):.1f} | {med('cluster', 'cpu_ray_s'):.1f} | "
        f"{codes['cluster']} |",
        "",
        f"Per-run cost of going through Ray: {med('cluster', 'first_step_s') - med('local', 'first_step_s'):+.1f} s "
        f"to the first measured step and {med('cluster', 'total_s') - med('local', 'total_s'):+.1f} s to the end "
        f"(median against median); in CPU, {cpu_extra:+.1f} CPU s per run (the command's and Ray's processes "
        f"together, the run's included, the idle cluster's own CPU over the run's time taken off): the waiting "
        f"command {med('cluster', 'cpu_cli_s'):.1f} CPU s (importing Ray, reading the cluster to place the run, "
        f"polling the job's log and status every 0.5 s), Ray's processes beyond the run {ray_side:.1f} CPU s (the "
        f"job's supervisor actor started for it, the dashboard answering the polls, the runtime-env agent). On "
        f"this 2-core machine at this load a CPU second costs several seconds of wall clock, which is where the "
        f"extra seconds go. Its floor, a trivial Ray job (`true`, one GPU, pinned to the node) from submit "
        f"to SUCCEEDED: median {statistics.median(found['jobs']):.2f} s over {len(found['jobs'])} "
        f"(min {min(found['jobs']):.2f}, max {max(found['jobs']):.2f}): the job supervisor actor's start and "
        f"Ray's status polling. The `run --cluster` process adds its own start (Ray's client import, reading the "
        f"cluster's nodes to place the run, ~0.5 s) and follows at 0.5 s polls. Starting the head took "
        f"{found['head_up_s']:.0f} s (once per cluster, not per run).",
    ]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/PERFORMANCE.md as it is")
    args = parser.parse_args()
    text = report(measure(args.repeats))
    print(text)
    if not args.no_write:
        write_block(ROOT / "docs" / "PERFORMANCE.md", "fleet", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
