"""The job runner with real processes: per-device queue, cancel, crashes, app restarts, sweeps.

Most tests put a stand-in engine behind the run command (a small script that reads its spec from
the row and goes through the real runner and store, but sleeps instead of training), so they pay no
TensorFlow import; one test submits a real tiny run through the real `python -m dashbench run`.
"""

import json
import multiprocessing
import os
import re
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from fixtures.job_waits import FAKE_RUN, status, wait_until

from dashbench.cli import main
from dashbench.core.spec import RunSpec
from dashbench.jobs import queue
from dashbench.results.result import RunResult
from dashbench.store import Store

# On JAX (a third of TensorFlow's start-up; the queue does not depend on the backend).
TINY = dict(model="conv2d", image_size=8, width=2, device="cpu", backend="jax")


@pytest.fixture
def fake(tmp_path, monkeypatch):
    script = tmp_path / "fake_run.py"
    script.write_text(FAKE_RUN)
    monkeypatch.setattr(queue, "RUN_COMMAND", [sys.executable, str(script)])
    yield tmp_path / "queue.sqlite"
    _stop_everything(tmp_path / "queue.sqlite")


def _stop_everything(db):
    """No test leaves a run process behind."""
    if not db.exists():
        return
    with Store(db) as store:
        for run_id in store.runs(status=["queued", "running"])["run_id"]:
            queue.cancel(run_id, db, wait_s=5)


def spec(batch=4, device="cpu", ms=0, steps=2, **kw) -> RunSpec:
    return RunSpec(model="conv2d", batch_size=batch, device=device, steps=steps, seed=ms, **kw)


# A run command that only writes down the options it was started with.
ARGV_RUN = "import json, sys; open(sys.argv[1], 'w').write(json.dumps(sys.argv[2:]))"


@pytest.fixture
def validations(monkeypatch):
    """Every RunSpec validation in this process, counted."""
    seen = []
    validate = RunSpec.validate

    def counted(self):
        seen.append(self)
        return validate(self)

    monkeypatch.setattr(RunSpec, "validate", counted)
    return seen


def test_the_run_process_gets_only_the_run_id_and_runs_the_stored_spec(tmp_path, monkeypatch, validations):
    from dashbench.engine import loop
    from dashbench.views.run import form as run_form

    argv_file = tmp_path / "argv.json"
    monkeypatch.setattr(queue, "RUN_COMMAND", [sys.executable, "-c", ARGV_RUN, str(argv_file)])
    db = tmp_path / "argv.sqlite"
    # In through the Run page's form, with a label that once broke the child's command line.
    state = run_form.run_form_defaults(["cpu"]) | {
        "run_model": "bilstm",
        "run_batch_size": 8,
        "run_xla": True,
        "run_seq_len": 16,
        "run_width": 8,
        "run_steps": 4,
        "run_steps_per_loop": 2,
        "run_label": "--no-store",
    }
    (original,), _ = run_form.specs_from_form(state)
    run_id = queue.submit(original, db)
    assert len(validations) == 1  # where it entered; the queue, the store and the launch add none
    deadline = time.monotonic() + 30
    while not argv_file.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    argv = json.loads(argv_file.read_text())
    assert argv == ["--run-id", run_id, "--db", str(db.resolve()), "--json"]

    # The child's side, in this process: the real `run` with those options and a stand-in engine.
    validations.clear()
    measured = []

    def engine(spec, on_event=None):
        measured.append(spec)
        return RunResult(
            model=spec.model,
            device="cpu",
            accelerator="CPU",
            accelerator_count=1,
            examples_per_sec=1.0,
            unit="tokens",
            flags=[],
            samples=1,
        )

    monkeypatch.setattr(loop, "run", engine)
    assert main(["run", *argv]) == 0
    assert measured == [original] and len(validations) == 1  # read from the row, validated once
    with Store(db) as store:
        row = store.get_run(run_id)
    assert row["status"] == "done" and row["label"] == "--no-store" and row["spec"] == original.to_dict()


def test_a_label_like_an_option_round_trips_through_a_run_process(fake):
    run_id = queue.submit(spec(label="--no-store"), fake)
    wait_until(fake, lambda: status(fake, run_id) not in ("queued", "running"))
    with Store(fake) as store:
        row = store.get_run(run_id)
    assert row["status"] == "done" and row["label"] == "--no-store" and row["spec"]["label"] == "--no-store"
    assert row["result"].examples_per_sec == 4000.0


