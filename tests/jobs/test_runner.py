"""The run lifecycle recorded around the engine: done, failed, cancelled, and a real SIGKILL."""

import os
import signal
import subprocess
import sys
import time

import pytest
from fixtures.stored_runs import SPEC, result_for

from dashbench.core.spec import RunSpec, SpecError
from dashbench.engine import loop
from dashbench.jobs import run_signals, runner
from dashbench.results.result import RunResult
from dashbench.store import Store, StoreError

# On JAX (a third of TensorFlow's start-up; the store's side does not depend on the backend).
TINY = ["--model", "conv2d", "--image-size", "8", "--width", "2", "--device", "cpu", "--backend", "jax"]


class FakeEngine:
    """Stands in for dashbench.engine.loop: emits the engine's events, then does what the test asks."""

    def __init__(self, loops=4, then=None):
        self.loops, self.then = loops, then

    def run(self, spec, on_event=None):
        on_event({"event": "phase", "phase": "compile"})
        on_event({"event": "compiled", "compile_s": 0.5})
        for i in range(self.loops):
            if i < 2:
                on_event({"event": "phase", "phase": "warmup" if i == 0 else "measure"})
            on_event(
                {
                    "event": "sample",
                    "index": i,
                    "steps": spec.steps_per_loop,
                    "duration_s": 0.01,
                    "loss": 2.0 - i * 0.1,
                    "warmup": i == 0,
                }
            )
        if self.then is not None:
            self.then()
        return RunResult.from_dict(result_for(spec, 1234.0))


@pytest.fixture
def engine(monkeypatch):
    fake = FakeEngine()
    # execute() looks up loop.run when it is called.
    monkeypatch.setattr(loop, "run", fake.run)
    return fake


def test_done_records_result_and_samples(tmp_path, engine):
    events = []
    result = runner.execute(SPEC, db_path=tmp_path / "r.sqlite", on_event=events.append)
    assert result.run_id and result.examples_per_sec == 1234.0
    assert [e["event"] for e in events].count("sample") == 4  # the caller still sees every event
    with Store(tmp_path / "r.sqlite") as store:
        run = store.get_run(result.run_id)
        assert run["status"] == "done" and run["result"] == result
        assert run["pid"] == os.getpid() and run["finished_at"] and run["phase"] is None
        samples = store.samples(result.run_id)
        assert list(samples["index"]) == [0, 1, 2, 3] and list(samples["warmup"]) == [True, False, False, False]


def test_a_runs_last_batch_of_samples_is_written_with_its_end(tmp_path, engine, monkeypatch):
    engine.loops = 2 * runner.FLUSH_EVERY_N  # fast loops: samples go by the batch, none by the clock
    monkeypatch.setattr(runner, "FLUSH_EVERY_S", 3600.0)
    writes = []
    for name in ("add_samples", "finish_run"):
        real = getattr(Store, name)
        monkeypatch.setattr(
            Store,
            name,
            lambda self, *a, real=real, name=name, **k: (
                writes.append((name, len(k.get("samples") or (a[1] if name == "add_samples" else [])))),
                real(self, *a, **k),
            )[1],
        )
    result = runner.execute(SPEC, db_path=tmp_path / "r.sqlite")
    # The warmup sample goes when the measured phase begins (a phase change writes what is pending).
    n = runner.FLUSH_EVERY_N
    assert writes == [("add_samples", 1), ("add_samples", n), ("finish_run", n - 1)]
    with Store(tmp_path / "r.sqlite") as store:
        assert list(store.samples(result.run_id)["index"]) == list(range(2 * runner.FLUSH_EVERY_N))
        assert store.get_run(result.run_id)["status"] == "done"


