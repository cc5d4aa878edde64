"""One measuring run per device on a host: real `run` processes (a stand-in engine behind the real
command line, runner and store) and the lock files between them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from dashbench.cli import main
from dashbench.core.spec import RunSpec
from dashbench.jobs import device_lock, queue
from dashbench.store import Store
from dashbench.views.common.format import md_text
from dashbench.views.run.live import live_view

# The real `python -m dashbench run`, with an engine that notes when it measures (in $WINDOWS) and
# measures until the file $GATE exists.
STAND_IN = textwrap.dedent("""
    import os, sys, time
    from dashbench.engine import loop
    from dashbench.results.result import RunResult
    from dashbench.cli import main

    def note(what):
        with open(os.environ["WINDOWS"], "a") as out:
            out.write(f"{what} {os.getpid()} {time.time()!r}\\n")

    def run(spec, on_event=None):
        on_event({"event": "phase", "phase": "measure"})
        note("start")
        index = 0
        while not os.path.exists(os.environ["GATE"]) or index < 3:
            time.sleep(0.02)
            on_event({"event": "sample", "index": index, "steps": 1, "duration_s": 0.02, "loss": 1.0,
                      "warmup": False})
            index += 1
        note("end")
        return RunResult(model=spec.model, device="cpu", accelerator="CPU", accelerator_count=1,
                         examples_per_sec=100.0, unit="images", flags=[], global_batch_size=spec.batch_size,
                         samples=index)

    loop.run = run
    sys.exit(main(["run", *sys.argv[1:]]))
