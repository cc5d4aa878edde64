"""An out-of-memory end has a name: status `oom`, with what the run tried to allocate where the
framework says so (TensorFlow's ResourceExhaustedError, XLA's RESOURCE_EXHAUSTED, MemoryError, the
host-memory guard, the kernel's OOM kill), exit code 3 — never `failed` with a traceback."""

import json
import os
import signal
import subprocess
import sys

import pytest

from dashbench.hardware import host
from dashbench.jobs import oom, queue, runner
from dashbench.store import FINAL, STATUSES, TERMINAL, Store


class ResourceExhaustedError(Exception):
    """TensorFlow's, by name (this module needs no TensorFlow)."""


class XlaRuntimeError(RuntimeError):
    pass


TF_TEXT = """Graph execution error:

Detected at node StatefulPartitionedCall defined at (most recent call last):
  File "/x/loop.py", line 10, in run

  File "/x/loop.py", line 20, in _measure

OOM when allocating tensor with shape[4096,14,14,64] and type float on /job:localhost/replica:0/task:0/device:CPU:0 by allocator cpu
\t [[{{node conv2d_1/Conv2D}}]]
Hint: If you want to see a list of allocated tensors when OOM happens, add report_tensor_allocations_upon_oom."""


def test_tensorflow_oom_names_the_tensor_it_tried_to_allocate():
    exc = ResourceExhaustedError(TF_TEXT)
    assert oom.is_oom(exc)
    text = runner.error_text(exc)
    assert text.startswith("out of memory (ResourceExhaustedError: OOM when allocating tensor")
    assert text.endswith("tried to allocate a tensor of shape [4096,14,14,64] (float)")
    assert "File " not in text and "\n" not in text


def test_xla_resource_exhausted_and_memory_error_are_oom():
    xla = XlaRuntimeError("RESOURCE_EXHAUSTED: Out of memory while trying to allocate 17179869184 bytes.")
    assert oom.is_oom(xla)
    assert runner.error_text(xla).endswith("tried to allocate 17179869184 bytes")
    assert oom.is_oom(MemoryError())
    assert runner.error_text(MemoryError()) == "out of memory (MemoryError)"
    assert oom.tried("Out of memory allocating 2.50GiB") == "2.50GiB"
    assert not oom.is_oom(ValueError("Received a label value of 200 which is outside the valid range"))
    assert not oom.is_oom(RuntimeError("INVALID_ARGUMENT: shapes differ"))


def test_oom_is_a_final_status_the_store_takes(tmp_path):
    assert "oom" in TERMINAL and "oom" in FINAL and "oom" in STATUSES
    with Store(tmp_path / "s.db") as store:
        from dashbench.core.spec import RunSpec

        run_id = store.create_run(RunSpec(model="conv2d", batch_size=8), status="running", pid=1, host="h")
        assert store.finish_run(run_id, "oom", error="out of memory (MemoryError)")
        assert not store.finish_run(run_id, "failed", error="later")  # an end stays the end
        assert store.get_run(run_id)["status"] == "oom"
        assert list(store.runs(status=["oom"])["run_id"]) == [run_id]


def test_a_sigkill_with_the_cgroup_oom_kill_counter_grown_is_the_kernels_oom(monkeypatch):
    row = {"cancel_requested": 0, "log_path": None}
    monkeypatch.setattr(host, "oom_kills", lambda: 5)
    status, error = queue._verdict(-signal.SIGKILL, row, oom_kills_at_start=4)
    assert status == "oom" and "the kernel's OOM killer" in error
    assert queue._verdict(-signal.SIGKILL, row, oom_kills_at_start=5)[0] == "interrupted"  # another kill
    assert queue._verdict(-signal.SIGKILL, row, oom_kills_at_start=None)[0] == "interrupted"  # not known
    assert queue._verdict(-signal.SIGSEGV, row, oom_kills_at_start=4)[0] == "failed"