def test_failure_is_recorded_with_its_text_and_raised(tmp_path, engine):
    def broken():  # not a memory error: that one ends oom (tests/jobs/test_oom.py)
        raise RuntimeError("the kernel launch failed: invalid argument")

    engine.then = broken
    with pytest.raises(RuntimeError):
        runner.execute(SPEC, db_path=tmp_path / "r.sqlite")
    with Store(tmp_path / "r.sqlite") as store:
        run = store.runs().iloc[0]
        assert run["status"] == "failed"
        assert run["error"] == "RuntimeError: the kernel launch failed: invalid argument"
        assert len(store.samples(run["run_id"])) == 4  # measured before the failure: kept


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_signal_cancels_the_run(tmp_path, engine, sig):
    engine.then = lambda: os.kill(os.getpid(), sig)
    before = signal.getsignal(sig)
    with pytest.raises(run_signals.RunCancelled) as caught:
        runner.execute(SPEC, db_path=tmp_path / "r.sqlite")
    assert caught.value.exit_code == 128 + sig
    assert signal.getsignal(sig) is before  # handlers are put back
    with Store(tmp_path / "r.sqlite") as store:
        run = store.runs().iloc[0]
        assert run["status"] == "cancelled" and signal.Signals(sig).name in run["error"]
        assert len(store.samples(run["run_id"])) == 4


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_multi_host_process_cancelled_after_its_launcher_ended_the_run_keeps_that_end(
    tmp_path, engine, monkeypatch, sig
):
    """fleet/slices.py records a lost host's run `interrupted: host lost: <name>`, then cancels the other
    hosts' processes: worker 0's own cancel must not turn that verdict into `cancelled`."""
    import json

    from dashbench.store.placement import end_group_run

    monkeypatch.setenv(
        "TF_CONFIG", json.dumps({"cluster": {"worker": ["a:1", "b:1"]}, "task": {"type": "worker", "index": 0}})
    )
    db = tmp_path / "r.sqlite"

    def host_lost_then_cancelled():
        with Store(db) as store:
            end_group_run(store, store.runs()["run_id"].iloc[0], "interrupted", "host lost: b")
        os.kill(os.getpid(), sig)

    engine.then = host_lost_then_cancelled
    with pytest.raises((run_signals.RunCancelled, KeyboardInterrupt)):
        runner.execute(SPEC, db_path=db)
    with Store(db) as store:
        run = store.runs().iloc[0]
    assert (run["status"], run["error"]) == ("interrupted", "host lost: b")


def _signal_inside_a_keras_call_and_a_broad_except(sig):
    """What the CI saw: a SIGTERM that lands inside a Keras layer's call (Keras re-creates the
    exception with its arguments added) and an OOM stop raised inside a library's best-effort
    `except Exception` block."""
    import keras

    class Signalling(keras.layers.Layer):
        def call(self, x):
            os.kill(os.getpid(), sig)
            return x

    try:
        Signalling()(keras.ops.ones((1, 2)))
    except Exception:  # a library's "best effort": must not swallow the end
        pass


@pytest.mark.parametrize("sig", [signal.SIGTERM, run_signals.OOM_SIGNAL])
def test_a_signal_inside_a_framework_call_keeps_its_meaning(tmp_path, engine, sig):
    engine.then = lambda: _signal_inside_a_keras_call_and_a_broad_except(sig)
    with pytest.raises((run_signals.RunCancelled, run_signals.OutOfHostMemory)):
        runner.execute(SPEC, db_path=tmp_path / "r.sqlite")
    with Store(tmp_path / "r.sqlite") as store:
        run = store.runs().iloc[0]
    if sig == signal.SIGTERM:
        assert run["status"] == "cancelled" and run["error"] == "cancelled by SIGTERM"
    else:
        assert run["status"] == "oom" and run["error"].startswith("out of host memory")


def _a_library_that_wraps_every_error(sig, chained: bool):
    """A signal inside a library that turns whatever it catches into its own error type: chained (a
    wrapper's `raise ... from`) or with its chain lost (native code that converts the exception)."""
    try:
        os.kill(os.getpid(), sig)
        time.sleep(5)  # the handler raises before this ends
    except BaseException as exc:
        if chained:
            raise RuntimeError("the library's call failed") from exc
    raise RuntimeError("the library's call failed: an unknown error")


@pytest.mark.parametrize("chained", [True, False])
@pytest.mark.parametrize("sig", [signal.SIGTERM, run_signals.OOM_SIGNAL])
def test_a_stop_that_a_library_turned_into_its_own_error_keeps_its_meaning(tmp_path, engine, sig, chained):
    engine.then = lambda: _a_library_that_wraps_every_error(sig, chained)
    with pytest.raises((run_signals.RunCancelled, run_signals.OutOfHostMemory)) as caught:
        runner.execute(SPEC, db_path=tmp_path / "r.sqlite")
    assert isinstance(caught.value.__cause__, RuntimeError)
    with Store(tmp_path / "r.sqlite") as store:
        run = store.runs().iloc[0]
    if sig == signal.SIGTERM:
        assert (run["status"], run["error"]) == ("cancelled", "cancelled by SIGTERM")
    else:
        assert run["status"] == "oom" and run["error"].startswith("out of host memory")