def test_one_run_per_device_and_the_queue_moves_on(fake):
    db = fake
    first = queue.submit(spec(ms=40, steps=10), db)
    second = queue.submit(spec(), db)
    other_device = queue.submit(spec(device="gpu"), db)
    assert status(db, first) == "running" and status(db, second) == "queued"
    assert status(db, other_device) in ("running", "done")  # another device: no need to wait
    assert queue.pump(db) == [] or status(db, first) != "running"
    wait_until(db, lambda: all(status(db, r) == "done" for r in (first, second, other_device)))
    with Store(db) as store:
        a, b = store.get_run(first), store.get_run(second)
        assert b["started_at"] >= a["finished_at"]  # strictly one after the other on one device
        assert a["result"].examples_per_sec == 4000.0 and len(store.samples(first)) == 10
        assert os.path.exists(a["log_path"])


def test_progress_reports_fraction_samples_and_queue_position(fake):
    db = fake
    slow = queue.submit(spec(ms=50, steps=40), db)
    waiting = queue.submit(spec(batch=8), db)
    wait_until(db, lambda: queue.progress(slow, db)["steps_done"] >= 3)
    now = queue.progress(slow, db)
    assert now["status"] == "running" and 0 < now["fraction"] < 1
    assert now["steps_total"] == 42 and now["examples_per_sec_live"] > 0 and len(now["samples"]) >= 3
    assert queue.progress(waiting, db)["queue_position"] == 2
    wait_until(db, lambda: status(db, waiting) == "done", timeout=30)
    done = queue.progress(slow, db)
    assert done["fraction"] == 1.0 and done["result"].examples_per_sec == 4000.0


def test_cancel_running_and_queued_runs(fake):
    db = fake
    running = queue.submit(spec(ms=100, steps=300), db)
    after = queue.submit(spec(), db)
    never = queue.submit(spec(batch=8), db)
    assert queue.cancel(never, db) == "cancelled"  # queued: cancelled at once, nothing started
    wait_until(db, lambda: queue.progress(running, db)["steps_done"] >= 1)
    assert queue.cancel(running, db, wait_s=15) == "cancelled"
    with Store(db) as store:
        run = store.get_run(running)
        assert "SIGTERM" in run["error"] and len(store.samples(running)) >= 1
        assert store.get_run(never)["started_at"] is None and store.get_run(never)["pid"] is None
    wait_until(db, lambda: status(db, after) == "done")  # the device was freed for the next run
    assert status(db, never) == "cancelled"


def test_failures_and_crashes_are_recorded_and_the_queue_goes_on(fake):
    db = fake
    oom = queue.submit(spec(batch=13), db)
    crash = queue.submit(spec(batch=17), db)
    fine = queue.submit(spec(batch=8), db)
    wait_until(db, lambda: status(db, fine) == "done")
    with Store(db) as store:
        assert store.get_run(oom)["status"] == "failed"
        assert store.get_run(oom)["error"] == "RuntimeError: out of memory (stand-in)"
        assert store.get_run(crash)["status"] == "failed"
        assert "exited with code 3 before recording a result" in store.get_run(crash)["error"]


def test_killed_run_is_interrupted(fake):
    db = fake
    victim = queue.submit(spec(ms=100, steps=300), db)
    wait_until(db, lambda: queue.progress(victim, db)["steps_done"] >= 1)
    with Store(db) as store:
        os.kill(store.get_run(victim)["pid"], signal.SIGKILL)
    wait_until(db, lambda: status(db, victim) != "running")
    with Store(db) as store:
        run = store.get_run(victim)
        assert run["status"] == "interrupted" and "SIGKILL" in run["error"]


