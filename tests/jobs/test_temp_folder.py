"""A run's temporary files (TensorFlow's autograph writes one per converted function, removed only by an
atexit hook) live in a folder of the run's own, removed at its end — also when its guard ends the
process with os._exit, and when its launcher reaps a run killed with SIGKILL (jobs/temp_folder.py)."""

import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from dashbench.core.spec import RunSpec
from dashbench.jobs import queue, runner, temp_folder
from dashbench.store import Store

TINY = [
    "--model",
    "conv2d",
    "--image-size",
    "8",
    "--width",
    "2",
    "--device",
    "cpu",
    "--backend",
    "tensorflow",
    "--batch-size",
    "4",
    "--steps",
    "2",
    "--warmup",
    "1",
]
AUTOGRAPH = "__autograph_generated_file*.py"

# The real engine, then a main thread stuck in C code (SIGTERM blocked there): only the guard can end
# the run, with os._exit once DASHBENCH_CANCEL_GRACE_S has passed. The mark file names the run's TMPDIR.
STUCK_AFTER_REAL_RUN = textwrap.dedent("""
    import os, signal, sys, time
    from pathlib import Path
    from dashbench.cli import main
    from dashbench.engine import loop

    real_run = loop.run

    def run(spec, on_event=None):
        result = real_run(spec, on_event=on_event)
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
        Path(os.environ["STUCK_MARK"]).write_text(os.environ["TMPDIR"])
        time.sleep(120)
        return result

    loop.run = run
    sys.exit(main(sys.argv[1:]))
""")


def test_a_real_tensorflow_run_ended_by_its_guard_leaves_no_temporary_file(tmp_path):
    tmp, mark, db = tmp_path / "tmp", tmp_path / "stuck", tmp_path / "runs.sqlite"
    tmp.mkdir()
    script = tmp_path / "stuck_run.py"
    script.write_text(STUCK_AFTER_REAL_RUN)
    env = {k: v for k, v in os.environ.items() if k != "KERAS_BACKEND"}
    env.update(
        TMPDIR=str(tmp), STUCK_MARK=str(mark), DASHBENCH_CANCEL_GRACE_S="1", DASHBENCH_CPU_PEAKS='{"float32": 0.2}'
    )  # given by hand: no CPU probe
    proc = subprocess.Popen(
        [sys.executable, str(script), "run", *TINY, "--db", str(db), "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        deadline = time.monotonic() + 300  # TensorFlow's import and a compile on a loaded 2-core machine
        while not mark.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert mark.exists(), proc.communicate(timeout=60)[1][-3000:]
        own = Path(mark.read_text())
        assert own.parent == tmp and own.name.startswith(temp_folder.PREFIX)
        assert list(own.glob(AUTOGRAPH)), sorted(p.name for p in own.iterdir())  # TensorFlow wrote its files there
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 128 + signal.SIGTERM, err[-3000:]
    assert "its process was ended" in err  # the guard's os._exit, not the main thread's way out
    assert sorted(tmp.iterdir()) == []
    with Store(db) as store:
        assert store.runs()["status"].tolist() == ["cancelled"]


def test_a_real_run_that_ends_normally_removes_its_folder_at_once(tmp_path, monkeypatch):
    """In this process: its atexit hook comes only when pytest ends, yet the run's files are gone now."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    monkeypatch.setenv("DASHBENCH_CPU_PEAKS", '{"float32": 0.2}')
    seen = []

    def on_event(event):
        if event.get("event") == "sample":
            seen.append((tempfile.gettempdir(), os.environ["TMPDIR"]))

    spec = RunSpec(model="conv2d", batch_size=4, device="cpu", image_size=8, width=2, steps=2, warmup=1)
    result = runner.execute(spec, record=False, on_event=on_event)
    assert result.samples > 0
    own = Path(seen[0][0])
    assert own.parent == tmp and own.name.startswith(temp_folder.PREFIX) and seen[0][1] == str(own)
    assert sorted(tmp.iterdir()) == []
    assert tempfile.gettempdir() == str(tmp) and os.environ["TMPDIR"] == str(tmp)  # given back as they were


def test_no_folder_to_be_had_leaves_the_default_and_the_run_goes_on(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(tempfile, "mkdtemp", refuse)
    with temp_folder.own_folder() as own:
        assert own is None and tempfile.gettempdir() == str(tmp_path)


# A run process that writes a temporary file in its own folder, as a run does, and waits to be killed.
WRITES_AND_WAITS = textwrap.dedent("""
    import tempfile, time
    from dashbench.jobs import temp_folder

    with temp_folder.own_folder():
        with tempfile.NamedTemporaryFile(prefix="__autograph_generated_file", suffix=".py", delete=False) as f:
            f.write(b"x = 1")
        time.sleep(120)
""")


def test_the_queue_removes_the_folder_of_a_run_killed_with_sigkill(tmp_path, monkeypatch):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    script = tmp_path / "writes_and_waits.py"
    script.write_text(WRITES_AND_WAITS)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    monkeypatch.setattr(queue, "RUN_COMMAND", [sys.executable, str(script)])
    db = tmp_path / "q.sqlite"
    run_id = queue.submit(RunSpec(model="conv2d", batch_size=4, device="cpu", image_size=8, width=2), db)
    deadline = time.monotonic() + 60
    while not list(tmp.glob(f"*/{AUTOGRAPH}")) and time.monotonic() < deadline:
        time.sleep(0.1)
    with Store(db) as store:
        pid = store.get_run(run_id)["pid"]
    assert [p.parent.name.split("-")[2] for p in tmp.glob(f"*/{AUTOGRAPH}")] == [str(pid)]  # the run's own folder
    other = tmp / f"{temp_folder.PREFIX}{pid}0-another-run"  # another process's: left alone
    other.mkdir()
    os.kill(pid, signal.SIGKILL)
    while time.monotonic() < deadline:
        queue.pump(db)  # reaps the child, then removes its folder
        with Store(db) as store:
            if store.get_run(run_id)["status"] == "interrupted":
                break
        time.sleep(0.1)
    assert sorted(tmp.iterdir()) == [other]


def test_the_test_session_sends_every_temporary_file_to_a_folder_of_its_own(tmp_path):
    """tests/conftest.py: this process (an xdist worker too) and every process it starts write there;
    pytest's own tmp_path folders stay where pytest keeps them."""
    folder = os.environ["DASHBENCH_TESTS_TMPDIR"]
    assert tempfile.gettempdir() == os.environ["TMPDIR"] == folder and Path(folder).name.startswith("dbt-")
    assert Path(folder) not in tmp_path.parents
    child = subprocess.run(
        [sys.executable, "-c", "import tempfile; print(tempfile.gettempdir())"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert child.stdout.strip() == folder


def test_a_multi_host_runs_ray_task_removes_the_folder_of_its_process_killed_with_sigkill(tmp_path, monkeypatch):
    """fleet/slices.py's task runs one host's process and waits for it (called here without Ray)."""
    from dashbench.fleet import slices

    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    script = tmp_path / "killed.py"
    script.write_text(
        WRITES_AND_WAITS.replace("time.sleep(120)", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)")
    )
    assert slices._run_here([sys.executable, str(script)], {}, 1.0) == -signal.SIGKILL
    assert sorted(tmp.iterdir()) == []