def test_queued_row_is_started_and_finished(tmp_path, engine):
    db = tmp_path / "r.sqlite"
    with Store(db) as store:
        run_id = store.create_run(SPEC.replace(label="queued one"), status="queued", sweep_id="s")
    result = runner.execute(None, db_path=db, run_id=run_id)  # the spec comes from the row
    assert result.run_id == run_id
    with Store(db) as store:
        run = store.get_run(run_id)
        assert run["status"] == "done" and run["sweep_id"] == "s" and run["spec"]["label"] == "queued one"
        assert run["started_at"] and run["pid"] == os.getpid()
        cancelled = store.create_run(SPEC, status="queued")
        store.request_cancel(cancelled)
    with pytest.raises(Exception, match="is cancelled; only a queued run can start"):
        runner.execute(None, db_path=db, run_id=cancelled)


def test_a_stored_run_runs_its_stored_spec_and_no_other(tmp_path, engine):
    db = tmp_path / "s.sqlite"
    with Store(db) as store:
        run_id = store.create_run(SPEC, status="queued")
    assert runner.stored_spec(db, run_id) == SPEC and runner.stored_spec(db, "no-such-run") is None
    with pytest.raises(SpecError, match=f"^steps: run {run_id} is stored with steps {SPEC.steps}, not 99"):
        runner.execute(SPEC.replace(steps=99), db_path=db, run_id=run_id)
    with Store(db) as store:
        assert store.get_run(run_id)["status"] == "queued"  # refused before it started
    assert runner.execute(runner.stored_spec(db, run_id), db_path=db, run_id=run_id).run_id == run_id


def test_unrecorded_run_touches_no_database(tmp_path, engine, monkeypatch):
    monkeypatch.setenv("DASHBENCH_DB", str(tmp_path / "default.sqlite"))
    result = runner.execute(SPEC, record=False)
    assert result.run_id is None and result.examples_per_sec == 1234.0
    assert not (tmp_path / "default.sqlite").exists()


def test_samples_are_committed_while_the_run_goes(tmp_path, engine, monkeypatch):
    db = tmp_path / "r.sqlite"
    monkeypatch.setattr(runner, "FLUSH_EVERY_S", 0.0)
    seen = []

    def look():
        with Store(db, read_only=True) as reader:  # another connection: sees only committed rows
            seen.append(len(reader.samples(reader.runs()["run_id"].iloc[0])))

    engine.then = look
    runner.execute(SPEC, db_path=db)
    assert seen == [4]


def test_real_run_killed_with_sigkill_is_interrupted_and_keeps_samples(tmp_path, monkeypatch):
    db = tmp_path / "r.sqlite"
    monkeypatch.setenv("DASHBENCH_CPU_PEAKS", '{"float32": 0.2}')  # given by hand: no CPU probe first
    # Long enough to be killed mid-way; each loop of this tiny model takes milliseconds.
    argv = [
        sys.executable,
        "-m",
        "dashbench",
        "run",
        *TINY,
        "--batch-size",
        "4",
        "--steps",
        "90000",
        "--warmup",
        "1",
        "--db",
        str(db),
    ]
    log = open(tmp_path / "run.log", "wb")  # a file, not a pipe: progress lines must never block the run
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=log)
    try:
        # Generous: the loop ends as soon as samples land, but on a loaded 2-core machine (the whole
        # suite, other TF processes) importing TensorFlow and compiling alone can take a minute or more.
        deadline = time.monotonic() + 300
        measured = 0
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with Store(db, read_only=True) as store:
                    runs = store.runs()
                    if len(runs):
                        samples = store.samples(runs["run_id"].iloc[0])
                        measured = int((~samples["warmup"]).sum())
            except StoreError:
                pass  # the run process has not created the file yet
            if measured >= 3:
                break
            time.sleep(0.2)
        assert proc.poll() is None, (tmp_path / "run.log").read_text()[-3000:]
        assert measured >= 3, "the run never recorded samples: " + (tmp_path / "run.log").read_text()[-3000:]
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.close()
    with Store(db) as store:
        run_id = store.runs()["run_id"].iloc[0]
        assert store.get_run(run_id)["status"] == "running"  # nobody could write the end...
        assert store.reconcile() == 1  # ...so the store finds the dead process
        run = store.get_run(run_id)
        assert run["status"] == "interrupted" and f"pid {proc.pid}" in run["error"]
        assert len(store.samples(run_id)) >= measured
        assert RunSpec.from_dict(run["spec"]).steps == 90000