def test_runs_survive_an_app_restart_and_the_queue_resumes(fake):
    db = fake
    # The "app" is a separate process that queues two runs and exits while the first is going.
    app = textwrap.dedent(f"""
        import sys
        from dashbench.jobs import queue
        from dashbench.core.spec import RunSpec
        queue.RUN_COMMAND = {queue.RUN_COMMAND!r}
        for ms in (30, 0):
            print(queue.submit(RunSpec(model="conv2d", batch_size=4, device="cpu", steps=20, seed=ms), {str(db)!r}))
    """)
    out = subprocess.run([sys.executable, "-c", app], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    first, second = out.stdout.split()
    assert status(db, first) in ("running", "done") and status(db, second) == "queued"
    # The restarted app (this process) knows nothing of the first process, yet both land.
    wait_until(db, lambda: status(db, first) == "done" and status(db, second) == "done")


def _pump_at_once(db, barrier, results):
    barrier.wait()
    results.put(len(queue.pump(db)))


def test_two_sessions_pumping_at_once_start_one_run_per_device(fake):
    db = fake
    with Store(db) as store:
        ids = [store.create_run(spec(ms=20, steps=10), status="queued", host=None) for _ in range(3)]
    ctx = multiprocessing.get_context("fork")
    barrier, results = ctx.Barrier(4), ctx.Queue()
    procs = [ctx.Process(target=_pump_at_once, args=(db, barrier, results)) for _ in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(30)
    assert sum(results.get(timeout=5) for _ in procs) == 1
    with Store(db) as store:
        assert store.count_runs(status="running") == 1
    wait_until(db, lambda: all(status(db, r) == "done" for r in ids))


def test_sweep_goes_on_past_failed_points(fake, capsys, validations):
    db = fake
    code = main(
        [
            "sweep",
            "--model",
            "conv2d",
            "--device",
            "cpu",
            "--batch-sizes",
            "4,13,17,8",
            "--steps",
            "2",
            "--db",
            str(db),
            "--json",
        ]
    )
    assert len(validations) == 4  # each point once, where it entered; the rest is read from the rows
    out = json.loads(capsys.readouterr().out)
    assert code == 1  # not every point succeeded
    assert re.fullmatch(r"sweep-\d{8}-\d{6}-[0-9a-f]{8}", out["sweep_id"])  # as the Run page makes them
    assert [p["status"] for p in out["points"]] == ["done", "failed", "failed", "done"]
    assert [p["batch_size"] for p in out["points"]] == [4, 13, 17, 8]
    assert out["points"][3]["examples_per_sec"] == 8000.0
    with Store(db) as store:
        assert set(store.runs(sweep_id=out["sweep_id"])["batch_size"]) == {4, 8, 13, 17}


def test_sweep_refuses_bad_points_before_running_any(fake, capsys):
    code = main(
        ["sweep", "--model", "conv2d", "--device", "cpu", "--batch-sizes", "4,7", "--replicas", "2", "--db", str(fake)]
    )
    assert code == 2
    assert "error: batch_size: batch size 7 is not divisible by 2 replicas" in capsys.readouterr().err
    assert main(["sweep", "--model", "conv2d", "--batch-sizes", "4,x", "--db", str(fake)]) == 2
    assert "error: batch_sizes: must be whole numbers" in capsys.readouterr().err
    assert not fake.exists() or Store(fake).count_runs() == 0


def test_real_job_is_submitted_and_finishes(tmp_path, monkeypatch):
    db = tmp_path / "real.sqlite"
    monkeypatch.setenv("DASHBENCH_CPU_PEAKS", '{"float32": 0.2}')  # given by hand: no CPU probe first
    run_id = queue.submit(RunSpec(batch_size=4, steps=4, warmup=1, **TINY), db)
    try:
        wait_until(db, lambda: status(db, run_id) not in ("queued", "running"), timeout=600)
    finally:
        _stop_everything(db)
    with Store(db) as store:
        run = store.get_run(run_id)
        assert run["status"] == "done", run["error"] or open(run["log_path"]).read()[-2000:]
        assert run["result"].examples_per_sec > 0 and run["result"].accelerator == "CPU"
        samples = store.samples(run_id)
        assert int(samples.loc[~samples["warmup"], "steps"].sum()) == 4


def test_sweep_stopped_by_sigterm_exits_143_as_run_does(fake):
    """A real `sweep` process (the stand-in engine behind its run command) sent SIGTERM while a point
    measures: it cancels its points and exits 128 + 15, as `run` does, not 130 (Ctrl-C's code)."""
    db = fake
    sweep = textwrap.dedent(f"""
        import sys
        from dashbench.cli import main
        from dashbench.jobs import queue
        queue.RUN_COMMAND = {queue.RUN_COMMAND!r}
        sys.exit(main(["sweep", "--model", "conv2d", "--device", "cpu", "--batch-sizes", "4,8", "--steps", "2000",
                       "--seed", "50", "--db", {str(db)!r}]))
    """)
    proc = subprocess.Popen([sys.executable, "-c", sweep], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:

        def measuring():
            if not db.exists():
                return False
            with Store(db) as store:
                running = store.runs(status="running")["run_id"]
                return len(running) == 1 and not store.samples(running.iloc[0]).empty

        # A point measuring: the sweep has its handler in place, the point its own. (Not wait_until:
        # its pump would start points from this process.)
        deadline = time.monotonic() + 60
        while not measuring() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.1)
        assert measuring(), proc.poll()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM, err[-2000:]
    assert "cancelled" in err
    with Store(db) as store:
        assert set(store.runs()["status"]) == {"cancelled"}
