"""The memory a run may use is the least of the host's free memory, the cgroup's limit, the
process's RLIMIT_AS/RLIMIT_DATA and DASHBENCH_MEMORY_BUDGET_GB; the pre-run check names the bound."""

import json
import os
import resource
import subprocess
import sys

import pytest

from dashbench.core.spec import RunSpec, SpecError
from dashbench.hardware import host
from dashbench.workloads import memory

GB = host.GB


@pytest.fixture
def cgroup(tmp_path, monkeypatch):
    """A cgroup folder of our own, in place of this process's."""
    folder = tmp_path / "cgroup"
    folder.mkdir()
    monkeypatch.setattr(host, "_cgroup_dirs", lambda: [str(folder)])
    monkeypatch.setattr(host, "host_memory", lambda: (64 * GB, 128 * GB))
    monkeypatch.setattr(host, "_rlimits", lambda: [])
    monkeypatch.delenv(host.BUDGET_ENV, raising=False)
    return folder


def test_the_cgroup_v2_limit_bounds_the_budget(cgroup):
    (cgroup / "memory.max").write_text("3000000000\n")
    (cgroup / "memory.current").write_text("1000000000\n")
    room, bound = host.host_budget()
    assert room == 2 * GB
    assert "cgroup" in bound and "3.0 GB" in bound
    assert host.host_capacity() == 3 * GB


def test_cgroup_v1_no_limit_and_v2_max_bound_nothing(cgroup):
    (cgroup / "memory.limit_in_bytes").write_text("9223372036854771712\n")
    assert host.host_budget() == (64 * GB, "its free memory, MemAvailable")
    (cgroup / "memory.max").write_text("max\n")
    assert host.host_budget()[0] == 64 * GB


def test_the_oom_kill_counter_is_read_from_v2_and_v1_files(cgroup):
    assert host.oom_kills() is None
    (cgroup / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 3\n")
    assert host.oom_kills() == 3
    (cgroup / "memory.events").write_text("low 0\nhigh 0\nmax 4\noom 2\noom_kill 5\n")
    assert host.oom_kills() == 5


def test_an_rlimit_or_the_env_budget_is_the_least_bound(cgroup, monkeypatch):
    monkeypatch.setattr(host, "_rlimits", lambda: [("RLIMIT_AS", 8 * GB, 1 * GB), ("RLIMIT_DATA", 20 * GB, None)])
    room, bound = host.host_budget("tensorflow")
    assert room == 7 * GB - host.ADDRESS_SPACE_EXTRA["tensorflow"] and "RLIMIT_AS" in bound
    assert "address space" in bound
    assert host.host_budget("jax")[0] == 7 * GB - host.ADDRESS_SPACE_EXTRA["jax"]
    monkeypatch.setenv(host.BUDGET_ENV, "2.5")
    assert host.host_budget() == (2.5 * GB, f"{host.BUDGET_ENV}=2.5")
    spec = RunSpec(model="fashion_mnist_cnn", batch_size=4096, device="cpu")
    with pytest.raises(SpecError) as refused:
        memory.check(spec)
    assert refused.value.field == "batch_size" and host.BUDGET_ENV in str(refused.value)


@pytest.mark.parametrize(
    "cap,model",
    [
        # An estimate that read the host's free memory only passed it; the run then hit TensorFlow's OOM.
        (4_000_000_000, ["--model", "fashion_mnist_cnn", "--batch-size", "4096"]),
        # Its estimate (2.7 GB) fit the 3.2 GB of address space left, and TensorFlow segfaulted compiling it:
        # the address space a framework maps beyond its data counts under RLIMIT_AS.
        (3_500_000_000, ["--model", "conv2d", "--image-size", "64", "--width", "32", "--batch-size", "4000"]),
    ],
)
def test_a_run_under_a_small_rlimit_as_is_refused_before_it_starts(tmp_path, cap, model):

    def capped():
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    db = tmp_path / "runs.db"
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    env.pop(host.BUDGET_ENV, None)
    done = subprocess.run(
        [sys.executable, "-m", "dashbench", "run", *model, "--device", "cpu", "--db", str(db), "--json"],
        capture_output=True,
        text=True,
        preexec_fn=capped,
        env=env,
        timeout=300,
    )
    assert done.returncode == 2, done.stderr
    out = json.loads(done.stdout)
    assert out["status"] == "invalid" and out["field"] == "batch_size"
    assert "RLIMIT_AS" in out["error"] and f"{cap / 1e9:.1f} GB" in out["error"]
    assert "tensorflow" not in done.stderr.lower()  # refused before the framework started