""")

HANG_GUARD_S = 120  # a hang guard, not a timing check


@pytest.fixture
def env(tmp_path):
    script = tmp_path / "stand_in.py"
    script.write_text(STAND_IN)
    return {"script": script, "db": tmp_path / "lock.sqlite", "windows": tmp_path / "windows.txt", "tmp": tmp_path}


def start(env, run_id, *extra, gate=None, device="cpu", db=None):
    gate = gate or env["tmp"] / f"gate-{run_id}"
    proc_env = {**os.environ, "WINDOWS": str(env["windows"]), "GATE": str(gate)}
    argv = [
        sys.executable,
        str(env["script"]),
        "--model",
        "conv2d",
        "--batch-size",
        "4",
        "--device",
        device,
        "--steps",
        "3",
        "--db",
        str(db or env["db"]),
        "--run-id",
        run_id,
        "--json",
        *extra,
    ]
    proc = subprocess.Popen(argv, env=proc_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    proc.gate = gate
    return proc


def open_gate(proc):
    proc.gate.write_text("go")


def windows(env) -> dict[int, dict[str, float]]:
    out: dict[int, dict[str, float]] = {}
    if env["windows"].exists():
        for line in env["windows"].read_text().splitlines():
            what, pid, when = line.split()
            out.setdefault(int(pid), {})[what] = float(when)
    return out


def wait_for(predicate, what: str):
    deadline = time.monotonic() + HANG_GUARD_S
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def row(env, run_id):
    if not env["db"].exists():
        return None
    with Store(env["db"]) as store:
        return store.get_run(run_id)


def phase(env, run_id):
    found = row(env, run_id)
    return found and found["phase"]


def finish(proc):
    out, err = proc.communicate(timeout=HANG_GUARD_S)
    return proc.returncode, out, err


def refused_here(capfd, holder, *argv):
    """A command in this process (no start-up of its own) that must be refused while `holder` measures:
    (exit code, stdout, stderr, whether it waited). Were it to wait for the device instead, the holder's
    gate opens after HANG_GUARD_S, so that the test fails rather than hangs."""
    waited = []
    guard = threading.Timer(HANG_GUARD_S, lambda: (waited.append(True), open_gate(holder)))
    guard.start()
    try:
        code = main([str(a) for a in argv])
    finally:
        guard.cancel()
    out, err = capfd.readouterr()
    return code, out, err, bool(waited)


@pytest.fixture
def procs():
    started = []
    yield started
    for proc in started:  # no test leaves a run process behind
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_two_runs_at_once_measure_one_after_the_other(env, procs):
    both = env["tmp"] / "gate"
    first, second = start(env, "p1", gate=both), start(env, "p2", gate=both)
    procs += [first, second]
    # One measures; the other waits, and says so on its row (the dashboard's live panel) and stderr.
    wait_for(
        lambda: (
            len(windows(env)) == 1
            and any((phase(env, r) or "").startswith("waiting for the device") for r in ("p1", "p2"))
        ),
        "one to wait",
    )
    waiting = "p1" if (phase(env, "p1") or "").startswith("waiting") else "p2"
    holder = {"p1": first, "p2": second}["p2" if waiting == "p1" else "p1"]
    assert f"pid {holder.pid}" in phase(env, waiting)
    assert row(env, waiting)["status"] == "running"
    text = live_view({"status": "running", "phase": phase(env, waiting), "steps_done": 0, "steps_total": 3}).text
    assert text == md_text(phase(env, waiting))  # the wait, holder named; no "step 0 of 3"
    both.write_text("go")
    results = {r: finish(p) for r, p in (("p1", first), ("p2", second))}
    assert [code for code, _o, _e in results.values()] == [0, 0], results
    assert f"waiting for the device (cpu: in use by pid {holder.pid}, run" in results[waiting][2]
    spans = sorted((w["start"], w["end"]) for w in windows(env).values())
    assert len(spans) == 2 and spans[0][1] <= spans[1][0], spans  # measured windows do not overlap
    for run_id in ("p1", "p2"):
        assert row(env, run_id)["status"] == "done"
        assert "device_shared" not in json.loads(results[run_id][1])["flags"]


def test_no_wait_refuses_at_once_naming_the_holder(env, procs, capfd):
    holder = start(env, "p1")
    procs.append(holder)
    wait_for(lambda: windows(env), "the holder to measure")
    code, out, err, waited = refused_here(
        capfd,
        holder,
        "run",
        "--model",
        "conv2d",
        "--batch-size",
        "4",
        "--device",
        "cpu",
        "--steps",
        "3",
        "--db",
        env["db"],
        "--run-id",
        "p2",
        "--json",
        "--no-wait",
    )
    assert code == 2 and not waited
    refusal = json.loads(out)
    assert refusal["status"] == "invalid" and refusal["field"] == "device"
    assert f"pid {holder.pid}, run p1" in refusal["error"] and "--share-device" in refusal["error"]
    assert err.strip().splitlines()[-1].startswith(f"error: device: the cpu device is in use by pid {holder.pid}")
    assert row(env, "p2") is None  # refused before anything was written
    open_gate(holder)
    assert finish(holder)[0] == 0


def test_share_device_measures_at_once_and_is_flagged(env, procs):
    holder = start(env, "p1")
    procs.append(holder)
    wait_for(lambda: windows(env), "the holder to measure")
    sharer = start(env, "p2", "--share-device")
    procs.append(sharer)
    wait_for(lambda: len(windows(env)) == 2, "the sharer to measure beside the holder")
    assert "end" not in windows(env)[holder.pid]  # both measure at once
    open_gate(sharer)
    code, out, _err = finish(sharer)
    assert code == 0 and json.loads(out)["flags"] == ["device_shared"]
    assert row(env, "p2")["result"].flags == ["device_shared"]  # stored with the run
    open_gate(holder)
    code, out, _err = finish(holder)
    # The holder's window was disturbed as much as the sharer's: flagged too.
    assert code == 0 and json.loads(out)["flags"] == ["device_shared"]
    assert row(env, "p1")["result"].flags == ["device_shared"]
    left = [p.name for p in device_lock.lock_dir().iterdir() if p.name != "cpu.lock"]
    assert left == []  # no mark or sharer's file outlives the runs


def test_a_run_that_takes_the_lock_while_a_sharer_still_measures_is_flagged_too(env, procs):
    holder = start(env, "p1")
    procs.append(holder)
    wait_for(lambda: windows(env), "the holder to measure")
    sharer = start(env, "p2", "--share-device")
    waiter = start(env, "p3")
    procs += [sharer, waiter]
    wait_for(lambda: len(windows(env)) == 2 and (phase(env, "p3") or "").startswith("waiting"), "p3 to wait")
    open_gate(holder)  # p3 takes the lock while p2 still measures beside it
    assert finish(holder)[0] == 0
    wait_for(lambda: len(windows(env)) == 3, "the waiting run to measure")
    open_gate(sharer)
    assert finish(sharer)[0] == 0
    open_gate(waiter)
    code, out, _err = finish(waiter)
    assert code == 0 and json.loads(out)["flags"] == ["device_shared"]
    # A run alone on the device afterwards is not flagged.
    alone = start(env, "p4")
    procs.append(alone)
    wait_for(lambda: len(windows(env)) == 4, "the last run to measure")
    open_gate(alone)
    code, out, _err = finish(alone)
    assert code == 0 and json.loads(out)["flags"] == []


def test_a_killed_holder_lets_the_next_run_measure(env, procs):
    holder = start(env, "p1")
    procs.append(holder)
    wait_for(lambda: windows(env), "the holder to measure")
    waiter = start(env, "p2")
    procs.append(waiter)
    wait_for(lambda: (phase(env, "p2") or "").startswith("waiting for the device"), "the second to wait")
    open_gate(waiter)
    holder.kill()
    holder.wait()
    code, out, _err = finish(waiter)
    assert code == 0 and json.loads(out)["status"] == "done"
    assert "start" in windows(env)[waiter.pid]


def test_a_waiting_run_cancelled_by_sigterm_records_cancelled(env, procs):
    holder = start(env, "p1")
    procs.append(holder)
    wait_for(lambda: windows(env), "the holder to measure")
    waiter = start(env, "p2")
    procs.append(waiter)
    wait_for(lambda: (phase(env, "p2") or "").startswith("waiting for the device"), "the second to wait")
    waiter.send_signal(signal.SIGTERM)
    code, out, _err = finish(waiter)
    assert code == 128 + signal.SIGTERM
    assert json.loads(out)["status"] == "cancelled"
    assert row(env, "p2")["status"] == "cancelled"
    assert waiter.pid not in windows(env)  # it never measured
    # The lock it waited for is still the holder's; and the holder goes on to finish.
    assert device_lock.read_holder("cpu")["pid"] == holder.pid
    open_gate(holder)
    assert finish(holder)[0] == 0


def test_a_dashboard_run_waits_for_a_command_line_run_on_another_database(env, procs, monkeypatch):
    holder = start(env, "p1", db=env["tmp"] / "other.sqlite")
    procs.append(holder)
    wait_for(lambda: windows(env), "the holder to measure")
    gate = env["tmp"] / "gate-queued"
    gate.write_text("go")
    monkeypatch.setenv("WINDOWS", str(env["windows"]))
    monkeypatch.setenv("GATE", str(gate))
    monkeypatch.setattr(queue, "RUN_COMMAND", [sys.executable, str(env["script"])])
    run_id = queue.submit(RunSpec(model="conv2d", batch_size=4, device="cpu", steps=3), env["db"])
    # This database's queue knows nothing of the other database's run; the lock does.
    wait_for(
        lambda: (queue.progress(run_id, env["db"])["phase"] or "").startswith("waiting for the device"),
        "the queued run to wait",
    )
    assert "waiting for the device" in live_view(queue.progress(run_id, env["db"])).text
    open_gate(holder)
    assert finish(holder)[0] == 0
    wait_for(lambda: queue.progress(run_id, env["db"])["status"] == "done", "the queued run to finish")


def test_auto_takes_every_kind():
    with device_lock.hold("auto", run_id="a1") as holding:
        assert not holding.shared
        for kind in device_lock.KINDS:
            assert device_lock.read_holder(kind)["run_id"] == "a1"
        with pytest.raises(device_lock.DeviceBusy, match="in use by pid .*, run a1"):
            with device_lock.hold("gpu", device_lock.NO_WAIT):
                pass
    with device_lock.hold("gpu", device_lock.NO_WAIT):  # let go at the end of the block
        pass


def test_preset_refuses_a_held_device_with_no_wait(env, procs, capfd):
    holder = start(env, "p1")
    procs.append(holder)
    wait_for(lambda: windows(env), "the holder to measure")
    code, out, err, waited = refused_here(
        capfd, holder, "preset", "colab-conv2d", "--device", "cpu", "--quick", "--db", env["db"], "--no-wait", "--json"
    )
    assert code == 2 and not waited, err
    refusal = json.loads(out)
    assert refusal["field"] == "device" and f"pid {holder.pid}, run p1" in refusal["error"]
    open_gate(holder)
    assert finish(holder)[0] == 0


def test_bad_input_is_refused_as_bad_input_before_waiting_for_a_held_device(env, procs, tmp_path, capfd):
    holder = start(env, "p1")
    procs.append(holder)
    wait_for(lambda: windows(env), "the holder to measure")
    for extra in ([], ["--no-wait"]):  # neither waits for the device to say the input is wrong
        code, out, _err, waited = refused_here(
            capfd,
            holder,
            "run",
            "--model",
            "conv2d",
            "--batch-size",
            "4",
            "--device",
            "cpu",
            "--steps",
            "3",
            "--db",
            env["db"],
            "--run-id",
            "p2",
            "--json",
            "--data",
            "real",
            "--data-path",
            tmp_path / "none",
            *extra,
        )
        refusal = json.loads(out)
        assert code == 2 and refusal["field"] != "device" and not waited, refusal
    assert row(env, "p2") is None
    open_gate(holder)
    assert finish(holder)[0] == 0


def test_lock_files_in_a_shared_folder_are_writable_by_every_user():
    old = os.umask(0o022)  # the usual umask would make the file 0644
    try:
        with device_lock.hold("cpu"):
            pass
    finally:
        os.umask(old)
    assert (device_lock.lock_dir() / "cpu.lock").stat().st_mode & 0o777 == 0o666


def test_a_second_worker_of_a_multi_worker_run_on_this_host_leaves_the_lock_to_the_first():
    # Both workers of one TF_CONFIG cluster must start before either can step: the second must not
    # wait for the lock the first holds (tests/engine/test_engine.py runs such a cluster on localhost).
    def config(index, workers=("localhost:1000", "localhost:1001")):
        return {
            "TF_CONFIG": json.dumps({"cluster": {"worker": list(workers)}, "task": {"type": "worker", "index": index}})
        }

    assert not device_lock.peer_worker_holds_it(config(0))
    assert device_lock.peer_worker_holds_it(config(1))
    assert device_lock.peer_worker_holds_it(config(1, ("127.0.0.1:1000", "localhost:1001")))
    assert not device_lock.peer_worker_holds_it(config(1, ("host-a:1000", "host-b:1000")))
    assert not device_lock.peer_worker_holds_it({})
    assert not device_lock.peer_worker_holds_it({"TF_CONFIG": "not json"})
