"""Reliability cases on real SQLite files and real processes: a database this user cannot
write, read-only browsing, a write lock held past the busy timeout, an empty --db, colliding
bundle runs, and sweeps whose parent is hung up on or killed."""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest
from fixtures.cli_runs import TINY_RUN, file_hash, fill, run_cli
from fixtures.stored_runs import SPEC

from dashbench.cli import main
from dashbench.core.spec import RunSpec
from dashbench.store import Store

# -- a database file this user cannot write ---------------------------------------------------------


@pytest.fixture
def unwritable(tmp_path):
    """A database with one run that the CLI, started as another process, cannot write: as root
    (which ignores file modes) the commands run as `nobody` through setpriv; otherwise the file and
    its folder lose their write bits. Yields (db, bundle to import, argv prefix, env)."""
    root = os.geteuid() == 0
    if root and not shutil.which("setpriv"):
        pytest.skip("running as root without setpriv: no way to make a file unwritable")
    folder = Path(tempfile.mkdtemp(prefix="dashbench-ro-"))  # tmp_path's parents are private to root
    try:
        db = folder / "ro.sqlite"
        fill(db)
        other = tmp_path / "other.sqlite"
        fill(other, label="elsewhere")
        bundle = folder / "bundle.json"
        assert main(["export", "--db", str(other), "--out", str(bundle)]) == 0
        locks = folder / "locks"
        locks.mkdir()
        locks.chmod(0o777)
        env = {**os.environ, "HOME": str(folder), "DASHBENCH_LOCK_DIR": str(locks)}
        if root:
            prefix = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
            folder.chmod(0o755)
            for path in folder.iterdir():
                if path.is_file():
                    path.chmod(0o644)
        else:
            prefix = []
            db.chmod(0o444)
            folder.chmod(0o555)
        yield db, bundle, prefix, env
    finally:
        folder.chmod(0o755)
        shutil.rmtree(folder, ignore_errors=True)