# The run command behind a gc callback of the kind JAX registers (_xla_gc_callback): Python that a
# collection runs, where an exception raised is only printed ("Exception ignored in …") and the
# program goes on. The first collection after the guard starts holds the main thread until the
# guard has asked it to stop, so that the stop is raised inside the callback, and lost there.
LOST_STOP = """
import gc, sys, threading, time
from dashbench.cli import main
from dashbench.jobs import runner, run_guard, run_signals

held = []

def callback(phase, info):
    if held or phase != "start" or threading.current_thread() is not threading.main_thread():
        return
    if not any(t.name == "dashbench-run-guard" for t in threading.enumerate()):
        return
    held.append(phase)
    until = time.monotonic() + 60
    while not run_signals.oom_message and time.monotonic() < until:
        time.sleep(0.01)
    time.sleep(0.5)

gc.callbacks.append(callback)
sys.exit(main())
"""


# The same, with a guard that never asks again: a short run ends before any ask would come, and its lost
# stop is raised at the run's end instead of the run being written done.
NEVER_ASKED_AGAIN = LOST_STOP.replace(
    "held = []\n", "held = []\nrun_signals.ASK_AGAIN_S = run_guard.ASK_AGAIN_S = 1000.0\n"
)


@pytest.mark.parametrize("backend, script", [("tensorflow", LOST_STOP), ("jax", LOST_STOP), ("jax", NEVER_ASKED_AGAIN)])
def test_a_capped_run_ends_oom_on_both_backends(tmp_path, backend, script):
    """A cap the test sets for the run process (the guard's DASHBENCH_MEMORY_LIMIT_GB, below what
    the framework alone holds): the run ends `oom`, exit 3, its cause in the row and the JSON —
    stopped by its own main thread although the guard's first ask is lost in a gc callback (the
    grace before the guard's own end is longer than the run: without the ask repeated it ends `done`)."""
    db = tmp_path / "runs.db"
    env = {k: v for k, v in os.environ.items() if k not in ("KERAS_BACKEND", host.BUDGET_ENV)}
    env.update(
        DASHBENCH_MEMORY_LIMIT_GB="0.1",
        DASHBENCH_MEMORY_GRACE_S="120",
        DASHBENCH_LOCK_DIR=str(tmp_path / "locks"),
        DASHBENCH_CPU_PROBE_SIZE="256",
    )
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            script,
            "run",
            "--model",
            "conv2d",
            "--batch-size",
            "8",
            "--image-size",
            "8",
            "--width",
            "2",
            "--steps",
            "2",
            "--warmup",
            "1",
            "--device",
            "cpu",
            "--backend",
            backend,
            "--db",
            str(db),
            "--json",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == oom.EXIT_CODE, done.stderr[-2000:]
    out = json.loads(done.stdout)
    assert out["status"] == "oom"
    assert "allowed by DASHBENCH_MEMORY_LIMIT_GB" in out["error"]
    assert "error: run out of memory: out of host memory" in done.stderr
    with Store(db) as store:
        row = store.get_run(out["run_id"])
    assert row["status"] == "oom" and row["error"] == out["error"]


def test_the_results_status_filter_and_list_offer_oom(tmp_path, capsys):
    from dashbench.cli import main
    from dashbench.core.spec import RunSpec

    db = tmp_path / "s.db"
    with Store(db) as store:
        run_id = store.create_run(RunSpec(model="conv2d", batch_size=8), status="running", pid=1, host="h")
        store.finish_run(run_id, "oom", error="out of memory (MemoryError)")
        assert "oom" in store.facets()["status"]  # the Results page's status filter lists it
    assert main(["list", "--db", str(db), "--status", "oom", "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["status"] == "oom" and row["error"] == "out of memory (MemoryError)"


def test_the_guards_last_words_reach_the_user_while_a_compile_is_silenced():
    """The guard ends a run stuck in a compile whose native output is silenced (fd 2 → a scratch file):
    its `error: run out of memory: …` line must still reach the user's stderr."""
    code = (
        "import os\nfrom dashbench.engine import frameworks\nfrom dashbench.jobs import run_guard\n"
        "with frameworks.native_stderr_silenced():\n"
        "    os.write(2, b'native noise\\n')\n"
        "    run_guard.say_past_silencing('error: run out of memory: out of host memory (seen)')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "error: run out of memory: out of host memory (seen)" in done.stderr
    assert "native noise" not in done.stderr  # the silencing itself still holds