def cli_process(prefix, env, *argv, timeout=120):
    return subprocess.run(
        [*prefix, sys.executable, "-m", "dashbench", *map(str, argv)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=env["HOME"],
    )


@pytest.mark.parametrize(
    "argv",
    [
        ["delete", "{run_id}", "--force"],
        ["import", "{bundle}"],
        ["prices", "set", "--device", "CPU", "--unit", "hour", "--on-demand", "0.1"],
        ["prices", "reset"],
        ["run", *TINY_RUN],
        [
            "sweep",
            "--model",
            "conv2d",
            "--device",
            "cpu",
            "--batch-sizes",
            "8,16",
            "--image-size",
            "16",
            "--width",
            "8",
            "--steps",
            "2",
            "--warmup",
            "0",
        ],
    ],
    ids=lambda argv: " ".join(argv[:2]),
)
def test_a_command_that_writes_an_unwritable_database_says_so_in_one_line(unwritable, argv):
    db, bundle, prefix, env = unwritable
    with Store(db, read_only=True) as store:
        run_id = store.runs()["run_id"].iloc[0]
    before = file_hash(db)
    argv = [a.format(run_id=run_id, bundle=bundle) for a in argv]
    started = time.monotonic()
    proc = cli_process(prefix, env, *argv, "--db", db)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert str(db) in lines[0] and "read-only" in lines[0] and "not writable" in lines[0]
    if argv[0] in ("run", "sweep", "prices"):
        assert lines[0].startswith("error: db: ")
    if argv[0] in ("run", "sweep"):
        assert time.monotonic() - started < 60  # refused up front, not after loading TensorFlow and training
    assert file_hash(db) == before
    with Store(db, read_only=True) as store:
        assert list(store.runs()["run_id"]) == [run_id] and store.get_run(run_id)["status"] == "done"


def test_an_unwritable_database_can_still_be_listed_shown_and_exported(unwritable):
    db, _bundle, prefix, env = unwritable
    before = file_hash(db)
    listed = cli_process(prefix, env, "list", "--json", "--db", db)
    assert listed.returncode == 0, listed.stderr
    run_id = json.loads(listed.stdout)[0]["run_id"]
    shown = cli_process(prefix, env, "show", run_id[:12], "--db", db)
    assert shown.returncode == 0 and run_id in shown.stdout, shown.stderr
    out = Path(env["HOME"]) / "locks" / "out.json"  # a folder this user may write
    exported = cli_process(prefix, env, "export", "--db", db, "--out", out)
    assert exported.returncode == 0, exported.stderr
    assert file_hash(db) == before


# -- read-only browsing -----------------------------------------------------------------------------


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


@pytest.fixture
def stranded(tmp_path):
    """A database with a done run and a run marked running whose process is gone: reconciling
    it (what `list` does when it may write) is a write."""
    db = tmp_path / "b.sqlite"
    fill(db)
    with Store(db) as store:
        stranded = store.create_run(SPEC.replace(label="stranded"), pid=dead_pid())
    return db, stranded


def snapshot(db) -> tuple:
    stat = os.stat(db)
    return file_hash(db), stat.st_mtime_ns, stat.st_size


@pytest.mark.parametrize("how", ["env", "flag"])
def test_list_show_and_export_in_read_only_mode_never_write(how, stranded, tmp_path, capsys, monkeypatch):
    db, run_id = stranded
    flag = []
    if how == "env":
        monkeypatch.setenv("DASHBENCH_READ_ONLY", "1")
    else:
        flag = ["--read-only"]
    before = snapshot(db)
    code, out, err = run_cli(capsys, "list", "--json", "--db", db, *flag)
    assert code == 0, err
    assert {r["run_id"]: r["status"] for r in json.loads(out)}[run_id] == "running"
    code, out, err = run_cli(capsys, "show", run_id, "--db", db, *flag)
    assert code == 0 and f"run {run_id} (#{run_id[-6:]} in the dashboard): running" in out, err
    code, out, err = run_cli(capsys, "export", "--db", db, "--out", tmp_path / "x.json", *flag)
    assert code == 0 and "exported 2 runs" in out, err
    assert snapshot(db) == before
    assert not list(db.parent.glob(db.name + "-*"))  # no -wal or -shm file left beside it either
    monkeypatch.delenv("DASHBENCH_READ_ONLY", raising=False)
    # Without read-only, the same `list` does write: the check above is not vacuous.
    code, out, _ = run_cli(capsys, "list", "--json", "--db", db)
    assert {r["run_id"]: r["status"] for r in json.loads(out)}[run_id] == "interrupted"


@pytest.mark.parametrize(
    "argv",
    [
        ["delete", "{run_id}", "--force"],
        ["import", "{bundle}"],
        ["prices", "set", "--device", "CPU", "--unit", "hour", "--on-demand", "0.1"],
        ["prices", "reset"],
        ["run", *TINY_RUN],
        ["preset", "colab-conv2d", "--device", "cpu", "--quick"],
        ["sweep", "--model", "conv2d", "--device", "cpu", "--batch-sizes", "8,16"],
    ],
    ids=lambda argv: " ".join(argv[:2]),
)
def test_writing_commands_refuse_read_only_mode_in_one_line(argv, stranded, tmp_path, capsys, monkeypatch):
    db, run_id = stranded
    bundle = tmp_path / "other.json"
    other = tmp_path / "other.sqlite"
    fill(other, label="elsewhere")
    assert main(["export", "--db", str(other), "--out", str(bundle)]) == 0
    capsys.readouterr()
    monkeypatch.setenv("DASHBENCH_READ_ONLY", "1")
    before = snapshot(db)
    code, out, err = run_cli(capsys, *[a.format(run_id=run_id, bundle=bundle) for a in argv], "--db", db)
    assert code == 2 and out == "", err
    last = err.strip().splitlines()[-1]  # preset names itself on a line first, as for any db error
    assert err.count("error:") == 1 and last.startswith("error: db: cannot ") and "read-only mode" in last, err
    assert argv[0] == "preset" or err.count("\n") == 1
    assert snapshot(db) == before


# -- a write lock held by another process -----------------------------------------------------------

LOCKER = textwrap.dedent("""
    import sqlite3, sys, time
    conn = sqlite3.connect(sys.argv[1], isolation_level=None)
    conn.execute("BEGIN EXCLUSIVE")
    print("locked", flush=True)
    time.sleep(float(sys.argv[2]))
    conn.execute("COMMIT")
""")


def hold_write_lock(db, seconds: float) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", LOCKER, str(db), str(seconds)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "locked"
    return proc


def test_a_write_lock_held_past_the_busy_timeout_does_not_fail_a_run(tmp_path, monkeypatch):
    """Another process holds the write lock 4x the busy timeout while the run has samples to write:
    the run's writes wait (with backoff) and the run ends done with every sample; a command's
    write, which does not retry, fails in one line naming the lock."""
    from dashbench.engine import loop
    from dashbench.jobs import runner
    from dashbench.results.result import RunResult
    from dashbench.store import StoreBusyError

    monkeypatch.setenv("DASHBENCH_BUSY_TIMEOUT_S", "0.5")
    db = tmp_path / "busy.sqlite"
    fill(db)
    lockers = []

    def engine(spec, on_event=None):
        lockers.append(hold_write_lock(db, 2.0))
        for i in range(5):
            on_event({"event": "sample", "index": i, "steps": 1, "duration_s": 0.01, "loss": 1.0, "warmup": False})
        on_event({"event": "phase", "phase": "measure"})  # flushes the samples: blocked by the lock
        return RunResult(
            model=spec.model,
            device="cpu",
            accelerator="CPU",
            accelerator_count=1,
            examples_per_sec=100.0,
            unit="images",
            flags=[],
            global_batch_size=spec.batch_size,
            samples=5,
        )

    monkeypatch.setattr(loop, "run", engine)
    started = time.monotonic()
    result = runner.execute(RunSpec(model="conv2d", batch_size=8, device="cpu", image_size=16, width=8), db)
    assert time.monotonic() - started >= 1.5  # it did wait for the lock
    lockers[0].wait(timeout=10)
    with Store(db) as store:
        assert store.get_run(result.run_id)["status"] == "done"
        assert len(store.samples(result.run_id)) == 5

    locker = hold_write_lock(db, 3.0)
    try:
        with Store(db) as store, pytest.raises(StoreBusyError, match=r"cannot delete runs: database .* is locked"):
            store.delete_runs([result.run_id])
    finally:
        locker.wait(timeout=10)


# -- --db "" ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["list"],
        ["show", "x"],
        ["delete", "x"],
        ["export", "--out", "x.json"],
        ["import", "x.json"],
        ["run", *TINY_RUN],
        ["sweep", "--model", "conv2d", "--batch-sizes", "8"],
        ["preset", "colab-conv2d"],
        ["prices"],
        ["prices", "set", "--device", "CPU", "--unit", "hour", "--on-demand", "1"],
        ["prices", "reset"],
        ["models"],
    ],
    ids=lambda argv: " ".join(argv[:2]),
)
def test_an_empty_db_is_the_same_error_for_every_command(argv, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(capsys, *argv, "--db", "")
    assert code == 2 and err.startswith("error: argument --db: give a path") and err.count("\n") == 1, err
    assert not Path(os.environ["DASHBENCH_DB"]).exists() and list(tmp_path.iterdir()) == []


# -- a bundle run that collides with a stored one ---------------------------------------------------


def test_an_import_names_the_runs_whose_stored_copy_differs(tmp_path, capsys):
    from dashbench.views.results import runs as results

    db = tmp_path / "c.sqlite"
    same, changed = fill(db, runs=2)
    bundle = tmp_path / "b.json"
    assert main(["export", "--db", str(db), "--out", str(bundle)]) == 0
    capsys.readouterr()
    code, out, err = run_cli(capsys, "import", bundle, "--db", db)  # the same runs: nothing to say
    assert code == 0 and "2 already present" in out and err == ""

    data = json.loads(bundle.read_text())
    for run in data["runs"]:
        if run["run_id"] == changed:
            run["result"]["examples_per_sec"] *= 2
            # Its interval too: one that excluded the figure would be refused as a contradiction.
            run["result"]["examples_per_sec_ci95"] = [v and v * 2 for v in run["result"]["examples_per_sec_ci95"]]
    bundle.write_text(json.dumps(data))
    code, out, err = run_cli(capsys, "import", bundle, "--db", db)
    assert code == 0 and "imported 0 runs" in out and "2 already present" in out
    assert err.count("\n") == 1 and err.startswith("warning: 1 of the runs already present differ")
    assert f"{changed}: result" in err and same not in err
    with Store(db) as store:
        assert store.get_run(changed)["result"].examples_per_sec == 1001.0  # the stored copy is kept
        counts = store.import_rows([])
    assert counts["runs_differing"] == []
    assert "differ from the stored copy" in results.import_summary(
        {"files": 1, "runs_added": 0, "runs_skipped": 2, "samples_added": 0, "runs_differing": [f"{changed}: result"]}
    )


# -- a sweep whose parent is hung up on or killed ---------------------------------------------------


@pytest.fixture
def fake_sweep(tmp_path):
    """A real `sweep` process with the stand-in engine of test_jobs behind its run command: three
    points whose steps take 50 ms each, 2000 steps (minutes), so the first is measuring when the
    sweep is stopped. Yields (db, start)."""
    from fixtures.job_waits import FAKE_RUN

    from dashbench.jobs import queue

    script = tmp_path / "fake_run.py"
    script.write_text(FAKE_RUN)
    db = tmp_path / "sweep.sqlite"
    command = [sys.executable, str(script)]
    procs = []

    def start() -> subprocess.Popen:
        code = textwrap.dedent(f"""
            import sys
            from dashbench.cli import main
            from dashbench.jobs import queue
            queue.RUN_COMMAND = {command!r}
            sys.exit(main(["sweep", "--model", "conv2d", "--device", "cpu", "--batch-sizes", "4,8,12",
                           "--steps", "2000", "--seed", "50", "--db", {str(db)!r}]))
        """)
        proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        procs.append(proc)
        deadline = time.monotonic() + 60
        while not _first_point_measuring(db) and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.1)  # not queue.pump: this process must start nothing
        assert _first_point_measuring(db), proc.poll()
        return proc

    yield db, start
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if db.exists():
        with Store(db) as store:
            for run_id in store.runs(status=["queued", "running"])["run_id"]:
                queue.cancel(run_id, db, wait_s=5)


def _first_point_measuring(db) -> bool:
    if not db.exists():
        return False
    with Store(db) as store:
        runs = store.runs()
        running = runs[runs["status"] == "running"]["run_id"]
        return len(runs) == 3 and len(running) == 1 and not store.samples(running.iloc[0]).empty


def _points(db) -> list[dict]:
    with Store(db) as store:
        ids = store.runs().sort_values("batch_size")["run_id"]
        return [store.get_run(run_id) for run_id in ids]


def test_a_sweep_hung_up_on_cancels_its_points_without_starting_the_queued_ones(fake_sweep):
    db, start = fake_sweep
    proc = start()
    proc.send_signal(signal.SIGHUP)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGHUP, err[-2000:]
    first, *queued = _points(db)
    assert first["status"] == "cancelled" and first["started_at"] is not None
    for point in queued:
        assert point["status"] == "cancelled" and point["started_at"] is None, point
        assert not (db.parent / "logs" / f"{point['run_id']}.log").exists()  # never launched
    from dashbench.jobs import queue

    assert queue.pump(db) == []


def test_a_killed_sweep_leaves_no_queued_point_for_a_later_page_load_to_start(fake_sweep):
    from dashbench.jobs import queue

    db, start = fake_sweep
    proc = start()
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    first, *queued = _points(db)
    assert first["status"] == "running" and [p["status"] for p in queued] == ["queued", "queued"]
    # What the Run page does on its next load: pump the queue. The owner is gone, so its queued
    # points are cancelled, and nothing starts, even once the point that was measuring ends.
    assert queue.pump(db) == []
    queue.cancel(first["run_id"], db, wait_s=10)
    assert queue.pump(db) == []
    first, *queued = _points(db)
    assert first["status"] == "cancelled"
    for point in queued:
        assert point["status"] == "cancelled" and point["started_at"] is None, point
        assert "cancelled with sweep" in point["error"] and "ended before this run started" in point["error"]


def test_the_results_page_says_a_locked_database_instead_of_crashing(tmp_path, monkeypatch):
    from dashbench.views.results import runs as results

    monkeypatch.setenv("DASHBENCH_BUSY_TIMEOUT_S", "0.2")
    db = tmp_path / "page.sqlite"
    (run_id,) = fill(db)
    locker = hold_write_lock(db, 2.0)
    try:
        with Store(db) as store:
            message, ok = results.delete_runs(store, [run_id])
    finally:
        locker.wait(timeout=10)
    # md_text escapes the markup characters of the path (shown as text on the page).
    assert not ok and message.startswith("Nothing deleted: cannot delete runs") and "is locked by another" in message
    with Store(db) as store:
        assert store.get_run(run_id)["status"] == "done"
